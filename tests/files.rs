//! Inbound attachments end to end (spec manager §7.3): files read through the channel,
//! uploaded to the thread, referenced in the run's human message; files that do not come
//! through are named in the text and never fail the turn.

use bytes::Bytes;
use im_bridge::simulator::{Fault, Reply, Route};
use im_bridge_channel::{FileKind, FileSource, InboundFile, InboundMessage};
use serde_json::{Value, json};

use crate::support::Harness;

fn inline(name: Option<&str>, kind: FileKind, bytes: &'static [u8]) -> InboundFile {
    InboundFile {
        kind,
        filename: name.map(str::to_owned),
        mime_type: None,
        size: Some(bytes.len() as u64),
        source: FileSource::Inline {
            bytes: Bytes::from_static(bytes),
        },
    }
}

/// The human message of the thread's only run.
fn human_message(h: &Harness) -> Value {
    let run = h
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/runs/stream"))
        .expect("a run");
    run.json().unwrap()["input"]["messages"][0].clone()
}

async fn send_with_files(h: &Harness, text: &str, files: Vec<InboundFile>) -> InboundMessage {
    let mut msg = h.message(text);
    msg.files = files;
    h.send(msg.clone()).await;
    h.channel.wait_finals(1).await;
    msg
}

#[tokio::test]
async fn attachments_are_uploaded_and_referenced_in_the_run() {
    let h = Harness::start().await;
    send_with_files(
        &h,
        "summarise these",
        vec![
            inline(Some("notes.txt"), FileKind::File, b"first notes"),
            inline(None, FileKind::Image, b"\xff\xd8 not really a jpeg"),
            inline(Some("dir/notes.txt"), FileKind::File, b"second"),
        ],
    )
    .await;
    let thread = h.only_thread();
    assert_eq!(
        h.sim.uploads(&thread),
        [
            ("notes.txt".to_owned(), 11),
            ("attachment-2.jpg".to_owned(), 20),
            ("notes-2.txt".to_owned(), 6),
        ]
    );
    let upload = h
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/uploads"))
        .expect("one upload call");
    // Issue 26: the upload acts for the same DeerFlow user as the run that reads it.
    assert_eq!(
        upload.header("x-deerflow-owner-user-id"),
        Some("telegram-user-u1")
    );
    assert!(
        upload.header("x-csrf-token").is_some(),
        "uploads are writes"
    );
    assert_eq!(
        human_message(&h),
        json!({
            "role": "human",
            "content": "summarise these",
            "additional_kwargs": {"files": [
                {"filename": "notes.txt", "size": 11,
                 "path": "/mnt/user-data/uploads/notes.txt", "is_image": false},
                {"filename": "attachment-2.jpg", "size": 20,
                 "path": "/mnt/user-data/uploads/attachment-2.jpg", "is_image": true},
                {"filename": "notes-2.txt", "size": 6,
                 "path": "/mnt/user-data/uploads/notes-2.txt", "is_image": false},
            ]},
        })
    );
    h.stop().await;
}

#[tokio::test]
async fn an_unreadable_attachment_is_named_in_the_text_and_the_run_goes_on() {
    let h = Harness::start().await;
    let handle = InboundFile {
        kind: FileKind::File,
        filename: Some("report.pdf".into()),
        mime_type: Some("application/pdf".into()),
        size: None,
        // The test channel reads inline bytes only.
        source: FileSource::Handle { id: "h1".into() },
    };
    send_with_files(&h, "what does it say?", vec![handle]).await;
    assert!(h.sim.uploads(&h.only_thread()).is_empty());
    assert!(
        !h.sim
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/uploads")),
        "nothing to upload"
    );
    assert_eq!(
        human_message(&h),
        json!({
            "role": "human",
            "content": "what does it say?\n\n[The attachment “report.pdf” could not be read, so it is not included.]",
        })
    );
    h.stop().await;
}

#[tokio::test]
async fn a_file_larger_than_it_claimed_is_named_as_too_large() {
    let h = Harness::start().await;
    let mut liar = inline(Some("big.log"), FileKind::File, b"five!");
    // It reserved room for two bytes and brought five.
    liar.size = Some(2);
    send_with_files(&h, "look", vec![liar]).await;
    assert_eq!(
        human_message(&h)["content"],
        "look\n\n[The attachment “big.log” is too large to pass on, so it is not included.]"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_refused_upload_names_every_file_and_the_run_goes_on() {
    let h = Harness::start().await;
    h.sim.push_fault(
        Fault::on(Route::Uploads).reply(Reply::detail(413, "Total upload size too large")),
    );
    send_with_files(
        &h,
        "",
        vec![
            inline(Some("a.csv"), FileKind::File, b"1,2"),
            inline(Some("b.csv"), FileKind::File, b"3,4"),
        ],
    )
    .await;
    assert_eq!(
        human_message(&h),
        json!({
            "role": "human",
            "content": "[The attachment “a.csv” could not be read, so it is not included.]\n[The attachment “b.csv” could not be read, so it is not included.]",
        })
    );
    h.stop().await;
}
