//! `Fenced`: the lowest layer. A final may be delivered under a [`WriteGate`] (the daemon's
//! journal fence: on a store replicas share, the final's message may have been taken over
//! by another replica while this one was cut off from the store). Until a write of the
//! final lands, the gate is asked just before each call that would write it (`send_text`,
//! `finish_stream`, `send_file`, and `start_stream` where the final starts its stream again
//! to find its message), not only once before the engine: a final can wait a long time in
//! the layers above (a `Retry-After` waited out, a rate budget), and a write the gate
//! refuses fails with [`ChannelError::Withheld`], nothing sent.
//!
//! Once one write of the final landed (a message of it sent, its stream message finished,
//! also when a message cut after that failed: `FinishedThen`), the rest of it (the later
//! messages of a split answer, its files) goes out ungated: a final shown in part is
//! finished, as it was begun. Refused midway, its first messages would be sent again by
//! whichever process delivers it again (most platforms take no send key to drop a repeat),
//! and a file refused after its text landed would be lost without a word, since the final
//! counts as delivered. Starting its stream again is no landing: it only finds the message
//! the final finishes, and the finish is asked for again.
//!
//! The gate travels with the final's delivery as a task-local ([`FinalFence::scope`]), so
//! no layer above passes it on. What is not a write of the final is never gated: partials
//! (`Delivery::deliver_partial` runs outside any scope), finishing a stream the final
//! leaves behind, typing, reactions, a turn's end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelError, ChannelResult};
use crate::ids::MessageId;
use crate::message::OutboundFile;

use super::forward_channel;

/// Asked just before each write of a final until one landed: `false` withholds the write.
pub type WriteGate = Arc<dyn Fn() -> bool + Send + Sync>;

/// A final's gate, and whether a write of the final landed.
struct Fence {
    gate: WriteGate,
    landed: AtomicBool,
}

tokio::task_local! {
    /// The fence of the final being delivered on this task.
    static FENCE: Arc<Fence>;
}

/// The fence of one final's delivery: the parts of it that write the final run in
/// [`FinalFence::scope`], all under one record of whether a write landed.
pub(super) struct FinalFence(Option<Arc<Fence>>);

impl FinalFence {
    /// The fence of a final delivered under `gate` (none: nothing is gated).
    pub(super) fn new(gate: Option<WriteGate>) -> Self {
        Self(gate.map(|gate| {
            Arc::new(Fence {
                gate,
                landed: AtomicBool::new(false),
            })
        }))
    }

    /// Runs `writes` with the final's gate asked before each of them.
    pub(super) async fn scope<F: Future>(&self, writes: F) -> F::Output {
        match &self.0 {
            Some(fence) => FENCE.scope(fence.clone(), writes).await,
            None => writes.await,
        }
    }
}

/// Whether a write of the final delivered on this task may go out now.
fn may_write() -> ChannelResult {
    let refused = FENCE.try_with(|fence| !fence.landed.load(Ordering::Acquire) && !(fence.gate)());
    match refused {
        Ok(true) => Err(ChannelError::Withheld),
        // No fence here, a write landed already, or the gate lets it go.
        _ => Ok(()),
    }
}

/// Notes that a write of the final landed, if `result` says so (a stream message finished
/// before a cut after it failed did).
fn note<T>(result: &ChannelResult<T>) {
    if matches!(result, Ok(_) | Err(ChannelError::FinishedThen(_))) {
        let _ = FENCE.try_with(|fence| fence.landed.store(true, Ordering::Release));
    }
}

/// The gating layer (see the module docs).
#[derive(Debug)]
pub struct Fenced<C> {
    inner: C,
}

impl<C: Channel> Fenced<C> {
    /// Asks the delivery's gate before `inner`'s writes of a final.
    pub fn new(inner: C) -> Self {
        Self { inner }
    }

    fn inner(&self) -> &C {
        &self.inner
    }
}

#[async_trait]
impl<C: Channel> Channel for Fenced<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, edit_text,
        show_typing, turn_ended, react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        may_write()?;
        let sent = self.inner.send_text(to, text).await;
        note(&sent);
        sent
    }

    /// Only the final's restart of its stream runs in a scope: it finds (or shows) the
    /// message to finish, and is not the final landing, so the finish after it is gated
    /// too (the journal records that message between the two, which may take a while).
    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        may_write()?;
        self.inner.start_stream(to, text).await
    }

    async fn finish_stream(
        &self,
        to: SendTarget<'_>,
        message: &MessageId,
        text: &str,
    ) -> ChannelResult {
        may_write()?;
        let finished = self.inner.finish_stream(to, message, text).await;
        note(&finished);
        finished
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        may_write()?;
        let sent = self.inner.send_file(to, file).await;
        note(&sent);
        sent
    }
}

#[cfg(test)]
mod tests;
