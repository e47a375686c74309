//! `Fenced`: the lowest layer. A final may be delivered under a [`WriteGate`] (the daemon's
//! journal fence: on a store replicas share, the final's message may have been taken over
//! by another replica while this one was cut off from the store). The gate is asked just
//! before each call that writes the final (`send_text`, `finish_stream`, `send_file`), not
//! only once before the engine: a final can wait a long time in the layers above it (a
//! `Retry-After` waited out, a rate budget, the parts of a split answer sent one by one),
//! and a write the gate refuses fails with [`ChannelError::Withheld`], nothing sent.
//!
//! The gate travels with the final's delivery as a task-local ([`gated`]), so no layer
//! above passes it on: partials, which flusher tasks write outside that scope, are never
//! gated (a newer update or the final supersedes them), nor are calls that write no reply
//! (typing, reactions, a turn's end).

use std::sync::Arc;

use async_trait::async_trait;

use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelError, ChannelResult};
use crate::ids::MessageId;
use crate::message::OutboundFile;

use super::forward_channel;

/// Asked just before each write of a final: `false` withholds the write.
pub type WriteGate = Arc<dyn Fn() -> bool + Send + Sync>;

tokio::task_local! {
    /// The gate of the final being delivered on this task.
    static GATE: WriteGate;
}

/// Runs `delivery` with `gate` (if any) asked before each of its writes.
pub(super) async fn gated<F: Future>(gate: Option<WriteGate>, delivery: F) -> F::Output {
    match gate {
        Some(gate) => GATE.scope(gate, delivery).await,
        None => delivery.await,
    }
}

/// Whether a write of the final delivered on this task may go out now.
fn may_write() -> ChannelResult {
    match GATE.try_with(|gate| gate()) {
        Ok(false) => Err(ChannelError::Withheld),
        // No gate here, or it lets the write go.
        _ => Ok(()),
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
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, start_stream,
        edit_text, show_typing, turn_ended, react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        may_write()?;
        self.inner.send_text(to, text).await
    }

    async fn finish_stream(
        &self,
        to: SendTarget<'_>,
        message: &MessageId,
        text: &str,
    ) -> ChannelResult {
        may_write()?;
        self.inner.finish_stream(to, message, text).await
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        may_write()?;
        self.inner.send_file(to, file).await
    }
}

#[cfg(test)]
mod tests;
