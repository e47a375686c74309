//! A channel's transport running on its own task against a fake, for an adapter's unit
//! tests without the daemon: [`RunningChannel::start`] hands `Channel::run` a bounded
//! inbound queue, [`RunningChannel::next`] reads what it admitted (with a deadline), and
//! [`RunningChannel::stop`] cancels it and returns how it ended. Under it, [`Spawned`]:
//! any future on its own task with the token that stops it (a long connection's `run`).

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{
    Channel, ChannelExit, ChannelResult, ChatId, ChatKind, InboundMessage, InboundQueue,
    SendTarget, inbound_queue,
};
use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long [`RunningChannel::next`] and [`RunningChannel::stop`] wait.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The messages the queue holds before the transport's admissions are refused.
const QUEUE: usize = 16;

/// Where a reply to `m` goes, as the daemon would address it: its chat, its message, and
/// the metadata the adapter left on it.
pub fn reply_target(m: &InboundMessage) -> SendTarget<'_> {
    SendTarget {
        chat_id: &m.chat_id,
        chat_kind: m.chat_kind,
        reply_to: m.thread_ts.as_ref(),
        metadata: &m.metadata,
        hints: im_bridge_channel::DeliveryHints::NONE,
        source_at: None,
    }
}

/// Where a message to group `chat` goes, answering no message in particular, with the
/// routing hints `metadata`.
pub fn group_target<'a>(chat: &'a ChatId, metadata: &'a Map<String, Value>) -> SendTarget<'a> {
    SendTarget {
        chat_id: chat,
        chat_kind: ChatKind::Group,
        reply_to: None,
        metadata,
        hints: im_bridge_channel::DeliveryHints::NONE,
        source_at: None,
    }
}

/// A future on its own task, with the token that asks it to stop.
pub struct Spawned<T> {
    /// Cancelling it asks the future to stop.
    pub shutdown: CancellationToken,
    task: JoinHandle<T>,
}

impl<T: Send + 'static> Spawned<T> {
    /// Spawns the future `run` makes of a fresh shutdown token.
    pub fn spawn<F>(run: impl FnOnce(CancellationToken) -> F) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(shutdown.clone()));
        Self { shutdown, task }
    }

    /// What the future returned, once it ended on its own (a refusal, say); fails the test
    /// after [`DEADLINE`].
    pub async fn finished(self) -> T {
        match tokio::time::timeout(DEADLINE, self.task).await {
            Ok(Ok(ended)) => ended,
            Ok(Err(error)) => panic!("the task panicked: {error}"),
            Err(_) => panic!("the task did not end within {DEADLINE:?}"),
        }
    }

    /// Cancels the shutdown token and returns what the future returned; fails the test
    /// after [`DEADLINE`].
    pub async fn stop(self) -> T {
        self.shutdown.cancel();
        self.finished().await
    }
}

/// A channel's `run` on a task, with the queue it admits to.
pub struct RunningChannel {
    queue: InboundQueue,
    task: Spawned<ChannelResult<ChannelExit>>,
}

impl RunningChannel {
    /// Starts `channel.run` on a task (the caller then waits for the fake to see it
    /// connected).
    pub fn start<C: Channel>(channel: Arc<C>) -> Self {
        let (sink, queue) = inbound_queue(NonZeroUsize::new(QUEUE).unwrap_or(NonZeroUsize::MIN));
        let task = Spawned::spawn(|stop| async move { channel.run(sink, stop).await });
        Self { queue, task }
    }

    /// The next message the channel admitted; fails the test after [`DEADLINE`].
    pub async fn next(&mut self) -> InboundMessage {
        match tokio::time::timeout(DEADLINE, self.queue.recv()).await {
            Ok(Some(msg)) => msg,
            Ok(None) => panic!("the inbound queue closed"),
            Err(_) => panic!("no message within {DEADLINE:?}"),
        }
    }

    /// The queue, for a test that reads it otherwise.
    pub fn queue(&mut self) -> &mut InboundQueue {
        &mut self.queue
    }

    /// Cancels the transport and returns how `run` ended; fails the test after [`DEADLINE`].
    pub async fn stop(self) -> ChannelResult<ChannelExit> {
        self.task.stop().await
    }

    /// How `run` ended on its own (a refusal, say); fails the test after [`DEADLINE`].
    pub async fn ended(self) -> ChannelResult<ChannelExit> {
        self.task.finished().await
    }
}
