//! The gate over the whole engine, in paused time: asked before every write of a final
//! until one landed, also after a wait in the layers above; the rest of a final shown in
//! part goes out; never asked for partials, for a stream the final leaves behind, nor
//! without a gate.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::capabilities::{Capabilities, LateReplies, ReplyWindow};
use crate::delivery::Delivery;
use crate::delivery::recorder::{Call, Op, Recorder, attachment, out, out_to, unpaced};
use crate::error::ChannelError;
use crate::message::ChatKind;

/// A gate that lets writes go while `open`, counting how often it was asked.
struct Gate {
    open: Arc<AtomicBool>,
    asked: Arc<AtomicUsize>,
}

impl Gate {
    fn new(open: bool) -> Self {
        Self {
            open: Arc::new(AtomicBool::new(open)),
            asked: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn write_gate(&self) -> Option<super::WriteGate> {
        let (open, asked) = (self.open.clone(), self.asked.clone());
        Some(Arc::new(move || {
            asked.fetch_add(1, Ordering::SeqCst);
            open.load(Ordering::SeqCst)
        }))
    }

    /// Shuts the gate after `secs` (virtual) seconds.
    async fn shut_after(&self, secs: u64) {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        self.open.store(false, Ordering::SeqCst);
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

/// `delivered` is a final its gate withheld.
fn assert_withheld<T: std::fmt::Debug>(delivered: &crate::error::ChannelResult<T>) {
    assert!(
        matches!(delivered, Err(ChannelError::Withheld)),
        "{delivered:?}"
    );
}

/// A final that met a `Retry-After` before anything of it landed asks the gate again
/// before it is sent again: shut meanwhile (the final's message was taken over while it
/// waited), nothing more is sent.
#[tokio::test(start_paused = true)]
async fn a_final_waiting_out_a_retry_after_asks_the_gate_again_before_it_is_sent() {
    let rec = Recorder::new(Capabilities::final_only(100));
    let d = Delivery::new(rec.clone());
    let gate = Gate::new(true);
    rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(5)));
    let done = out("done", true);
    let (delivered, ()) = tokio::join!(
        d.deliver_noting(&done, None, gate.write_gate()),
        gate.shut_after(2)
    );
    assert_withheld(&delivered);
    assert_eq!(rec.attempts(Op::Send), 1, "not sent again");
    assert!(rec.calls().is_empty());
    assert_eq!(gate.asked(), 2);
    assert!(ChannelError::Withheld.is_transient());
}

/// Once a message of a split answer landed, the rest goes out whatever the gate says by
/// then: sent again from its start by whoever delivers it again, its first part would show
/// twice.
#[tokio::test(start_paused = true)]
async fn a_split_final_shown_in_part_is_finished() {
    let rec = Recorder::new(Capabilities::final_only(10));
    let d = Delivery::new(rec.clone());
    let gate = Gate::new(true);
    // The second message meets a rate limit; the gate shuts while it waits.
    rec.pass(Op::Send);
    rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(3)));
    let answer = out("first part second part third part", true);
    let (delivered, ()) = tokio::join!(
        d.deliver_noting(&answer, None, gate.write_gate()),
        gate.shut_after(1)
    );
    assert!(delivered.is_ok(), "{delivered:?}");
    let parts = rec.calls().len();
    assert!(parts >= 3, "{:?}", rec.calls());
    assert_eq!(gate.asked(), 1, "asked before the first write only");
}

/// A file of a final whose text landed goes out: withheld, it would be lost, since the
/// final counts as delivered.
#[tokio::test(start_paused = true)]
async fn the_files_of_a_final_whose_text_landed_go_out() {
    let rec = Recorder::new(Capabilities::final_only(100));
    let d = Delivery::new(rec.clone());
    let gate = Gate::new(true);
    let mut done = out("done", true);
    done.attachments.push(attachment("a.txt"));
    // The text lands; the file meets a rate limit, during which the gate shuts.
    rec.fail(Op::File, ChannelError::RetryAfter(Duration::from_secs(3)));
    let (delivered, ()) = tokio::join!(
        d.deliver_noting(&done, None, gate.write_gate()),
        gate.shut_after(1)
    );
    assert!(delivered.is_ok(), "{delivered:?}");
    assert_eq!(
        rec.calls(),
        [Call::Send("done".into()), Call::File("a.txt".into())]
    );
}

/// Starting its stream again to find its message (a start that met network trouble) is a
/// write of the final, gated as any.
#[tokio::test(start_paused = true)]
async fn starting_the_stream_again_for_a_final_is_gated() {
    let rec = Recorder::new(unpaced());
    let d = Delivery::new(rec.clone());
    rec.fail(Op::Start, ChannelError::Transport("timed out".into()));
    d.deliver(&out("a ▉", false)).await.unwrap();
    assert_eq!(rec.attempts(Op::Start), 1);
    let gate = Gate::new(false);
    let answer = out("the whole answer", true);
    let delivered = d.deliver_noting(&answer, None, gate.write_gate()).await;
    assert_withheld(&delivered);
    assert_eq!(rec.attempts(Op::Start), 1, "not started again");
    assert!(rec.calls().is_empty(), "{:?}", rec.calls());
    // The final's next delivery sends it as a new message, and the turn's next reply to
    // the same source streams in a stream of its own.
    d.deliver(&answer).await.unwrap();
    assert_eq!(rec.calls(), [Call::Send("the whole answer".into())]);
    d.deliver(&out("next ▉", false)).await.unwrap();
    assert_eq!(rec.calls().len(), 2, "{:?}", rec.calls());
    assert_eq!(rec.calls()[1], Call::Start("next ▉".into()));
}

/// A stream started again for the final is no landing of it: the journal records its
/// message (`before`), which may take a store call's while, and the finish after that asks
/// the gate again.
#[tokio::test(start_paused = true)]
async fn the_finish_after_a_stream_started_again_asks_the_gate_again() {
    let rec = Recorder::new(unpaced());
    let d = Delivery::new(rec.clone());
    rec.fail(Op::Start, ChannelError::Transport("timed out".into()));
    d.deliver(&out("a ▉", false)).await.unwrap();
    let gate = Gate::new(true);
    let open = gate.open.clone();
    // The gate shuts while the journal records the message (a slow store).
    let before: crate::delivery::BeforeFinal = Box::new(move |message| {
        assert_eq!(message, Some(crate::ids::MessageId::new("m1")));
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(15)).await;
            open.store(false, Ordering::SeqCst);
        })
    });
    let answer = out("the whole answer", true);
    let delivered = d
        .deliver_noting(&answer, Some(before), gate.write_gate())
        .await;
    assert_withheld(&delivered);
    assert_eq!(rec.calls(), [Call::Start("the whole answer".into())]);
    assert_eq!(gate.asked(), 2);
}

/// Partials are never gated, even handed over with a gate, and the final finishing their
/// stream is; without a gate the same final goes out.
#[tokio::test(start_paused = true)]
async fn partials_pass_and_the_final_finishing_them_is_gated() {
    let rec = Recorder::new(unpaced());
    let d = Delivery::new(rec.clone());
    let gate = Gate::new(false);
    let partial = out("a ▉", false);
    d.deliver_noting(&partial, None, gate.write_gate())
        .await
        .unwrap();
    let answer = out("ab", true);
    let delivered = d.deliver_noting(&answer, None, gate.write_gate()).await;
    assert_withheld(&delivered);
    assert_eq!(rec.calls(), [Call::Start("a ▉".into())]);
    assert_eq!(gate.asked(), 1);
    let shown = d.deliver(&answer).await.unwrap();
    assert!(shown.is_some());
    assert_eq!(rec.calls().len(), 2, "{:?}", rec.calls());
}

/// A stream a final leaves behind (it was overtaken, and the final goes on below it) is
/// finished as it reads even when the final itself is withheld: it is no write of the
/// final, and nothing else would finish it.
#[tokio::test(start_paused = true)]
async fn a_stream_the_final_leaves_behind_is_finished_ungated() {
    let rec = Recorder::new(Capabilities {
        finish_closes_stream: true,
        ..unpaced()
    });
    let d = Delivery::new(rec.clone());
    let reply = |source: &str, text: &str, is_final: bool, stays_last: bool| {
        let mut msg = out_to(source, ChatKind::Private, text, is_final);
        msg.hints.stays_last = stays_last;
        msg
    };
    d.deliver(&reply("s2", "waiting", false, false))
        .await
        .unwrap();
    d.deliver(&reply("s1", "first answer", true, false))
        .await
        .unwrap();
    let gate = Gate::new(false);
    let second = reply("s2", "second answer", true, true);
    let delivered = d.deliver_noting(&second, None, gate.write_gate()).await;
    assert_withheld(&delivered);
    assert_eq!(
        rec.calls(),
        [
            Call::Start("waiting".into()),
            Call::Send("first answer".into()),
            Call::Finish("m1".into(), "waiting".into()),
        ]
    );
}

/// On a platform with a reply window, a withheld write gives back the reply it took: it
/// sent nothing.
#[tokio::test(start_paused = true)]
async fn a_withheld_write_takes_no_reply() {
    let rec = Recorder::new(Capabilities {
        reply_window: Some(ReplyWindow {
            group: Duration::from_secs(300),
            private: Duration::from_secs(3600),
            max_replies_per_source: 5,
            late: LateReplies::NextMessage,
            repeats_shown_once: true,
        }),
        ..Capabilities::final_only(100)
    });
    let d = Delivery::new(rec.clone());
    let answer = out("done", true);
    let before = d.replies_left(&answer);
    assert_eq!(before, Some(5));
    let gate = Gate::new(false);
    let delivered = d.deliver_noting(&answer, None, gate.write_gate()).await;
    assert_withheld(&delivered);
    assert_eq!(d.replies_left(&answer), before);
    d.deliver(&answer).await.unwrap();
    assert_eq!(d.replies_left(&answer), Some(4));
}
