//! The intake's lanes: the gateway's messages are taken in off the event loop, so a slow
//! lookup (`GET /channels/{id}`) or a thread being started holds up the messages of its
//! own lane only, never the gateway's other events.
//!
//! A message goes to lane `channel id % LANES`: one channel's messages are taken in one at
//! a time, in the order they came; different channels mostly in parallel ([`LANES`] at
//! most at once). Each lane holds [`LANE_DEPTH`] messages; when one is full the event loop
//! waits for it (and serenity's events wait in the buffer before it). Shutdown stops the
//! lanes at once: a message not yet offered is left (the gateway would replay it to a
//! resumed session, and a new session reads it back).

use futures_util::future::join_all;
use im_bridge_channel::InboundSink;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::DiscordChannel;
use crate::model::Message;

/// Lanes taking messages in at once.
const LANES: usize = 8;
/// Messages waiting in one lane; at the bound the event loop waits.
const LANE_DEPTH: usize = 32;

/// The sending ends: where the event loop puts each message.
pub(super) struct Lanes {
    lanes: Vec<mpsc::Sender<Box<Message>>>,
}

/// The receiving ends, for [`take_in`].
pub(super) struct Queues(Vec<mpsc::Receiver<Box<Message>>>);

impl Lanes {
    /// [`LANES`] empty lanes.
    pub(super) fn new() -> (Self, Queues) {
        let (lanes, queues) = (0..LANES).map(|_| mpsc::channel(LANE_DEPTH)).unzip();
        (Self { lanes }, Queues(queues))
    }

    /// Puts `message` in its channel's lane, waiting while that lane is full.
    pub(super) async fn send(&self, message: Box<Message>) {
        let lane = usize::try_from(message.channel_id.get() % LANES as u64).unwrap_or(0);
        if let Some(lane) = self.lanes.get(lane) {
            // Closed only once `take_in` has stopped, at shutdown.
            let _ = lane.send(message).await;
        }
    }
}

/// Takes in the messages of every lane until [`Lanes`] is dropped and the lanes are
/// empty, or `shutdown`.
pub(super) async fn take_in(
    channel: &DiscordChannel,
    sink: &InboundSink,
    queues: Queues,
    shutdown: &CancellationToken,
) {
    let lane = |mut queue: mpsc::Receiver<Box<Message>>| async move {
        while let Some(message) = queue.recv().await {
            channel.intake(sink, &message).await;
        }
    };
    tokio::select! {
        _ = join_all(queues.0.into_iter().map(lane)) => {}
        () = shutdown.cancelled() => {}
    }
}
