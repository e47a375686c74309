//! Live streams and the coalescer that shows their partial texts.
//!
//! A stream is one reply being written: keyed by `(chat, source message)`, it lives from
//! its first partial to its final (or its eviction). It remembers the message showing it,
//! the text that message shows, and at most **one** pending text: a newer partial replaces
//! the pending one, so a burst of updates costs one edit.
//!
//! Publishing a partial never waits for the edit interval. If the [`EditClock`] allows a
//! write now and no flush is under way, the caller shows the text itself (one platform
//! call, which is also the back-pressure a slow platform should exert); otherwise the text
//! is left pending for a flusher task, which sleeps until the clock allows and then shows
//! whatever text is pending by then. At most one flush (inline or task) runs per stream.
//!
//! The final supersedes everything: [`Stream::close`] drops the pending text, stops the
//! flusher and waits for a call in flight, then hands the message over to be finished.
//!
//! A stream's message is started under a send key of the stream's own
//! ([`DeliveryHints::send_key`]), the same on every attempt until one lands: a start the
//! platform took whose answer was lost (a timeout, a 5xx after applying) is, on a
//! platform that names a send by its key (Discord's `nonce`, Feishu's `uuid`), the same
//! message when it is started again, not a second one. The key is random, so it names no
//! final (the journal's keys are bare hex) and no other stream; a stream whose message is
//! gone starts its next one under a new key. [`Stream::lost_start`] tells the final when
//! a start met network or server trouble and none landed since.
//!
//! A text the bot-wide rate budget had no room for ([`ChannelError::OverBudget`]) was not
//! sent: it goes back to pending (unless a newer one came meanwhile) and the flusher waits
//! until the budget expects room, so a stream skips updates while the bot is busy instead
//! of queueing them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::channel::{Channel, SendTarget};
use crate::error::ChannelError;
use crate::ids::{ChatId, MessageId};
use crate::message::{ChatKind, DeliveryHints, OutboundMessage};

use super::throttle::EditClock;

/// The most streams tracked at once. Live streams are bounded by the runs in flight, since
/// every run ends in a final that removes its stream; this bound only matters if finals go
/// missing. At the bound the oldest stream is evicted: its pending text is dropped, its
/// flusher stops, its message keeps the last text shown, and its final, when it comes, is
/// sent as a new message.
pub const MAX_STREAMS: usize = 1024;

/// A stream's key: the chat and the source message the reply answers.
pub(super) type StreamKey = (ChatId, Option<MessageId>);

/// The key of the stream `msg` belongs to.
pub(super) fn stream_key(msg: &OutboundMessage) -> StreamKey {
    (msg.chat_id.clone(), msg.thread_ts.clone())
}

/// The live streams of one channel (bounded by [`MAX_STREAMS`]).
#[derive(Debug, Default)]
pub(super) struct Streams {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    map: HashMap<StreamKey, Arc<Stream>>,
    /// Opening order, to find the oldest stream.
    next_seq: u64,
}

impl Streams {
    /// The stream for `msg`'s key, opened if needed (evicting the oldest at the bound).
    pub(super) fn get_or_open(
        &self,
        msg: &OutboundMessage,
        parent: &CancellationToken,
    ) -> Arc<Stream> {
        let key = stream_key(msg);
        let mut table = lock(&self.table);
        if let Some(stream) = table.map.get(&key) {
            return stream.clone();
        }
        // A reply an earlier process streamed goes on in the message it showed.
        table.open(key, msg, super::resumed(msg), parent)
    }

    /// A new stream for `msg`'s key, in a message of its own, in place of the one the
    /// caller removed.
    pub(super) fn reopen(&self, msg: &OutboundMessage, parent: &CancellationToken) -> Arc<Stream> {
        lock(&self.table).open(stream_key(msg), msg, None, parent)
    }

    /// Removes and returns the stream of `key`, if one is live.
    pub(super) fn remove(&self, key: &StreamKey) -> Option<Arc<Stream>> {
        lock(&self.table).map.remove(key)
    }

    /// How many streams are live.
    pub(super) fn len(&self) -> usize {
        lock(&self.table).map.len()
    }
}

impl Table {
    /// Opens the stream of `key` going on in `message` (evicting the oldest at the bound).
    fn open(
        &mut self,
        key: StreamKey,
        msg: &OutboundMessage,
        message: Option<MessageId>,
        parent: &CancellationToken,
    ) -> Arc<Stream> {
        if self.map.len() >= MAX_STREAMS
            && let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, s)| s.seq)
                .map(|(k, _)| k.clone())
            && let Some(evicted) = self.map.remove(&oldest)
        {
            tracing::debug!("Evicted the oldest live stream.");
            evicted.abandon();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let stream = Arc::new(Stream {
            seq,
            opened: Instant::now(),
            target: OwnedTarget::from(msg),
            state: Mutex::new(State {
                message,
                start_key: new_start_key(),
                ..State::default()
            }),
            io: tokio::sync::Mutex::new(()),
            cancel: parent.child_token(),
        });
        self.map.insert(key, stream.clone());
        stream
    }
}

/// One reply being written.
#[derive(Debug)]
pub(super) struct Stream {
    seq: u64,
    /// When its first partial came: the first one is held from here.
    opened: Instant,
    target: OwnedTarget,
    state: Mutex<State>,
    /// Held across each platform call, so a flush and the final never overlap.
    io: tokio::sync::Mutex<()>,
    /// Cancelled by the final or an eviction; stops the flusher.
    cancel: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    /// The message showing the stream, once `start_stream` succeeded.
    message: Option<MessageId>,
    /// What that message shows, or will once the call in flight lands; `None` if unknown.
    shown: Option<String>,
    /// The newest text not shown yet (the only one kept).
    pending: Option<String>,
    /// A flush (inline or task) owns the pending text.
    flushing: bool,
    /// The final or an eviction ended the stream: nothing more is shown.
    closed: bool,
    /// A rate budget had no room: nothing is shown before this.
    not_before: Option<Instant>,
    /// The send key the stream's message is started under ([`Stream::start_hints`]): new
    /// when a message the stream showed is gone.
    start_key: String,
    /// A start met network or server trouble and none landed since: the platform may
    /// show a message the stream has no id for.
    start_unsure: bool,
}

/// A new stream's start key: random, 128 bits, hex, after `stream-` (see the module docs).
fn new_start_key() -> String {
    format!("stream-{:032x}", rand::random::<u128>())
}

/// What the publisher of a partial must do after offering it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Offer {
    /// Nothing: the text is already shown or pending, or a flush will pick it up.
    Nothing,
    /// Flush it: the caller now owns the stream's flush.
    Flush,
}

impl Stream {
    /// Leaves `text` as the stream's pending text, unless it changes nothing.
    pub(super) fn offer(&self, text: &str) -> Offer {
        let mut state = lock(&self.state);
        if state.closed || state.pending.as_deref() == Some(text) {
            return Offer::Nothing;
        }
        if state.shown.as_deref() == Some(text) {
            // The newest text is on screen already; an older pending one is moot.
            state.pending = None;
            return Offer::Nothing;
        }
        state.pending = Some(text.to_owned());
        if state.flushing {
            return Offer::Nothing;
        }
        state.flushing = true;
        Offer::Flush
    }

    /// Ends the stream for its final: drops the pending text, stops the flusher, waits for
    /// a call in flight, and returns the message to finish, if one was started.
    pub(super) async fn close(&self) -> Option<MessageId> {
        self.close_showing().await.0
    }

    /// [`Stream::close`], also returning what the message shows, if that is known.
    pub(super) async fn close_showing(&self) -> (Option<MessageId>, Option<String>) {
        self.abandon();
        let _io = self.io.lock().await;
        let state = lock(&self.state);
        (state.message.clone(), state.shown.clone())
    }

    /// The message showing the stream, once one was started.
    pub(super) fn message(&self) -> Option<MessageId> {
        lock(&self.state).message.clone()
    }

    /// The hints the stream's message is started under: the reply's, with the stream's
    /// send key (see the module docs).
    fn start_hints(&self) -> DeliveryHints {
        let key = lock(&self.state).start_key.clone();
        DeliveryHints {
            send_key: Some(key),
            ..self.target.hints.clone()
        }
    }

    /// The hints to start the stream's message again under, when a start met network or
    /// server trouble and none landed since: the platform may show a message all the same.
    pub(super) fn lost_start(&self) -> Option<DeliveryHints> {
        let unsure = lock(&self.state).start_unsure;
        unsure.then(|| self.start_hints())
    }

    /// Stops showing anything: drops the pending text and stops the flusher.
    fn abandon(&self) {
        let mut state = lock(&self.state);
        state.closed = true;
        state.pending = None;
        drop(state);
        self.cancel.cancel();
    }

    fn chat_kind(&self) -> ChatKind {
        self.target.chat_kind
    }

    /// Where the stream's calls go.
    pub(super) fn target(&self) -> SendTarget<'_> {
        self.target.as_target()
    }

    /// Takes the pending text to show it, with the message to edit; clears the flush
    /// ownership when there is nothing to show.
    fn take_pending(&self) -> Option<(String, Option<MessageId>)> {
        let mut state = lock(&self.state);
        let text = match state.pending.take() {
            Some(text) if !state.closed => text,
            _ => {
                state.flushing = false;
                return None;
            }
        };
        state.shown = Some(text.clone());
        Some((text, state.message.clone()))
    }

    /// Records the outcome of showing `text`; returns whether a text is pending (the flush
    /// keeps its ownership then): a newer one, or `text` itself when a rate budget had no
    /// room for it.
    fn shown(&self, text: String, result: Result<Option<MessageId>, ChannelError>) -> bool {
        let mut state = lock(&self.state);
        match result {
            Ok(Some(started)) => {
                state.message = Some(started);
                state.start_unsure = false;
            }
            Ok(None) => {}
            Err(ChannelError::OverBudget(wait)) => {
                state.shown = None;
                state.pending.get_or_insert(text);
                state.not_before = Some(Instant::now() + wait);
            }
            Err(ChannelError::NotEditable) => {
                state.shown = None;
                // The message is gone: the next partial starts a new one, under a key of
                // its own (a platform may answer the old key with the message gone).
                if state.message.take().is_some() {
                    state.start_key = new_start_key();
                }
            }
            Err(error) => {
                state.shown = None;
                // A start that met network or server trouble may have landed.
                if state.message.is_none() && matches!(error, ChannelError::Transport(_)) {
                    state.start_unsure = true;
                }
            }
        }
        if state.pending.is_some() && !state.closed {
            true
        } else {
            state.flushing = false;
            false
        }
    }
}

/// Told when a stream got its message: the chat, the source message the reply answers, and
/// the platform message that now shows the stream.
pub type StreamStarted = Arc<dyn Fn(&ChatId, Option<&MessageId>, &MessageId) + Send + Sync>;

/// What a flush needs; cheap to clone into a task.
pub(super) struct Flusher<S: ?Sized> {
    pub(super) stack: Arc<S>,
    pub(super) clock: Arc<EditClock>,
    pub(super) tasks: TaskTracker,
    pub(super) started: Option<StreamStarted>,
}

impl<S: ?Sized> Clone for Flusher<S> {
    fn clone(&self) -> Self {
        Self {
            stack: self.stack.clone(),
            clock: self.clock.clone(),
            tasks: self.tasks.clone(),
            started: self.started.clone(),
        }
    }
}

impl<S: Channel + ?Sized> Flusher<S> {
    /// Shows `stream`'s pending text now if the clock allows, else from a task once it
    /// does. The caller must own the stream's flush ([`Offer::Flush`]).
    pub(super) async fn flush(&self, stream: Arc<Stream>) {
        if self.ready_at(&stream) <= Instant::now() {
            // Should the caller give up mid-call, the flush must not stay owned forever.
            let mut owned = Owned {
                stream: &stream,
                released: false,
            };
            let more = self.flush_once(&stream).await;
            owned.released = true;
            if !more {
                return;
            }
        }
        let span = tracing::debug_span!(
            "stream",
            channel = self.stack.name(),
            chat = %stream.target.chat_id
        );
        let this = self.clone();
        self.tasks
            .spawn(async move { this.run(stream).await }.instrument(span));
    }

    /// The flusher task: sleeps until the clock allows, shows the pending text, repeats
    /// while a newer one came meanwhile. Ends at once when the stream closes.
    async fn run(self, stream: Arc<Stream>) {
        loop {
            let at = self.ready_at(&stream);
            tokio::select! {
                biased;
                () = stream.cancel.cancelled() => return,
                () = tokio::time::sleep_until(at) => {}
            }
            // Another stream of the chat may have met a Retry-After meanwhile.
            if self.ready_at(&stream) > Instant::now() {
                continue;
            }
            if !self.flush_once(&stream).await {
                return;
            }
        }
    }

    /// When the stream's pending text may be shown: when the clock allows, and for the
    /// first text not before the hold ran out (a final that comes meanwhile costs the only
    /// write).
    fn ready_at(&self, stream: &Stream) -> Instant {
        let (message, not_before) = {
            let state = lock(&stream.state);
            (state.message.clone(), state.not_before)
        };
        let ready = self
            .clock
            .ready_at(&stream.target.chat_id, stream.chat_kind(), message.as_ref())
            .max(not_before.unwrap_or_else(Instant::now));
        match message {
            Some(_) => ready,
            None => ready.max(stream.opened + self.clock.first_partial_hold()),
        }
    }

    /// Shows the pending text once; returns whether a newer one is pending.
    async fn flush_once(&self, stream: &Stream) -> bool {
        let _io = stream.io.lock().await;
        let Some((text, message)) = stream.take_pending() else {
            return false;
        };
        let target = stream.target.as_target();
        let result = match &message {
            None => {
                let hints = stream.start_hints();
                let target = target.with_hints(&hints);
                let started = self.stack.start_stream(target, &text).await;
                started.map(|sent| Some(sent.id))
            }
            Some(message) => self
                .stack
                .edit_text(target, message, &text)
                .await
                .map(|()| None),
        };
        if let Err(error) = &result {
            tracing::debug!(channel = self.stack.name(), %error, "A partial update was not shown.");
        }
        if let (Ok(Some(started)), Some(tell)) = (&result, &self.started) {
            tell(
                &stream.target.chat_id,
                stream.target.reply_to.as_ref(),
                started,
            );
        }
        stream.shown(text, result)
    }
}

/// Releases a stream's flush ownership if an inline flush is dropped before it ends.
struct Owned<'a> {
    stream: &'a Stream,
    released: bool,
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        if !self.released {
            lock(&self.stream.state).flushing = false;
        }
    }
}

/// A [`SendTarget`] the stream owns, so a flusher task can outlive the publishing call.
#[derive(Debug)]
struct OwnedTarget {
    chat_id: ChatId,
    chat_kind: ChatKind,
    reply_to: Option<MessageId>,
    metadata: Map<String, Value>,
    hints: DeliveryHints,
    source_at: Option<f64>,
}

impl From<&OutboundMessage> for OwnedTarget {
    fn from(msg: &OutboundMessage) -> Self {
        Self {
            chat_id: msg.chat_id.clone(),
            chat_kind: msg.chat_kind,
            reply_to: msg.thread_ts.clone(),
            metadata: msg.metadata.clone(),
            hints: msg.hints.clone(),
            source_at: msg.source_created_at,
        }
    }
}

impl OwnedTarget {
    fn as_target(&self) -> SendTarget<'_> {
        SendTarget {
            chat_id: &self.chat_id,
            chat_kind: self.chat_kind,
            reply_to: self.reply_to.as_ref(),
            metadata: &self.metadata,
            hints: &self.hints,
            source_at: self.source_at,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning only means a panic elsewhere mid-update; the state is still valid.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
