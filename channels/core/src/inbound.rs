//! Bounded inbound admission with reserve/commit (spec manager §2.3).
//!
//! A transport reserves a slot *before* any platform side effect (placeholder, reaction,
//! ack) and commits the message into it afterwards. Reservations count against the
//! capacity, so a full queue is known before anything is promised to the platform, and a
//! provider with a retry contract can refuse (not ack) what cannot be admitted.
//!
//! The bound is the queue capacity given to [`inbound_queue`]: `queued + reserved` never
//! exceeds it. At the bound [`InboundSink::reserve`] fails at once with
//! [`AdmitError::QueueFull`]; transports that can apply backpressure instead (polling,
//! the console) use [`InboundSink::reserve_wait`].
//!
//! A message is *queued* until its receiver lets it go: with [`InboundQueue::recv`] as it
//! is received, with [`InboundQueue::recv_held`] only when the [`Queued`] it gets (or the
//! [`Room`] split off it) is dropped. The daemon receives every message at once and holds
//! its room until the message is written down and has a worker: a message the platform
//! was told is taken never waits unrecorded behind busy workers, and the bound still holds
//! for what waits.
//!
//! Child `skip`: [`Skip`], why an adapter turned an event into no message.

mod skip;

pub use skip::Skip;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::message::InboundMessage;
use crate::telemetry::Telemetry;

/// What became of a message admitted with [`InboundSink::send_waiting`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// It is in the queue.
    Admitted,
    /// Admission is closed: it is not.
    Closed,
    /// Shutdown came while it waited for room.
    Stopped,
}

/// Why a message was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdmitError {
    /// `queued + reserved` reached the capacity.
    #[error("the inbound queue is full")]
    QueueFull,
    /// Admission is closed (the daemon is shutting down).
    #[error("inbound admission is closed")]
    Closed,
    /// From [`InboundSink::offer`]: the queue is full *and* so many senders already wait
    /// for their "too busy" reply that this one cannot be told. The platform must keep the
    /// message and retry it (a webhook answers with a retryable status), or it is lost.
    #[error("the inbound queue is full and the sender cannot be told")]
    Overloaded,
}

/// Refused messages waiting for their "too busy" reply.
pub const REFUSALS_CAPACITY: usize = 64;

/// Counter of messages refused at admission, by `channel` and `reason`: `queue_full`
/// (counted by the daemon as it tells the sender) or `notice_dropped` (the side channel
/// was full too, so the sender was not told; counted here, and [`InboundSink::offer`]
/// reports [`AdmitError::Overloaded`] so the platform can redeliver).
pub const REFUSED_METRIC: &str = "im_bridge_inbound_refused_total";

#[derive(Debug)]
struct Shared {
    closed: AtomicBool,
    rejected_full: AtomicU64,
    /// Reservations handed out and neither committed nor released yet.
    outstanding: AtomicUsize,
    /// The capacity: one permit a reserved or queued message.
    room: Arc<Semaphore>,
    capacity: usize,
}

/// A message's room in the queue: while it is held, the message counts against the
/// capacity. Dropping it gives the room back.
#[derive(Debug)]
pub struct Room {
    _permit: OwnedSemaphorePermit,
}

/// A received message that still holds its room in the queue ([`InboundQueue::recv_held`]).
#[derive(Debug)]
pub struct Queued {
    /// The message.
    pub msg: InboundMessage,
    room: Room,
}

impl Queued {
    /// The message, and its room to give back once it no longer waits.
    pub fn into_parts(self) -> (InboundMessage, Room) {
        (self.msg, self.room)
    }
}

/// Creates the bounded inbound queue: a cloneable sink for transports and the single
/// receiving end for the daemon.
pub fn inbound_queue(capacity: NonZeroUsize) -> (InboundSink, InboundQueue) {
    // The room semaphore is the bound, so that a message can keep counting after it was
    // received; every message in the channel holds room, so the channel is never full when
    // a reservation took room.
    let (tx, rx) = mpsc::channel(capacity.get());
    let (refusals_tx, refusals_rx) = mpsc::channel(REFUSALS_CAPACITY);
    let shared = Arc::new(Shared {
        closed: AtomicBool::new(false),
        rejected_full: AtomicU64::new(0),
        outstanding: AtomicUsize::new(0),
        room: Arc::new(Semaphore::new(capacity.get())),
        capacity: capacity.get(),
    });
    (
        InboundSink {
            tx,
            refusals: refusals_tx,
            shared: shared.clone(),
        },
        InboundQueue {
            rx,
            refusals: Some(refusals_rx),
            shared,
        },
    )
}

/// The transports' end of the inbound queue. Cheap to clone.
#[derive(Clone)]
pub struct InboundSink {
    tx: mpsc::Sender<Queued>,
    refusals: mpsc::Sender<InboundMessage>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for InboundSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboundSink")
            .field("free", &self.shared.room.available_permits())
            .finish()
    }
}

impl InboundSink {
    /// Reserves a slot, failing at once when the queue is full or closed.
    pub fn reserve(&self) -> Result<Reservation, AdmitError> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(AdmitError::Closed);
        }
        let room = match self.shared.room.clone().try_acquire_owned() {
            Ok(room) => room,
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                self.shared.rejected_full.fetch_add(1, Ordering::Relaxed);
                return Err(AdmitError::QueueFull);
            }
            Err(tokio::sync::TryAcquireError::Closed) => return Err(AdmitError::Closed),
        };
        match self.tx.clone().try_reserve_owned() {
            Ok(slot) => Ok(Reservation::new(room, slot, &self.shared)),
            // Never full while it holds room (see `inbound_queue`).
            Err(mpsc::error::TrySendError::Full(_)) => Err(AdmitError::QueueFull),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(AdmitError::Closed),
        }
    }

    /// Reserves a slot, waiting for one while the queue is full. For transports that can
    /// hold their input back (long polling, the console) instead of dropping it.
    pub async fn reserve_wait(&self) -> Result<Reservation, AdmitError> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(AdmitError::Closed);
        }
        let room = self
            .shared
            .room
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| AdmitError::Closed)?;
        match self.tx.clone().reserve_owned().await {
            Ok(slot) => Ok(Reservation::new(room, slot, &self.shared)),
            Err(_) => Err(AdmitError::Closed),
        }
    }

    /// Waits for a slot ([`InboundSink::reserve_wait`]) and commits `msg` into it: the one
    /// admission of the transports that hold their input back (long polls, the console).
    /// [`Waited::Stopped`] when `shutdown` came first, [`Waited::Closed`] when admission is
    /// closed (the daemon is stopping): the caller then leaves the message, and what follows
    /// it, unacknowledged.
    pub async fn send_waiting(&self, msg: InboundMessage, shutdown: &CancellationToken) -> Waited {
        let reservation = tokio::select! {
            () = shutdown.cancelled() => return Waited::Stopped,
            r = self.reserve_wait() => r,
        };
        match reservation.and_then(|slot| slot.commit(msg)) {
            Ok(()) => Waited::Admitted,
            Err(_) => Waited::Closed,
        }
    }

    /// [`InboundSink::send_waiting`] for a polling transport's batch: whether to go on
    /// with the next message. `msg` is `None` for a message the adapter skipped, which
    /// counts as taken. Not at shutdown, nor once admission is closed: then the transport
    /// shows as disconnected on `telemetry` and this returns only at the shutdown that
    /// follows, the rest of the batch left unacknowledged for the next start.
    pub async fn send_polled(
        &self,
        msg: Option<InboundMessage>,
        telemetry: &Telemetry,
        shutdown: &CancellationToken,
    ) -> bool {
        let Some(msg) = msg else {
            return true;
        };
        match self.send_waiting(msg, shutdown).await {
            Waited::Admitted => true,
            Waited::Stopped => false,
            Waited::Closed => {
                tracing::info!(
                    channel = telemetry.channel(),
                    "Inbound admission is closed; leaving the rest of the polled batch unacknowledged."
                );
                telemetry.set_connected(false);
                shutdown.cancelled().await;
                false
            }
        }
    }

    /// Reserve and commit in one step.
    pub fn try_send(&self, msg: InboundMessage) -> Result<(), AdmitError> {
        self.reserve()?.commit(msg)
    }

    /// Reserve and commit in one step; a message refused because the queue is full is
    /// handed to [`InboundSink::refuse`] so its sender hears back ([`AdmitError::QueueFull`]),
    /// or, when even that side channel is full, left to the platform to redeliver
    /// ([`AdmitError::Overloaded`]).
    pub fn offer(&self, msg: InboundMessage) -> Result<(), AdmitError> {
        match self.reserve() {
            Ok(reservation) => reservation.commit(msg),
            Err(AdmitError::QueueFull) if self.refuse(msg) => Err(AdmitError::QueueFull),
            Err(AdmitError::QueueFull) => Err(AdmitError::Overloaded),
            Err(e) => Err(e),
        }
    }

    /// Reports a message that could not be admitted, so the daemon can tell its sender to
    /// try again. Returns `false` when even the refusal side channel is full.
    pub fn refuse(&self, msg: InboundMessage) -> bool {
        match self.refusals.try_send(msg) {
            Ok(()) => true,
            Err(error) => {
                let msg = error.into_inner();
                tracing::warn!(
                    channel = %msg.channel_name,
                    "Too many refused messages waiting for a reply; dropping one refusal notice."
                );
                metrics::counter!(
                    REFUSED_METRIC,
                    "channel" => msg.channel_name,
                    "reason" => "notice_dropped"
                )
                .increment(1);
                false
            }
        }
    }

    /// Whether admission has been closed.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }
}

/// A reserved slot. Dropping it releases the slot.
pub struct Reservation {
    room: Option<(OwnedSemaphorePermit, mpsc::OwnedPermit<Queued>)>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation").finish_non_exhaustive()
    }
}

impl Reservation {
    fn new(
        room: OwnedSemaphorePermit,
        slot: mpsc::OwnedPermit<Queued>,
        shared: &Arc<Shared>,
    ) -> Self {
        shared.outstanding.fetch_add(1, Ordering::AcqRel);
        Self {
            room: Some((room, slot)),
            shared: shared.clone(),
        }
    }

    /// Enqueues the message into the reserved slot. Fails with [`AdmitError::Closed`] when
    /// admission closed after the reservation was made.
    pub fn commit(mut self, msg: InboundMessage) -> Result<(), AdmitError> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(AdmitError::Closed);
        }
        let (room, slot) = self.room.take().ok_or(AdmitError::Closed)?;
        let room = Room { _permit: room };
        slot.send(Queued { msg, room });
        Ok(())
    }

    /// Gives the slot back without sending. Same as dropping it.
    pub fn release(self) {}
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.shared.outstanding.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The daemon's end of the inbound queue.
#[derive(Debug)]
pub struct InboundQueue {
    rx: mpsc::Receiver<Queued>,
    refusals: Option<mpsc::Receiver<InboundMessage>>,
    shared: Arc<Shared>,
}

impl InboundQueue {
    /// The next admitted message, its room given back; `None` once admission is closed
    /// and the queue is empty.
    pub async fn recv(&mut self) -> Option<InboundMessage> {
        self.rx.recv().await.map(|queued| queued.msg)
    }

    /// The next admitted message, still holding its room until the [`Queued`] (or its
    /// [`Room`]) is dropped; `None` once admission is closed and the queue is empty.
    pub async fn recv_held(&mut self) -> Option<Queued> {
        self.rx.recv().await
    }

    /// Closes admission: later reservations fail and outstanding ones can no longer commit.
    /// Returns how many outstanding reservations were invalidated. Queued messages stay
    /// receivable so accepted work can drain.
    pub fn close(&mut self) -> usize {
        self.shared.closed.store(true, Ordering::Release);
        self.rx.close();
        self.shared.room.close();
        self.shared.outstanding.load(Ordering::Acquire)
    }

    /// Drops every queued, not-started message and returns how many there were.
    pub fn discard_pending(&mut self) -> usize {
        let mut n = 0;
        while self.rx.try_recv().is_ok() {
            n += 1;
        }
        n
    }

    /// Messages queued and not yet received.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Messages that hold room in the queue: not yet received, or received with
    /// [`InboundQueue::recv_held`] and still holding it. Reservations not committed yet
    /// do not count.
    pub fn waiting(&self) -> usize {
        let taken = self.shared.capacity - self.shared.room.available_permits();
        taken.saturating_sub(self.shared.outstanding.load(Ordering::Acquire))
    }

    /// Whether no message is queued.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// The refused messages awaiting a "too busy" reply. Can be taken once.
    pub fn take_refusals(&mut self) -> Option<mpsc::Receiver<InboundMessage>> {
        self.refusals.take()
    }

    /// How many admissions were refused because the queue was full, since start.
    pub fn rejected_full(&self) -> u64 {
        self.shared.rejected_full.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> InboundMessage {
        InboundMessage::new("console", "c", "u", text)
    }

    #[tokio::test]
    async fn reservations_count_against_capacity() {
        let (sink, mut queue) = inbound_queue(NonZeroUsize::new(2).unwrap());
        let r1 = sink.reserve().unwrap();
        sink.try_send(msg("a")).unwrap();
        assert_eq!(sink.reserve().unwrap_err(), AdmitError::QueueFull);
        assert_eq!(queue.rejected_full(), 1);
        r1.release();
        sink.try_send(msg("b")).unwrap();
        assert_eq!(queue.recv().await.unwrap().text, "a");
        assert_eq!(queue.recv().await.unwrap().text, "b");
    }

    #[tokio::test]
    async fn close_refuses_new_and_outstanding_but_drains_queued() {
        let (sink, mut queue) = inbound_queue(NonZeroUsize::new(4).unwrap());
        sink.try_send(msg("queued")).unwrap();
        let late = sink.reserve().unwrap();
        assert_eq!(queue.close(), 1);
        assert_eq!(late.commit(msg("late")).unwrap_err(), AdmitError::Closed);
        assert_eq!(sink.try_send(msg("after")).unwrap_err(), AdmitError::Closed);
        assert_eq!(queue.recv().await.unwrap().text, "queued");
        assert!(queue.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_refused_offer_reaches_the_refusal_channel() {
        let (sink, mut queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
        let mut refusals = queue.take_refusals().unwrap();
        sink.offer(msg("admitted")).unwrap();
        assert_eq!(
            sink.offer(msg("refused")).unwrap_err(),
            AdmitError::QueueFull
        );
        assert_eq!(refusals.recv().await.unwrap().text, "refused");
        assert_eq!(queue.recv().await.unwrap().text, "admitted");
        assert!(queue.take_refusals().is_none());
    }

    #[test]
    fn a_notice_past_the_side_channel_bound_is_dropped_and_counted() {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshot = recorder.snapshotter();
        let (sink, _queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
        metrics::with_local_recorder(&recorder, || {
            for _ in 0..REFUSALS_CAPACITY {
                assert!(sink.refuse(msg("waiting")));
            }
            assert!(!sink.refuse(msg("dropped")));
        });
        let dropped: Vec<_> = snapshot
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| {
                key.key().name() == REFUSED_METRIC
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "reason" && l.value() == "notice_dropped")
            })
            .map(|(.., value)| value)
            .collect();
        assert_eq!(dropped, [metrics_util::debugging::DebugValue::Counter(1)]);
    }

    #[test]
    fn an_offer_nobody_can_be_told_about_is_left_to_the_platform() {
        let (sink, _queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
        sink.offer(msg("admitted")).unwrap();
        for _ in 0..REFUSALS_CAPACITY {
            assert_eq!(sink.offer(msg("told")), Err(AdmitError::QueueFull));
        }
        assert_eq!(sink.offer(msg("untold")), Err(AdmitError::Overloaded));
    }

    #[tokio::test]
    async fn a_polled_batch_stops_at_closed_admission_and_waits_for_the_shutdown() {
        let (sink, mut queue) = inbound_queue(NonZeroUsize::new(4).unwrap());
        let telemetry = Telemetry::new("poll");
        telemetry.set_connected(true);
        let shutdown = CancellationToken::new();
        assert!(sink.send_polled(None, &telemetry, &shutdown).await);
        assert!(
            sink.send_polled(Some(msg("a")), &telemetry, &shutdown)
                .await
        );
        queue.close();
        let closed = {
            let (sink, telemetry, shutdown) = (sink.clone(), telemetry.clone(), shutdown.clone());
            tokio::spawn(async move {
                sink.send_polled(Some(msg("b")), &telemetry, &shutdown)
                    .await
            })
        };
        tokio::task::yield_now().await;
        assert!(!closed.is_finished(), "it waits for the shutdown");
        shutdown.cancel();
        assert!(!closed.await.unwrap());
        assert!(!telemetry.is_connected());
        assert_eq!(queue.recv().await.unwrap().text, "a");
    }

    #[tokio::test]
    async fn a_held_message_keeps_its_room_until_let_go() {
        let (sink, mut queue) = inbound_queue(NonZeroUsize::new(2).unwrap());
        sink.try_send(msg("a")).unwrap();
        sink.try_send(msg("b")).unwrap();
        let (a, room) = queue.recv_held().await.unwrap().into_parts();
        assert_eq!(a.text, "a");
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.waiting(), 2, "received, it still waits");
        assert_eq!(sink.try_send(msg("c")).unwrap_err(), AdmitError::QueueFull);
        drop(room);
        assert_eq!(queue.waiting(), 1);
        sink.try_send(msg("c")).unwrap();
        // `recv` gives the room back at once.
        assert_eq!(queue.recv().await.unwrap().text, "b");
        assert_eq!(queue.waiting(), 1);
        sink.try_send(msg("d")).unwrap();
        assert_eq!(sink.try_send(msg("e")).unwrap_err(), AdmitError::QueueFull);
    }

    #[tokio::test]
    async fn reserve_wait_waits_for_space() {
        let (sink, mut queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
        sink.try_send(msg("first")).unwrap();
        let waiter = {
            let sink = sink.clone();
            tokio::spawn(async move { sink.reserve_wait().await.unwrap().commit(msg("second")) })
        };
        assert_eq!(queue.recv().await.unwrap().text, "first");
        waiter.await.unwrap().unwrap();
        assert_eq!(queue.recv().await.unwrap().text, "second");
    }
}
