//! The gate over the whole engine, in paused time: asked before every write of a final,
//! also after a wait in the layers above; never for partials, nor without a gate.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::capabilities::Capabilities;
use crate::delivery::Delivery;
use crate::delivery::recorder::{Call, Op, Recorder, out, unpaced};
use crate::error::ChannelError;

/// A gate that lets writes go while `open`, counting how often it was asked.
fn gate() -> (Arc<AtomicBool>, Arc<AtomicUsize>, super::WriteGate) {
    let open = Arc::new(AtomicBool::new(true));
    let asked = Arc::new(AtomicUsize::new(0));
    let (o, a) = (open.clone(), asked.clone());
    let gate: super::WriteGate = Arc::new(move || {
        a.fetch_add(1, Ordering::SeqCst);
        o.load(Ordering::SeqCst)
    });
    (open, asked, gate)
}

/// A final that met a `Retry-After` asks the gate again before it is sent again: shut
/// meanwhile (the final's message was taken over while it waited), nothing more is sent.
#[tokio::test(start_paused = true)]
async fn a_final_waiting_out_a_retry_after_asks_the_gate_again_before_it_is_sent() {
    let rec = Recorder::new(Capabilities::final_only(100));
    let d = Delivery::new(rec.clone());
    let (open, asked, gate) = gate();
    rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(5)));
    let shut = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        open.store(false, Ordering::SeqCst);
    };
    let done = out("done", true);
    let (delivered, ()) = tokio::join!(d.deliver_noting(&done, None, Some(gate)), shut);
    assert!(
        matches!(delivered, Err(ChannelError::Withheld)),
        "{delivered:?}"
    );
    assert_eq!(rec.attempts(Op::Send), 1, "not sent again");
    assert!(rec.calls().is_empty());
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert!(ChannelError::Withheld.is_transient());
}

/// A split answer asks before each of its messages: the parts sent before the gate shut
/// stay sent, the rest is withheld.
#[tokio::test(start_paused = true)]
async fn each_message_of_a_split_final_asks_the_gate() {
    let rec = Recorder::new(Capabilities::final_only(10));
    let d = Delivery::new(rec.clone());
    let (open, asked, gate) = gate();
    // The second message meets a rate limit; the gate shuts while it waits.
    rec.pass(Op::Send);
    rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(3)));
    let shut = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        open.store(false, Ordering::SeqCst);
    };
    let text = "first part second part third part";
    let answer = out(text, true);
    let (delivered, ()) = tokio::join!(d.deliver_noting(&answer, None, Some(gate)), shut);
    assert!(
        matches!(delivered, Err(ChannelError::Withheld)),
        "{delivered:?}"
    );
    assert_eq!(rec.calls().len(), 1, "{:?}", rec.calls());
    assert_eq!(asked.load(Ordering::SeqCst), 3);
}

/// Partials are never gated (flushers write them outside the final's delivery), and the
/// final finishing their stream is.
#[tokio::test(start_paused = true)]
async fn partials_pass_and_the_final_finishing_them_is_gated() {
    let rec = Recorder::new(unpaced());
    let d = Delivery::new(rec.clone());
    let (open, asked, gate) = gate();
    open.store(false, Ordering::SeqCst);
    d.deliver(&out("a ▉", false)).await.unwrap();
    let answer = out("ab", true);
    let delivered = d.deliver_noting(&answer, None, Some(gate)).await;
    assert!(
        matches!(delivered, Err(ChannelError::Withheld)),
        "{delivered:?}"
    );
    assert_eq!(rec.calls(), [Call::Start("a ▉".into())]);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // Without a gate, the same final goes out.
    let shown = d.deliver(&out("ab", true)).await.unwrap();
    assert!(shown.is_some());
    assert_eq!(rec.calls().len(), 2, "{:?}", rec.calls());
}
