//! Inbound attachments end to end (spec manager §7.3): files read through the channel,
//! uploaded to the thread, referenced in the run's human message; files that do not come
//! through are named in the text and never fail the turn.

use bytes::Bytes;
use im_bridge::simulator::{Fault, Reply, Route, UploadLimits};
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

/// Whether `name` is the name of an unnamed image, the `n`th file of its message:
/// `attachment-<n>-<8 hex digits>.jpg`.
fn is_generated_image_name(name: &str, n: usize) -> bool {
    name.strip_prefix(&format!("attachment-{n}-"))
        .and_then(|rest| rest.strip_suffix(".jpg"))
        .is_some_and(|tag| tag.len() == 8 && tag.bytes().all(|b| b.is_ascii_hexdigit()))
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
    let uploads = h.sim.uploads(&thread);
    // The unnamed image is named by its place and a tag of its message.
    let image = uploads[1].0.clone();
    assert!(is_generated_image_name(&image, 2), "{image}");
    assert_eq!(
        uploads,
        [
            ("notes.txt".to_owned(), 11),
            (image.clone(), 20),
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
                {"filename": image, "size": 20,
                 "path": format!("/mnt/user-data/uploads/{image}"), "is_image": true},
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

#[tokio::test]
async fn a_later_unnamed_image_does_not_replace_an_earlier_one() {
    let h = Harness::start().await;
    // The Gateway replaces an upload of the same name (the simulator too).
    send_with_files(
        &h,
        "first",
        vec![inline(None, FileKind::Image, b"first photo")],
    )
    .await;
    let mut msg = h.message("second");
    msg.files = vec![inline(None, FileKind::Image, b"the second photo")];
    h.send(msg).await;
    h.channel.wait_finals(2).await;
    let uploads = h.sim.uploads(&h.only_thread());
    assert_eq!(uploads.len(), 2, "{uploads:?}");
    assert_ne!(uploads[0].0, uploads[1].0);
    assert!(is_generated_image_name(&uploads[0].0, 1), "{uploads:?}");
    assert!(is_generated_image_name(&uploads[1].0, 1), "{uploads:?}");
    // The first photo is still there, as the first turn told the agent.
    assert_eq!(uploads[0].1, 11);
    assert_eq!(
        human_message(&h)["additional_kwargs"]["files"][0]["path"],
        format!("/mnt/user-data/uploads/{}", uploads[0].0)
    );
    h.stop().await;
}

#[tokio::test]
async fn files_over_the_gateway_limits_together_go_in_several_uploads() {
    let h = Harness::start().await;
    h.sim.configure(|c| {
        c.upload_limits = UploadLimits {
            max_files: 10,
            max_file_size: 6,
            max_total_size: 10,
        }
    });
    send_with_files(
        &h,
        "all of them",
        vec![
            inline(Some("a.txt"), FileKind::File, b"aaaaa"),
            inline(Some("b.txt"), FileKind::File, b"bbbbbb"),
            inline(Some("c.txt"), FileKind::File, b"ccccc"),
            inline(Some("big.txt"), FileKind::File, b"7 bytes"),
        ],
    )
    .await;
    // 11 bytes together: the Gateway would refuse one call with all of them.
    assert_eq!(
        h.sim.uploads(&h.only_thread()),
        [
            ("a.txt".to_owned(), 5),
            ("b.txt".to_owned(), 6),
            ("c.txt".to_owned(), 5),
        ]
    );
    let calls = h.sim.requests_matching(|r| r.path.contains("/uploads"));
    let paths: Vec<&str> = calls
        .iter()
        .map(|r| r.path.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(paths, ["limits", "uploads", "uploads", "uploads"]);
    let message = human_message(&h);
    let names: Vec<&str> = message["additional_kwargs"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filename"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.txt", "b.txt", "c.txt"]);
    // The one file over the Gateway's per-file limit is named; the others still arrive.
    assert_eq!(
        message["content"],
        "all of them\n\n[The attachment “big.txt” is too large to pass on, so it is not included.]"
    );
    h.stop().await;
}
