//! Engine tests of the send key a stream's message is started under: one for each
//! stream, kept for every attempt to start it, never a final's; and a final whose
//! stream's start met network trouble starting it again under that key.

use super::*;

/// The start keys the recorder saw, each a stream's (`stream-…`).
fn start_keys(rec: &Recorder) -> Vec<String> {
    let keys: Vec<String> = rec.start_keys().into_iter().flatten().collect();
    assert_eq!(keys.len(), rec.start_keys().len(), "every start has a key");
    assert!(keys.iter().all(|k| k.starts_with("stream-")), "{keys:?}");
    keys
}

#[tokio::test(start_paused = true)]
async fn every_start_of_a_stream_goes_under_one_key_of_its_own() {
    let (rec, d) = engine(editable(4096));
    // The first start times out (it may have landed); the next partial makes it again.
    rec.fail(Op::Start, ChannelError::Transport("timed out".into()));
    partial(&d, &out("a", false)).await;
    partial(&d, &out("ab", false)).await;
    let mut answer = out("abc", true);
    answer.hints.send_key = Some("e1".into());
    d.deliver(&answer).await.unwrap();
    // Another reply's stream.
    partial(&d, &out_to("s2", ChatKind::Private, "x", false)).await;
    assert_eq!(
        rec.calls(),
        [
            Call::Start("ab".into()),
            Call::Finish("m1".into(), "abc".into()),
            Call::Start("x".into()),
        ]
    );
    let keys = start_keys(&rec);
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert_eq!(keys[0], keys[1], "the same on every attempt");
    assert_ne!(keys[2], keys[0], "another stream, another key");
}

#[tokio::test(start_paused = true)]
async fn a_stream_whose_message_is_gone_starts_the_next_under_a_new_key() {
    let (rec, d) = engine(unpaced());
    partial(&d, &out("a", false)).await;
    rec.fail(Op::Edit, ChannelError::NotEditable);
    partial(&d, &out("ab", false)).await;
    partial(&d, &out("abc", false)).await;
    assert_eq!(
        rec.calls(),
        [Call::Start("a".into()), Call::Start("abc".into())]
    );
    let keys = start_keys(&rec);
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1], "the old key may name the message gone");
}

#[tokio::test(start_paused = true)]
async fn a_final_after_a_lost_start_starts_its_stream_again_and_finishes_it() {
    let (rec, d) = engine(editable(4096));
    rec.fail(Op::Start, ChannelError::Transport("timed out".into()));
    partial(&d, &out("a", false)).await;
    let mut answer = out("abc", true);
    answer.hints.send_key = Some("e1".into());
    let (hook, seen) = noting(&rec);
    let shown = d.deliver_noting(&answer, Some(hook), None).await.unwrap();
    // Started again under the stream's key (a platform naming sends by it answers with
    // the message the lost start made), then finished: never a second message.
    assert_eq!(shown, Some(MessageId::new("m1")));
    assert_eq!(
        rec.calls(),
        [
            Call::Start("abc".into()),
            Call::Finish("m1".into(), "abc".into()),
        ]
    );
    let keys = start_keys(&rec);
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1]);
    assert!(
        rec.send_keys().is_empty(),
        "nothing sent under the final's key"
    );
    // The hook hears of the message before the finish.
    assert_eq!(*seen.lock().unwrap(), [(Some(MessageId::new("m1")), 1)]);

    // A start refused for good made no message: the final is one of its own.
    rec.fail(
        Op::Start,
        ChannelError::Rejected {
            reason: "refused".into(),
        },
    );
    partial(&d, &out_to("s2", ChatKind::Private, "x", false)).await;
    d.deliver(&out_to("s2", ChatKind::Private, "the answer", true))
        .await
        .unwrap();
    assert_eq!(
        rec.calls()[2..],
        [Call::Send("the answer".into())],
        "{:?}",
        rec.calls()
    );
}
