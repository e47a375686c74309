//! Engine tests: the whole stack over a recording fake channel, in paused time.
//!
//! Partials are published the way the manager does (awaiting each `deliver`), time moves
//! only through `tokio::time::sleep` in a paused runtime, and the assertions read the
//! recorded calls and their virtual times.

use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::recorder::{Call, Op, Recorder, attachment, editable, out, out_to, secs, unpaced};
use super::*;
use crate::capabilities::{Capabilities, LengthUnit};
use crate::error::ChannelError;
use crate::message::ChatKind;

mod start_keys;

fn engine(caps: Capabilities) -> (Arc<Recorder>, Delivery) {
    let rec = Recorder::new(caps);
    let delivery = Delivery::new(rec.clone());
    (rec, delivery)
}

/// Publishes a partial and asserts it did not hold the caller in (virtual) time.
async fn partial(d: &Delivery, msg: &OutboundMessage) {
    let before = Instant::now();
    d.deliver(msg).await.unwrap();
    assert_eq!(before.elapsed(), Duration::ZERO, "a partial waited");
}

#[tokio::test]
async fn stream_starts_then_edits_then_finishes() {
    let (rec, d) = engine(unpaced());
    d.deliver(&out("a ▉", false)).await.unwrap();
    d.deliver(&out("a ▉", false)).await.unwrap();
    d.deliver(&out("ab ▉", false)).await.unwrap();
    d.deliver(&out("abc", true)).await.unwrap();
    assert_eq!(
        rec.calls(),
        [
            Call::Start("a ▉".into()),
            Call::Edit("m1".into(), "ab ▉".into()),
            Call::Finish("m1".into(), "abc".into()),
        ]
    );
    // The stream state is gone: the next final is a new message.
    d.deliver(&out("next", true)).await.unwrap();
    assert_eq!(rec.calls().last(), Some(&Call::Send("next".into())));
}

#[tokio::test]
async fn issue_19_partials_name_their_stream_message_and_a_final_resumes_one() {
    let (rec, d) = engine(unpaced());
    assert_eq!(
        d.deliver(&out("a ▉", false)).await.unwrap(),
        Some(MessageId::new("m1"))
    );
    // A restarted process finishes the message the previous one streamed into.
    let (rec2, d2) = engine(unpaced());
    let mut resumed = out("the answer", true);
    resumed.hints.resumes = Some(MessageId::new("m1"));
    assert_eq!(
        d2.deliver(&resumed).await.unwrap(),
        Some(MessageId::new("m1"))
    );
    assert_eq!(
        rec2.calls(),
        [Call::Finish("m1".into(), "the answer".into())]
    );
    // A live stream wins over the key.
    d.deliver(&resumed).await.unwrap();
    assert_eq!(
        rec.calls().last(),
        Some(&Call::Finish("m1".into(), "the answer".into()))
    );
}

/// What a `before` hook was told, with how many calls had been made by then.
type Told = Arc<std::sync::Mutex<Vec<(Option<MessageId>, usize)>>>;

/// A `before` hook that records what it was told and the calls made by then.
fn noting(rec: &Arc<Recorder>) -> (BeforeFinal, Told) {
    let seen = Told::default();
    let (rec, log) = (rec.clone(), seen.clone());
    let hook: BeforeFinal = Box::new(move |target| {
        Box::pin(async move {
            log.lock().unwrap().push((target, rec.calls().len()));
        })
    });
    (hook, seen)
}

#[tokio::test]
async fn issue_27_a_final_names_the_message_it_finishes_before_any_platform_call() {
    let (rec, d) = engine(unpaced());
    d.deliver(&out("a ▉", false)).await.unwrap();
    let (hook, seen) = noting(&rec);
    d.deliver_noting(&out("abc", true), Some(hook), None)
        .await
        .unwrap();
    // Told m1 while only the stream's start had been made; the finish came after.
    assert_eq!(*seen.lock().unwrap(), [(Some(MessageId::new("m1")), 1)]);
    assert_eq!(
        rec.calls().last(),
        Some(&Call::Finish("m1".into(), "abc".into()))
    );
    // With no stream, the final is a new message, and the hook hears so first.
    let (hook, seen) = noting(&rec);
    d.deliver_noting(&out("next", true), Some(hook), None)
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [(None, 2)]);
    assert_eq!(rec.calls().last(), Some(&Call::Send("next".into())));
    // A partial never calls it.
    let (hook, seen) = noting(&rec);
    d.deliver_noting(&out("x ▉", false), Some(hook), None)
        .await
        .unwrap();
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn final_only_channels_drop_partials() {
    let (rec, d) = engine(Capabilities::final_only(100));
    d.deliver(&out("partial", false)).await.unwrap();
    d.deliver(&out("done", true)).await.unwrap();
    assert_eq!(rec.calls(), [Call::Send("done".into())]);
    assert_eq!(d.live_streams(), 0);
}

async fn paced_stream(kind: ChatKind, interval: f64) {
    let (rec, d) = engine(editable(4096));
    let mut text = String::new();
    for i in 0..100 {
        text.push_str(&format!("w{i} "));
        partial(&d, &out_to("s1", kind, &text, false)).await;
        sleep(secs(0.1)).await;
    }
    d.deliver(&out_to("s1", kind, "the end", true))
        .await
        .unwrap();
    let timed = rec.timed();
    // Intermediate writes keep the interval; the final goes out as soon as it can.
    let writes: Vec<Duration> = timed
        .iter()
        .filter(|(_, c)| !matches!(c, Call::Finish(..)))
        .map(|(at, _)| *at)
        .collect();
    for pair in writes.windows(2) {
        assert!(pair[1] - pair[0] >= secs(interval), "{timed:#?}");
    }
    // Ten seconds of updates: about one edit per interval, never one per update.
    let edits = timed
        .iter()
        .filter(|(_, c)| matches!(c, Call::Edit(..)))
        .count();
    assert!(edits >= (9.0 / interval) as usize, "{edits} edits");
    assert!(edits <= (10.0 / interval) as usize + 1, "{edits} edits");
    assert_eq!(
        timed.last().unwrap().1,
        Call::Finish("m1".into(), "the end".into())
    );
}

#[tokio::test(start_paused = true)]
async fn edits_are_at_least_the_private_interval_apart() {
    paced_stream(ChatKind::Private, 1.0).await;
}

#[tokio::test(start_paused = true)]
async fn edits_are_at_least_the_group_interval_apart() {
    paced_stream(ChatKind::Group, 3.0).await;
}

#[tokio::test(start_paused = true)]
async fn coalescing_keeps_only_the_latest_text() {
    let (rec, d) = engine(editable(4096));
    partial(&d, &out("a", false)).await;
    for text in ["ab", "abc", "abcd"] {
        partial(&d, &out(text, false)).await;
    }
    sleep(secs(2.5)).await;
    assert_eq!(
        rec.timed(),
        [
            (secs(0.0), Call::Start("a".into())),
            (secs(1.0), Call::Edit("m1".into(), "abcd".into())),
        ]
    );
    d.deliver(&out("abcde", true)).await.unwrap();
    assert_eq!(rec.calls().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn unchanged_text_is_not_re_edited() {
    let (rec, d) = engine(editable(4096));
    partial(&d, &out("a", false)).await;
    // A change that is undone before the interval allows an edit shows nothing.
    partial(&d, &out("b", false)).await;
    partial(&d, &out("a", false)).await;
    sleep(secs(2.0)).await;
    partial(&d, &out("a", false)).await;
    sleep(secs(2.0)).await;
    assert_eq!(rec.calls(), [Call::Start("a".into())]);
    partial(&d, &out("ab", false)).await;
    partial(&d, &out("ab", false)).await;
    sleep(secs(2.0)).await;
    partial(&d, &out("ab", false)).await;
    assert_eq!(
        rec.calls(),
        [
            Call::Start("a".into()),
            Call::Edit("m1".into(), "ab".into())
        ]
    );
}

/// A stream whose first edit meets a 5 s `Retry-After`: "a" is shown at 0 s, and "ab",
/// edited at 1 s, is refused, which pauses the chat until 6 s.
async fn stream_paused_by_an_edit() -> (Arc<Recorder>, Delivery) {
    let (rec, d) = engine(editable(4096));
    rec.fail(Op::Edit, ChannelError::RetryAfter(Duration::from_secs(5)));
    partial(&d, &out("a", false)).await;
    sleep(secs(1.0)).await;
    partial(&d, &out("ab", false)).await;
    (rec, d)
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_on_an_edit_pauses_the_chat() {
    // "ab" was edited at once and refused: it is dropped, not retried.
    let (rec, d) = stream_paused_by_an_edit().await;
    sleep(secs(0.5)).await;
    partial(&d, &out("abc", false)).await;
    sleep(secs(10.0)).await;
    assert_eq!(
        rec.timed(),
        [
            (secs(0.0), Call::Start("a".into())),
            (secs(6.0), Call::Edit("m1".into(), "abc".into())),
        ]
    );
    assert_eq!(rec.attempts(Op::Edit), 2);
}

#[tokio::test(start_paused = true)]
async fn the_final_lands_after_a_retry_after_pause() {
    let (rec, d) = stream_paused_by_an_edit().await;
    partial(&d, &out("abc", false)).await;
    sleep(secs(0.5)).await;
    d.deliver(&out("abcdef", true)).await.unwrap();
    assert_eq!(
        rec.timed(),
        [
            (secs(0.0), Call::Start("a".into())),
            (secs(6.0), Call::Finish("m1".into(), "abcdef".into())),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn issue_13_the_final_goes_out_at_once_and_supersedes_pending_text() {
    let (rec, d) = engine(editable(4096));
    partial(&d, &out_to("s1", ChatKind::Group, "a", false)).await;
    sleep(secs(0.5)).await;
    partial(&d, &out_to("s1", ChatKind::Group, "ab", false)).await;
    d.deliver(&out_to("s1", ChatKind::Group, "abc", true))
        .await
        .unwrap();
    sleep(secs(10.0)).await;
    assert_eq!(
        rec.timed(),
        [
            (secs(0.0), Call::Start("a".into())),
            // Not held back by the group's 3 s edit interval: finals are paced only by the
            // chat's budget, and this channel has none.
            (secs(0.5), Call::Finish("m1".into(), "abc".into())),
        ]
    );
}

fn long_answer() -> String {
    // 10,000 chars; the emoji count twice in UTF-16, so char slicing would overflow.
    let mut text = String::new();
    let mut i = 0;
    while text.chars().count() < 10_000 {
        text.push_str(if i % 7 == 6 { "🙂\n" } else { "word " });
        i += 1;
    }
    text.chars().take(10_000).collect()
}

fn utf16_channel() -> Capabilities {
    Capabilities {
        length_unit: LengthUnit::Utf16,
        ..editable(4096)
    }
}

#[tokio::test(start_paused = true)]
async fn a_long_final_is_split_on_a_utf16_channel() {
    let answer = long_answer();
    let (rec, d) = engine(utf16_channel());
    partial(&d, &out("thinking ▉", false)).await;
    d.deliver(&out(&answer, true)).await.unwrap();
    let calls = rec.calls();
    let mut texts = Vec::new();
    for (i, call) in calls.iter().enumerate().skip(1) {
        let text = match (i, call) {
            (1, Call::Finish(id, text)) if id == "m1" => text,
            (2.., Call::Send(text)) => text,
            other => panic!("unexpected {other:?}"),
        };
        assert!(text.encode_utf16().count() <= 4096);
        texts.push(text.as_str());
    }
    assert_eq!(texts.len(), 3);
    assert_eq!(texts.concat(), answer);
    // Without a stream every chunk is a new message.
    let (rec, d) = engine(utf16_channel());
    d.deliver(&out(&answer, true)).await.unwrap();
    let sent: Vec<String> = rec
        .calls()
        .into_iter()
        .map(|c| match c {
            Call::Send(text) => text,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(sent.concat(), answer);
}

#[tokio::test(start_paused = true)]
async fn a_long_partial_is_shown_truncated() {
    let (rec, d) = engine(editable(10));
    partial(&d, &out("0123456789abc ▉", false)).await;
    sleep(secs(1.0)).await;
    partial(&d, &out("0123456789abcdef ▉", false)).await;
    d.deliver(&out("0123456789 abcdef", true)).await.unwrap();
    // The final's first chunk finishes the stream at once (finals wait for no edit
    // interval); the rest is a new message, sent at once.
    assert_eq!(
        rec.timed(),
        [
            (secs(0.0), Call::Start("012345678…".into())),
            (secs(1.0), Call::Edit("m1".into(), "012345678…".into())),
            (secs(1.0), Call::Finish("m1".into(), "0123456789".into())),
            (secs(1.0), Call::Send(" abcdef".into())),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_finish_falls_back_to_a_new_message() {
    let (rec, d) = engine(utf16_channel());
    rec.fail(Op::Finish, ChannelError::NotEditable);
    partial(&d, &out("x ▉", false)).await;
    d.deliver(&out(&long_answer(), true)).await.unwrap();
    let calls = rec.calls();
    assert_eq!(calls[0], Call::Start("x ▉".into()));
    assert!(
        calls[1..].iter().all(|c| matches!(c, Call::Send(_))),
        "{calls:?}"
    );
    let sent: Vec<&str> = calls[1..]
        .iter()
        .map(|c| match c {
            Call::Send(t) => t.as_str(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(sent.concat(), long_answer());
    assert_eq!(rec.attempts(Op::Finish), 1);
}

#[tokio::test(start_paused = true)]
async fn finals_wait_out_retry_after_within_bounds() {
    let (rec, d) = engine(Capabilities::final_only(100));
    rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(2)));
    d.deliver(&out("done", true)).await.unwrap();
    assert_eq!(rec.timed(), [(secs(2.0), Call::Send("done".into()))]);
    // Past the attempts, the last error is returned.
    for _ in 0..4 {
        rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(1)));
    }
    let err = d.deliver(&out("again", true)).await.unwrap_err();
    assert!(matches!(err, ChannelError::RetryAfter(_)), "{err:?}");
    assert_eq!(rec.attempts(Op::Send), 2 + 4);
    // A wait longer than the policy allows fails at once (once the chat's pause from the
    // last answer is over).
    sleep(secs(1.0)).await;
    rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(600)));
    let before = Instant::now();
    assert!(d.deliver(&out("later", true)).await.is_err());
    assert_eq!(before.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_failed_partial_is_dropped_and_the_next_one_shows() {
    let (rec, d) = engine(editable(4096));
    rec.fail(Op::Start, ChannelError::Transport("reset".into()));
    partial(&d, &out("a", false)).await;
    assert_eq!(rec.attempts(Op::Start), 1);
    partial(&d, &out("ab", false)).await;
    // A message deleted under the stream: the next partial starts a new one.
    rec.fail(Op::Edit, ChannelError::NotEditable);
    sleep(secs(1.0)).await;
    partial(&d, &out("abc", false)).await;
    partial(&d, &out("abcd", false)).await;
    d.deliver(&out("abcde", true)).await.unwrap();
    assert_eq!(
        rec.calls(),
        [
            Call::Start("ab".into()),
            Call::Start("abcd".into()),
            Call::Finish("m2".into(), "abcde".into()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn attachments_go_after_the_text_and_only_if_it_landed() {
    let (rec, d) = engine(Capabilities::final_only(100));
    let mut msg = out("here", true);
    msg.attachments = vec![
        attachment("a.txt"),
        attachment("b.txt"),
        attachment("c.txt"),
    ];
    rec.fail(
        Op::File,
        ChannelError::Rejected {
            reason: "too big".into(),
        },
    );
    d.deliver(&msg).await.unwrap();
    assert_eq!(
        rec.calls(),
        [
            Call::Send("here".into()),
            Call::File("b.txt".into()),
            Call::File("c.txt".into()),
        ]
    );
    rec.fail(
        Op::Send,
        ChannelError::Rejected {
            reason: "no".into(),
        },
    );
    assert!(d.deliver(&msg).await.is_err());
    assert_eq!(rec.attempts(Op::File), 3, "no upload after a failed text");
}

#[tokio::test(start_paused = true)]
async fn stream_state_does_not_outlive_finals() {
    let (rec, d) = engine(editable(4096));
    for i in 0..50 {
        let source = format!("s{i}");
        partial(&d, &out_to(&source, ChatKind::Group, "a", false)).await;
        partial(&d, &out_to(&source, ChatKind::Group, "ab", false)).await;
    }
    assert_eq!(d.live_streams(), 50);
    for i in 0..50 {
        let source = format!("s{i}");
        d.deliver(&out_to(&source, ChatKind::Group, "done", true))
            .await
            .unwrap();
    }
    assert_eq!(d.live_streams(), 0);
    assert_eq!(d.flusher.clock.tracked(), (0, 0));
    sleep(secs(10.0)).await;
    d.flusher.tasks.close();
    d.flusher.tasks.wait().await;
    let finishes = rec
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Finish(..)))
        .count();
    assert_eq!(finishes, 50);
    assert!(!rec.calls().iter().any(|c| matches!(c, Call::Edit(..))));
}

#[tokio::test(start_paused = true)]
async fn the_oldest_stream_is_evicted_at_the_bound() {
    let (rec, d) = engine(unpaced());
    for i in 0..MAX_STREAMS + 3 {
        partial(&d, &out_to(&format!("s{i}"), ChatKind::Private, "a", false)).await;
    }
    assert_eq!(d.live_streams(), MAX_STREAMS);
    // The evicted stream's final still lands, as a new message.
    d.deliver(&out_to("s0", ChatKind::Private, "done", true))
        .await
        .unwrap();
    assert_eq!(rec.calls().last(), Some(&Call::Send("done".into())));
    d.deliver(&out_to("s5", ChatKind::Private, "done", true))
        .await
        .unwrap();
    assert!(matches!(rec.calls().last(), Some(Call::Finish(..))));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_engine_stops_its_flushers() {
    let (rec, d) = engine(editable(4096));
    partial(&d, &out("a", false)).await;
    partial(&d, &out("ab", false)).await;
    let tasks = d.flusher.tasks.clone();
    drop(d);
    tasks.wait().await;
    assert_eq!(rec.calls(), [Call::Start("a".into())]);
}

/// Telegram-like: a budget, and the first partial held 300 ms.
fn held() -> Capabilities {
    Capabilities {
        chat_budget: Some(
            crate::capabilities::ChatBudget::new(
                crate::capabilities::Writes::MESSAGES_EDITS_FILES,
                3,
                secs(1.0),
            )
            .in_groups(secs(3.0))
            .holding_first_partial(secs(0.3)),
        ),
        ..editable(4096)
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_complete_within_the_hold_costs_one_write() {
    let (rec, d) = engine(held());
    partial(&d, &out("Hel ▉", false)).await;
    sleep(secs(0.1)).await;
    partial(&d, &out("Hello ▉", false)).await;
    sleep(secs(0.1)).await;
    d.deliver(&out("Hello.", true)).await.unwrap();
    assert_eq!(rec.timed(), [(secs(0.2), Call::Send("Hello.".into()))]);
    assert_eq!(d.live_streams(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_slower_answer_shows_its_newest_text_when_the_hold_runs_out() {
    let (rec, d) = engine(held());
    partial(&d, &out("Hel ▉", false)).await;
    sleep(secs(0.1)).await;
    partial(&d, &out("Hello ▉", false)).await;
    sleep(secs(0.5)).await;
    assert_eq!(rec.timed(), [(secs(0.3), Call::Start("Hello ▉".into()))]);
    // Only the first text is held: the final finishes the stream as soon as it comes.
    d.deliver(&out("Hello, world.", true)).await.unwrap();
    assert_eq!(
        rec.timed().last(),
        Some(&(secs(0.6), Call::Finish("m1".into(), "Hello, world.".into())))
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_file_is_named_in_the_chat_by_its_line() {
    let (rec, d) = engine(Capabilities::final_only(100));
    let mut msg = out("here", true);
    msg.hints.send_key = Some("k".into());
    let mut refused = attachment("a.pdf");
    refused.if_refused = Some("The chat did not take a.pdf.".into());
    msg.attachments = vec![refused, attachment("b.txt")];
    rec.fail(
        Op::File,
        ChannelError::Rejected {
            reason: "too big".into(),
        },
    );
    d.deliver(&msg).await.unwrap();
    assert_eq!(
        rec.calls(),
        [
            Call::Send("here".into()),
            Call::Send("The chat did not take a.pdf.".into()),
            Call::File("b.txt".into()),
        ]
    );
    // The line is no part of the answer: it never goes under the answer's send key.
    assert_eq!(rec.send_keys(), [Some("k".to_owned()), None]);
}

/// An unpaced channel whose streamed messages show they are being written until finished
/// (cards, bubbles).
fn closing() -> Capabilities {
    Capabilities {
        finish_closes_stream: true,
        ..unpaced()
    }
}

/// A reply in the private chat `c1` answering `source`, told to stay last or not.
fn reply(source: &str, text: &str, is_final: bool, stays_last: bool) -> OutboundMessage {
    let mut msg = out_to(source, ChatKind::Private, text, is_final);
    msg.hints.stays_last = stays_last;
    msg
}

/// Delivers [`reply`]; the message that shows it.
async fn deliver(
    d: &Delivery,
    source: &str,
    text: &str,
    is_final: bool,
    stays_last: bool,
) -> Option<MessageId> {
    d.deliver(&reply(source, text, is_final, stays_last))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_reply_that_stays_last_leaves_an_overtaken_message_and_goes_on_below() {
    let (rec, d) = engine(closing());
    // The second message's notice was shown before anything of the first answer…
    deliver(&d, "s2", "waiting", false, false).await;
    // …which then came below it.
    deliver(&d, "s1", "first answer", true, false).await;
    // The second's turn: its notice is finished as it reads, the answer goes on below.
    let shown = deliver(&d, "s2", "thinking", false, true).await;
    assert_eq!(shown, Some(MessageId::new("m3")));
    deliver(&d, "s2", "second answer", true, false).await;
    assert_eq!(
        rec.calls(),
        [
            Call::Start("waiting".into()),
            Call::Send("first answer".into()),
            Call::Finish("m1".into(), "waiting".into()),
            Call::Start("thinking".into()),
            Call::Finish("m3".into(), "second answer".into()),
        ]
    );
}

#[tokio::test]
async fn a_reply_that_stays_last_goes_on_in_its_message_while_that_is_the_newest() {
    let (rec, d) = engine(unpaced());
    deliver(&d, "s1", "thinking", false, false).await;
    deliver(&d, "s2", "waiting", false, false).await;
    // The first answer is finished in its own message, above the notice.
    deliver(&d, "s1", "first answer", true, false).await;
    deliver(&d, "s2", "thinking", false, true).await;
    deliver(&d, "s2", "second answer", true, true).await;
    assert_eq!(
        rec.calls(),
        [
            Call::Start("thinking".into()),
            Call::Start("waiting".into()),
            Call::Finish("m1".into(), "first answer".into()),
            Call::Edit("m2".into(), "thinking".into()),
            Call::Finish("m2".into(), "second answer".into()),
        ]
    );
}

#[tokio::test]
async fn a_reply_that_stays_last_is_not_overtaken_by_an_answer_in_another_thread() {
    let (rec, d) = engine(closing());
    let in_thread = |source: &str, thread: &str, text: &str, is_final, stays_last| {
        let mut msg = reply(source, text, is_final, stays_last);
        msg.metadata.insert("thread".into(), thread.into());
        msg
    };
    // A notice waits in thread t2; then another conversation, in thread t1, is answered.
    d.deliver(&in_thread("s2", "t2", "waiting", false, false))
        .await
        .unwrap();
    d.deliver(&in_thread("s1", "t1", "elsewhere", true, false))
        .await
        .unwrap();
    // The notice is still the newest of its thread: the answer takes its place.
    let shown = d
        .deliver(&in_thread("s2", "t2", "thinking", false, true))
        .await
        .unwrap();
    assert_eq!(shown, Some(MessageId::new("m1")));
    d.deliver(&in_thread("s2", "t2", "second answer", true, true))
        .await
        .unwrap();
    assert_eq!(
        rec.calls(),
        [
            Call::Start("waiting".into()),
            Call::Send("elsewhere".into()),
            Call::Edit("m1".into(), "thinking".into()),
            Call::Finish("m1".into(), "second answer".into()),
        ]
    );
}

#[tokio::test]
async fn a_final_that_stays_last_is_a_new_message_below_an_upload_that_overtook_its_stream() {
    // Messages edited in place: the one left behind needs no ending.
    let (rec, d) = engine(unpaced());
    deliver(&d, "s2", "waiting", false, false).await;
    let mut first = reply("s1", "first answer", true, false);
    first.attachments.push(attachment("report.txt"));
    d.deliver(&first).await.unwrap();
    // The journal hears before any call that the final is a new message.
    let (hook, seen) = noting(&rec);
    let shown = d
        .deliver_noting(&reply("s2", "second answer", true, true), Some(hook), None)
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [(None, 3)]);
    assert_eq!(shown, Some(MessageId::new("m3")));
    // The notice's message was left as it reads.
    assert_eq!(
        rec.calls(),
        [
            Call::Start("waiting".into()),
            Call::Send("first answer".into()),
            Call::File("report.txt".into()),
            Call::Send("second answer".into()),
        ]
    );
}

#[tokio::test]
async fn a_stream_left_behind_that_cannot_be_finished_is_not_sent_again() {
    let (rec, d) = engine(closing());
    deliver(&d, "s2", "waiting", false, false).await;
    deliver(&d, "s1", "first answer", true, false).await;
    // The notice's stream expired meanwhile (WeCom's last six minutes).
    rec.fail(Op::Finish, ChannelError::NotEditable);
    deliver(&d, "s2", "second answer", true, true).await;
    assert_eq!(rec.attempts(Op::Finish), 1);
    assert_eq!(
        rec.calls(),
        [
            Call::Start("waiting".into()),
            Call::Send("first answer".into()),
            Call::Send("second answer".into()),
        ]
    );
}
