//! Test support: a fake channel that records every primitive call (and attachment fetch)
//! with the (paused) time it arrived, and fails calls on request. Shared by the engine
//! tests and the layers' tests.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::capabilities::{Capabilities, LengthUnit, UpdateMode};
use crate::channel::{Channel, ChannelExit, ChannelIdentity, Reaction, SendTarget, SentMessage};
use crate::error::{ChannelError, ChannelResult};
use crate::ids::MessageId;
use crate::inbound::InboundSink;
use crate::message::{
    ChatKind, FileKind, FileSource, InboundFile, InboundMessage, OutboundFile, OutboundMessage,
};

/// One accepted call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Start(String),
    Send(String),
    Edit(String, String),
    Finish(String, String),
    File(String),
    /// A fetch of the handle with this id, under this bound.
    Fetch(String, u64),
    /// The typing hint.
    Typing,
    /// The bridge is done with a message.
    TurnEnded,
    /// A reaction on the user's message.
    React(Reaction),
}

/// A primitive operation, to script failures and count attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    Start,
    Send,
    Edit,
    Finish,
    File,
    Fetch,
    Typing,
    TurnEnded,
    React,
}

pub(crate) struct Recorder {
    identity: ChannelIdentity,
    epoch: Instant,
    calls: Mutex<Vec<(Duration, Call)>>,
    /// The outcome of each next call of an op, in order: a failure, or `None` to let it
    /// through; past the queue, calls go through.
    failures: Mutex<HashMap<Op, VecDeque<Option<ChannelError>>>>,
    attempts: Mutex<HashMap<Op, usize>>,
    /// The send key of each new message sent, in order.
    send_keys: Mutex<Vec<Option<String>>>,
    /// The send key of each stream start tried, failures included, in order.
    start_keys: Mutex<Vec<Option<String>>>,
    next_id: AtomicU64,
}

impl Recorder {
    pub(crate) fn new(caps: Capabilities) -> Arc<Self> {
        Arc::new(Self {
            identity: ChannelIdentity::always_connected("recorder", caps),
            epoch: Instant::now(),
            calls: Mutex::new(Vec::new()),
            failures: Mutex::new(HashMap::new()),
            attempts: Mutex::new(HashMap::new()),
            send_keys: Mutex::new(Vec::new()),
            start_keys: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        })
    }

    /// Makes the next call of `op` fail with `error` (queued after earlier failures).
    pub(crate) fn fail(&self, op: Op, error: ChannelError) {
        self.failures
            .lock()
            .unwrap()
            .entry(op)
            .or_default()
            .push_back(Some(error));
    }

    /// Lets the next call of `op` through (queued after earlier failures, before later
    /// ones).
    pub(crate) fn pass(&self, op: Op) {
        self.failures
            .lock()
            .unwrap()
            .entry(op)
            .or_default()
            .push_back(None);
    }

    /// The accepted calls, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.timed().into_iter().map(|(_, c)| c).collect()
    }

    /// The accepted calls with their time since the recorder was made.
    pub(crate) fn timed(&self) -> Vec<(Duration, Call)> {
        self.calls.lock().unwrap().clone()
    }

    /// The send key of each new message accepted, in order.
    pub(crate) fn send_keys(&self) -> Vec<Option<String>> {
        self.send_keys.lock().unwrap().clone()
    }

    /// The send key of each stream start tried, failures included, in order.
    pub(crate) fn start_keys(&self) -> Vec<Option<String>> {
        self.start_keys.lock().unwrap().clone()
    }

    /// How many times `op` was called, failures included.
    pub(crate) fn attempts(&self, op: Op) -> usize {
        self.attempts.lock().unwrap().get(&op).copied().unwrap_or(0)
    }

    fn call(&self, op: Op, call: Call) -> ChannelResult {
        *self.attempts.lock().unwrap().entry(op).or_default() += 1;
        if let Some(error) = self
            .failures
            .lock()
            .unwrap()
            .get_mut(&op)
            .and_then(VecDeque::pop_front)
            .flatten()
        {
            return Err(error);
        }
        let at = Instant::now() - self.epoch;
        self.calls.lock().unwrap().push((at, call));
        Ok(())
    }

    fn sent(&self) -> SentMessage {
        SentMessage {
            id: MessageId::new(format!("m{}", self.next_id.fetch_add(1, Ordering::Relaxed))),
        }
    }
}

#[async_trait]
impl Channel for Recorder {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(&self, _: InboundSink, _: CancellationToken) -> ChannelResult<ChannelExit> {
        Ok(ChannelExit::Stopped)
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.call(Op::Send, Call::Send(text.into()))?;
        self.send_keys
            .lock()
            .unwrap()
            .push(to.hints.send_key.clone());
        Ok(self.sent())
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.start_keys
            .lock()
            .unwrap()
            .push(to.hints.send_key.clone());
        self.call(Op::Start, Call::Start(text.into()))?;
        Ok(self.sent())
    }

    async fn edit_text(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.call(Op::Edit, Call::Edit(id.to_string(), text.into()))
    }

    async fn finish_stream(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.call(Op::Finish, Call::Finish(id.to_string(), text.into()))
    }

    async fn send_file(&self, _: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        self.call(Op::File, Call::File(file.filename.clone()))
    }

    /// The metadata's `thread`, as a platform with threads keeps it.
    fn thread_of<'a>(&self, to: SendTarget<'a>) -> Option<Cow<'a, str>> {
        to.metadata
            .get("thread")
            .and_then(serde_json::Value::as_str)
            .map(Cow::Borrowed)
    }

    async fn show_typing(&self, _: SendTarget<'_>) -> ChannelResult {
        self.call(Op::Typing, Call::Typing)
    }

    async fn turn_ended(&self, _: SendTarget<'_>) -> ChannelResult {
        self.call(Op::TurnEnded, Call::TurnEnded)
    }

    async fn react(&self, _: SendTarget<'_>, reaction: Reaction) -> ChannelResult {
        self.call(Op::React, Call::React(reaction))
    }

    /// Answers a handle with the bytes of its id; inline bytes are refused, so a layer
    /// that fell back to the trait default instead of passing the call on shows up.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let FileSource::Handle { id } = &file.source else {
            return Err(ChannelError::Unsupported("inline files in the recorder"));
        };
        self.call(Op::Fetch, Call::Fetch(id.clone(), max_bytes))?;
        Ok(Bytes::from(id.clone()))
    }

    /// Names the file after its handle: a layer that dropped the label would show none.
    async fn fetch_labeled(
        &self,
        file: &InboundFile,
        max_bytes: u64,
    ) -> ChannelResult<(Bytes, crate::message::FileLabel)> {
        let bytes = self.fetch_file(file, max_bytes).await?;
        let label = crate::message::FileLabel {
            filename: Some(format!("{}.txt", String::from_utf8_lossy(&bytes))),
            mime_type: None,
        };
        Ok((bytes, label))
    }
}

/// A recorder over an [`editable`] channel of `len` chars, and `layer` over it.
pub(crate) fn layered<L>(len: usize, layer: impl FnOnce(Arc<Recorder>) -> L) -> (Arc<Recorder>, L) {
    layered_with(editable(len), layer)
}

/// [`layered`] over a recorder with these capabilities.
pub(crate) fn layered_with<L>(
    caps: Capabilities,
    layer: impl FnOnce(Arc<Recorder>) -> L,
) -> (Arc<Recorder>, L) {
    let rec = Recorder::new(caps);
    (rec.clone(), layer(rec))
}

/// An edit-in-place channel: `len` chars, 1 s private / 3 s group edit intervals.
pub(crate) fn editable(len: usize) -> Capabilities {
    Capabilities {
        updates: UpdateMode::EditInPlace,
        length_unit: LengthUnit::Chars,
        min_edit_interval_private: Duration::from_secs(1),
        min_edit_interval_group: Duration::from_secs(3),
        ..Capabilities::final_only(len)
    }
}

/// An edit-in-place channel without edit intervals.
pub(crate) fn unpaced() -> Capabilities {
    Capabilities {
        updates: UpdateMode::EditInPlace,
        ..Capabilities::final_only(4096)
    }
}

/// An outbound message in chat `c1` answering source message `s1`.
pub(crate) fn out(text: &str, is_final: bool) -> OutboundMessage {
    out_to("s1", ChatKind::Private, text, is_final)
}

/// Where a layer test sends: the target of [`out`] (chat `c1`, answering `s1`).
pub(crate) fn target() -> SendTarget<'static> {
    static MESSAGE: LazyLock<OutboundMessage> = LazyLock::new(|| out("", true));
    SendTarget::from(&*MESSAGE)
}

/// An outbound message in chat `c1` answering `source`, in a chat of `kind`.
pub(crate) fn out_to(source: &str, kind: ChatKind, text: &str, is_final: bool) -> OutboundMessage {
    let mut inbound = InboundMessage::new("recorder", "c1", "u1", "q");
    inbound.thread_ts = Some(MessageId::new(source));
    inbound.chat_kind = kind;
    inbound.reply(text, is_final)
}

/// A one-byte text file named `name`, a file the daemon hands over for upload.
pub(crate) fn attachment(name: &str) -> OutboundFile {
    OutboundFile {
        path: name.into(),
        filename: name.into(),
        mime_type: "text/plain".into(),
        size: 1,
        is_image: false,
        if_refused: None,
    }
}

/// An inbound document whose bytes are behind the platform handle `id`.
pub(crate) fn handle(id: &str) -> InboundFile {
    InboundFile {
        kind: FileKind::File,
        filename: None,
        mime_type: None,
        size: None,
        source: FileSource::Handle { id: id.into() },
    }
}

/// The time since the recorder was made, in whole and fractional seconds.
pub(crate) fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}
