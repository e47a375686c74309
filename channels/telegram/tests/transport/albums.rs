//! Albums: the parts Telegram delivers one update each become one message, by polling
//! (acknowledged only once admitted) or by the webhook.

use im_bridge_channel::{FileSource, InboundMessage};
use im_bridge_fakes::telegram::Injected;

use super::*;

/// An album of `n` photos from user 1, the second captioned `caption`.
fn album(fake: &FakeTelegram, n: usize, caption: &str) -> Vec<Injected> {
    let parts = (0..n)
        .map(|i| {
            let part = Incoming::private(1, if i == 1 { caption } else { "" }).as_caption();
            part.photo(&format!("photo-{i}"), 640, 480)
        })
        .collect();
    fake.make_album(parts)
}

async fn recv(queue: &mut InboundQueue) -> InboundMessage {
    tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("a message in time")
        .expect("an open queue")
}

/// Asserts `msg` is the whole of `parts`: the first part's id, every photo, the caption.
fn assert_album(msg: &InboundMessage, parts: &[Injected], caption: &str) {
    assert_eq!(msg.text, caption);
    let first = parts[0].message_id.to_string();
    assert_eq!(
        msg.thread_ts.as_ref().map(|t| t.as_str()),
        Some(first.as_str())
    );
    let files: Vec<String> = msg
        .files
        .iter()
        .map(|f| match &f.source {
            FileSource::Handle { id } => id.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let want: Vec<String> = (0..parts.len()).map(|i| format!("photo-{i}")).collect();
    assert_eq!(files, want);
}

#[tokio::test]
async fn polling_gathers_an_album_across_polls_into_one_message() {
    let fake = FakeTelegram::start().await.unwrap();
    let channel = TelegramChannel::new(
        polling(&fake, Duration::from_secs(5)),
        &build_context(AllowedUsers::Anyone),
    )
    .unwrap();
    let (running, mut queue) = Running::start(channel, 4);
    let parts = album(&fake, 3, "which one is sharper?");
    // The first part comes alone; the rest, and a message after the album, a poll later.
    fake.push_update(parts[0].update.clone());
    fake.wait_for("the first part polled", DEADLINE, |calls| {
        calls.iter().any(|c| returned(c, parts[0].update_id))
    })
    .await
    .unwrap();
    for part in &parts[1..] {
        fake.push_update(part.update.clone());
    }
    let after = fake.inject(Incoming::private(1, "and one more thing"));
    let one = recv(&mut queue).await;
    assert_album(&one, &parts, "which one is sharper?");
    // What followed the album comes after it, on its own.
    assert_eq!(recv(&mut queue).await.text, "and one more thing");
    fake.wait_for_call("all acknowledged", DEADLINE, |call| {
        call.method == "getUpdates" && offset(call) == Some(after.update_id + 1)
    })
    .await
    .unwrap();
    assert!(fake.pending_updates().is_empty());
    running.stop().await;
}

/// A crash while an album gathers or waits for room loses none of it: Telegram still
/// holds every part, and the next start gets the album whole.
#[tokio::test]
async fn an_album_is_not_acknowledged_before_it_is_admitted() {
    let fake = FakeTelegram::start().await.unwrap();
    let settings = polling(&fake, Duration::from_secs(5));
    let channel =
        TelegramChannel::new(settings.clone(), &build_context(AllowedUsers::Anyone)).unwrap();
    // A queue of one, filled by a message nobody takes: the album cannot be admitted.
    let (running, _queue) = Running::start(channel, 1);
    let blocker = fake.inject(Incoming::private(1, "first"));
    fake.wait_for_call("the blocker acknowledged", DEADLINE, |call| {
        call.method == "getUpdates" && offset(call) == Some(blocker.update_id + 1)
    })
    .await
    .unwrap();
    let parts = fake.inject_album(
        (0..3)
            .map(|i| {
                let caption = if i == 0 { "spot the difference" } else { "" };
                Incoming::private(1, caption)
                    .as_caption()
                    .photo(&format!("photo-{i}"), 640, 480)
            })
            .collect(),
    );
    let last = parts[2].update_id;
    // Polled again while it gathers (the parts still to come are asked for).
    fake.wait_for("the album polled twice", DEADLINE, |calls| {
        calls.iter().filter(|c| returned(c, last)).count() >= 2
    })
    .await
    .unwrap();
    running.stop().await;
    assert!(
        fake.calls_to("getUpdates")
            .iter()
            .all(|call| offset(call) <= Some(parts[0].update_id)),
        "no part may be acknowledged before the album is in the queue"
    );
    assert_eq!(fake.pending_updates().len(), 3);

    let channel = TelegramChannel::new(settings, &build_context(AllowedUsers::Anyone)).unwrap();
    let (running, mut queue) = Running::start(channel, 4);
    assert_album(&recv(&mut queue).await, &parts, "spot the difference");
    running.stop().await;
}

#[tokio::test]
async fn the_webhook_gathers_an_album_into_one_message() {
    let fake = FakeTelegram::start().await.unwrap();
    let (running, mut queue, _) = serve_webhook(&fake, 4).await;
    let parts = album(&fake, 4, "all four, please");
    // Telegram posts a chat's updates one at a time, each once the last was answered.
    for part in &parts {
        assert_eq!(
            fake.deliver_webhook(&part.update, Some(SECRET)).await,
            Ok(200)
        );
    }
    let lone = fake.make_update(Incoming::private(1, "a lone one"));
    assert_eq!(
        fake.deliver_webhook(&lone.update, Some(SECRET)).await,
        Ok(200)
    );
    // The lone message is not held; the album follows once its window ends.
    assert_eq!(recv(&mut queue).await.text, "a lone one");
    assert_album(&recv(&mut queue).await, &parts, "all four, please");
    running.stop().await;
}

#[tokio::test]
async fn the_webhook_admits_an_open_album_when_it_stops() {
    let fake = FakeTelegram::start().await.unwrap();
    let (running, mut queue, _) = serve_webhook(&fake, 4).await;
    let parts = album(&fake, 2, "quick");
    for part in &parts {
        assert_eq!(
            fake.deliver_webhook(&part.update, Some(SECRET)).await,
            Ok(200)
        );
    }
    running.stop().await;
    assert_album(&recv(&mut queue).await, &parts, "quick");
}
