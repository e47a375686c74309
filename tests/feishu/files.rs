//! Files on Feishu: the files the agent presents are uploaded (an image as an image,
//! anything else as a file) and sent as messages replying to the answer; photos sent
//! together are one question, acknowledged to Feishu only once that question was admitted.
//! (An image reaching the agent is the conformance suite's.)

use im_bridge::simulator::Script;
use im_bridge_fakes::feishu::Event;

use super::harness::{DEADLINE, Fs};
use super::{ALICE, CHAT, cards};

const OUTPUTS: &str = "/mnt/user-data/outputs";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR a tiny chart";
const PDF: &[u8] = b"%PDF-1.7\n% a tiny report\n%%EOF\n";

#[tokio::test]
async fn issue_15_presented_files_come_back_replying_to_the_answer() {
    const ANSWER: &str = "Here is the report and the chart.";
    let fs = Fs::start().await;
    fs.sim.put_output(format!("{OUTPUTS}/report.pdf"), PDF);
    fs.sim.put_output(format!("{OUTPUTS}/chart.png"), PNG);
    fs.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(1).present_files([
            format!("{OUTPUTS}/report.pdf"),
            format!("{OUTPUTS}/chart.png"),
        ]));
    fs.fake
        .push_event(&Event::text(CHAT, ALICE, "the report, please").to_json());
    fs.fake
        .wait_until("an image and a file message", DEADLINE, |fake| {
            let kinds: Vec<_> = fake.messages().into_iter().map(|m| m.msg_type).collect();
            kinds.iter().any(|k| k == "image") && kinds.iter().any(|k| k == "file")
        })
        .await
        .unwrap();

    // The PNG uploaded as an image, the PDF as a file, both sent replying to the answer.
    let uploaded = fs.fake.uploads();
    let image = uploaded.iter().find(|u| u.kind == "image").unwrap();
    assert_eq!(image.bytes, PNG);
    let file = uploaded.iter().find(|u| u.kind == "file").unwrap();
    assert_eq!(file.bytes, PDF);
    assert_eq!(file.name, "report.pdf");
    assert_eq!(file.type_, "pdf");
    let answer = cards(&fs)
        .into_iter()
        .find(|m| m.card_text().starts_with(ANSWER))
        .expect("the answer card");
    for kind in ["image", "file"] {
        let sent = fs
            .fake
            .messages()
            .into_iter()
            .find(|m| m.msg_type == kind)
            .unwrap();
        assert_eq!(sent.reply_to.as_deref(), Some(answer.message_id.as_str()));
        let key = if kind == "image" {
            &image.key
        } else {
            &file.key
        };
        assert!(sent.content.contains(key.as_str()), "{}", sent.content);
    }
    fs.stop().await;
}

/// An `image/*` file Feishu's image upload does not decode (an SVG) goes up as a file, so
/// it still arrives instead of a line saying it was refused.
#[tokio::test]
async fn a_picture_feishu_cannot_show_as_one_comes_as_a_file() {
    const SVG: &[u8] = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><circle r=\"4\"/></svg>";
    let fs = Fs::start().await;
    fs.sim.put_output(format!("{OUTPUTS}/chart.svg"), SVG);
    fs.sim.script_next_run(
        Script::with_answer("Here is the chart.")
            .chunks(1)
            .present_files([format!("{OUTPUTS}/chart.svg")]),
    );
    fs.fake
        .push_event(&Event::text(CHAT, ALICE, "the chart, please").to_json());
    fs.fake
        .wait_until("a file message", DEADLINE, |fake| {
            fake.messages().iter().any(|m| m.msg_type == "file")
        })
        .await
        .unwrap();
    let uploads = fs.fake.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    assert_eq!(
        (uploads[0].kind, uploads[0].name.as_str()),
        ("file", "chart.svg")
    );
    assert_eq!(uploads[0].bytes, SVG);
    assert!(
        fs.fake.calls_to("images").is_empty(),
        "not tried as an image"
    );
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_photos_sent_together_are_one_question() {
    let fs = Fs::start().await;
    let first = b"\xff\xd8 first photo".to_vec();
    let second = b"\xff\xd8 the second photo".to_vec();
    fs.fake
        .put_resource("om_burst_1", "img_burst_1", first.clone(), "1.jpg");
    fs.fake
        .put_resource("om_burst_2", "img_burst_2", second.clone(), "2.jpg");
    fs.sim
        .script_next_run(Script::with_answer("Two photos of a whiteboard.").chunks(1));
    for (message, key) in [("om_burst_1", "img_burst_1"), ("om_burst_2", "img_burst_2")] {
        fs.fake.push_event(
            &Event::image(CHAT, ALICE, key)
                .p2p()
                .message_id(message)
                .to_json(),
        );
    }
    fs.wait_card("the answer", "Two photos of a whiteboard.")
        .await;
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 1);
    assert_eq!(fs.sim.runs(&threads[0]).len(), 1, "one run for the burst");
    let sizes: Vec<u64> = fs.sim.uploads(&threads[0]).iter().map(|u| u.1).collect();
    assert_eq!(sizes, [first.len() as u64, second.len() as u64]);
    let answer = cards(&fs).pop().unwrap();
    assert_eq!(answer.reply_to.as_deref(), Some("om_burst_1"));
    for message in ["om_burst_1", "om_burst_2"] {
        fs.fake
            .wait_until("its OK reaction", DEADLINE, |fake| {
                fake.reactions(message).contains(&"OK".to_owned())
            })
            .await
            .unwrap();
    }
    fs.stop().await;
}

/// A bridge that stops while it gathers a burst has acknowledged none of its photos, so
/// Feishu delivers them again, and the restarted bridge answers them once, as one question.
#[tokio::test]
async fn a_burst_cut_short_by_a_stop_is_delivered_again_and_answered_once() {
    let fs = Fs::start().await;
    // Feishu re-pushes what it did not see acknowledged (3 s; the test's 2 s).
    fs.fake
        .set_repush_after(Some(std::time::Duration::from_secs(2)));
    let photos = [("om_cut_1", "img_cut_1"), ("om_cut_2", "img_cut_2")];
    let mut events = Vec::new();
    for (message, key) in photos {
        fs.fake
            .put_resource(message, key, b"\xff\xd8 a photo".to_vec(), "p.jpg");
        let event = Event::image(CHAT, ALICE, key).p2p().message_id(message);
        events.push(fs.fake.push_event(&event.to_json()).event_id);
    }
    // Both photos arrived (each has its `OK`): the burst is being gathered. Stop now.
    for (message, _) in photos {
        fs.fake
            .wait_until("its OK reaction", DEADLINE, |fake| {
                fake.reactions(message).contains(&"OK".to_owned())
            })
            .await
            .unwrap();
    }
    let (fake, sim) = fs.stop_keeping().await;
    let acked: Vec<_> = fake
        .acks()
        .into_iter()
        .filter(|a| a.code == Some(200))
        .collect();
    assert!(acked.is_empty(), "acked before admission: {acked:#?}");
    assert!(sim.thread_ids().is_empty(), "nothing ran");
    sim.script_next_run(Script::with_answer("Two photos, once.").chunks(1));
    let fs = Fs::restart_on(fake, sim).await;
    fs.wait_card("the answer", "Two photos, once.").await;
    for event in &events {
        fs.fake.wait_acked(event, DEADLINE).await.unwrap();
    }
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 1);
    assert_eq!(fs.sim.runs(&threads[0]).len(), 1, "answered once");
    assert_eq!(fs.sim.uploads(&threads[0]).len(), 2, "both photos");
    assert_eq!(cards(&fs).len(), 1, "one answer");
    fs.stop().await;
}

/// Feishu delivering one photo of an answered burst again, alone (its ack was lost: the
/// long connection re-sends the event), finds it answered with the burst: no second run,
/// no second answer.
#[tokio::test]
async fn a_photo_of_an_answered_burst_delivered_again_is_not_answered_again() {
    let fs = Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer("Two photos of a cat.").chunks(1));
    let mut events = Vec::new();
    for (message, key) in [("om_again_1", "img_again_1"), ("om_again_2", "img_again_2")] {
        fs.fake
            .put_resource(message, key, b"\xff\xd8 a cat".to_vec(), "cat.jpg");
        let event = Event::image(CHAT, ALICE, key).p2p().message_id(message);
        events.push(event.to_json());
        fs.fake.push_event(events.last().unwrap());
    }
    fs.wait_card("the answer", "Two photos of a cat.").await;
    // The second photo's event again, as Feishu re-sends it.
    let again = fs.fake.push_event(&events[1]).event_id;
    fs.fake
        .wait_until("the photo acknowledged again", DEADLINE, |fake| {
            let acks = fake.acks();
            let acked = acks
                .iter()
                .filter(|a| a.event_id.as_deref() == Some(&*again));
            acked.filter(|a| a.code == Some(200)).count() >= 2
        })
        .await
        .unwrap();
    // The chat's next message is handled after the photo: once it is answered, the photo
    // was handled too.
    fs.sim
        .script_next_run(Script::with_answer("And a dog.").chunks(1));
    fs.fake
        .push_event(&Event::text(CHAT, ALICE, "and this?").p2p().to_json());
    fs.wait_card("the next answer", "And a dog.").await;
    let threads = fs.sim.thread_ids();
    let runs: usize = threads.iter().map(|t| fs.sim.runs(t).len()).sum();
    assert_eq!(runs, 2, "the burst and the next message, nothing more");
    assert_eq!(cards(&fs).len(), 2, "two answers");
    fs.stop().await;
}
