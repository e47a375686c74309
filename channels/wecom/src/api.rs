//! The commands the bot sends on the long connection, and [`Link`], the one handle they go
//! through: the only place the Secret goes on the wire (`aibot_subscribe`, [`subscribe`]).
//!
//! WeCom has no REST API for the intelligent bot: replies, proactive messages and uploads
//! are frames on the socket the transport holds, each answered `{headers: {req_id},
//! errcode}`. The transport [`attach`](Link::attach)es each connection it subscribed and
//! hands every answer to [`Link::answer`]; a command waits for the answer with its `req_id`
//! ([`ANSWER_TIMEOUT`], [`CHUNK_TIMEOUT`] for an upload chunk), its `errcode` sorted by
//! [`ApiError::answer`].
//!
//! - **A reply is bound to its connection.** WeCom refuses a reply to a callback on any
//!   connection but the one the callback came on (846605). Each connection has an id
//!   ([`ConnId`]); a reply names the connection its callback came on and, when that one is
//!   gone, fails at once with [`ApiError::ReplyGone`] without a frame: the channel then
//!   sends the text as a message of its own (`aibot_send_msg`).
//! - **One at a time per `req_id`.** A reply reuses its callback's `req_id`, and WeCom
//!   answers each reply before the next may go (the SDKs queue them): a command whose
//!   `req_id` is waiting for its answer waits its turn, within its timeout.
//! - **Bounded.** At most [`MAX_PENDING`] commands wait for answers; more are refused as
//!   [`ApiError::Connection`]. When a connection ends its waiting commands end too.
//! - **Unanswered is not unsent.** A command that could not be queued on a connection, or
//!   whose connection closed before its answer, is [`ApiError::Connection`]: WeCom never
//!   saw it, or nothing can follow it up on that connection. One queued whose answer did
//!   not come in [`ANSWER_TIMEOUT`], its connection still up, is [`ApiError::Unanswered`]:
//!   it may have been written and applied, and the same command may be sent again.
//!
//! Logs name commands and codes only: never a body, a `req_id`'s callback content, or the
//! Secret.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use md5::{Digest, Md5};
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::error::ApiError;
use crate::model::{
    self, Frame, MediaRef, Outgoing, StreamReply, Subscribe, UPLOAD_CHUNK_BYTES, UploadChunk,
    UploadFinish, UploadInit, UploadStarted, Uploaded,
};

/// How long WeCom may take to answer a command (the SDKs wait 5 s for a reply's answer).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an upload chunk (up to 512 KiB, 700 KB of base64) may take to be answered.
pub const CHUNK_TIMEOUT: Duration = Duration::from_secs(30);
/// The most commands waiting for an answer at once.
pub const MAX_PENDING: usize = 256;
/// How long a command waits for a connection to come up (a reconnect under way) or for
/// its `req_id`'s turn, before its own answer's timeout starts.
pub const CONNECT_WAIT: Duration = Duration::from_secs(15);
/// Frames queued for the socket's writer.
const OUTBOX: usize = 64;
/// The most bytes one upload takes: [`model::MAX_UPLOAD_CHUNKS`] chunks of
/// [`UPLOAD_CHUNK_BYTES`].
pub const MAX_UPLOAD_BYTES: u64 = model::MAX_UPLOAD_CHUNKS as u64 * UPLOAD_CHUNK_BYTES as u64;

/// Which connection: 1, 2, … in the order the transport subscribed them ([`Link::next_id`]).
pub type ConnId = u64;

/// A fresh `req_id` for `cmd`, shaped as the SDKs shape theirs: `<cmd>_<ms>_<hex8>`.
pub fn req_id(cmd: &str) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("{cmd}_{ms}_{:08x}", rand::random::<u32>())
}

/// The `aibot_subscribe` frame: the Secret's only way onto the wire.
pub fn subscribe(bot_id: &str, secret: &im_bridge_channel::Secret) -> Frame {
    let body = Subscribe {
        bot_id: bot_id.to_owned(),
        secret: secret.expose().to_owned(),
    };
    Frame::request(
        model::SUBSCRIBE,
        req_id(model::SUBSCRIBE),
        serde_json::to_value(&body).ok(),
    )
}

/// The handle to the current connection, shared by the transport and the channel.
#[derive(Clone, Debug, Default)]
pub struct Link {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<State>,
    /// The last connection id handed out (ids are never reused, across reconnects and
    /// restarts of the transport alike).
    last_id: std::sync::atomic::AtomicU64,
    /// Woken whenever a waiting command ends (its `req_id` is free again) and when a
    /// connection is attached or detached.
    freed: Notify,
}

#[derive(Debug, Default)]
struct State {
    current: Option<Current>,
    pending: HashMap<String, Pending>,
}

#[derive(Debug)]
struct Current {
    id: ConnId,
    outbox: mpsc::Sender<String>,
}

#[derive(Debug)]
struct Pending {
    conn: ConnId,
    answer: oneshot::Sender<Frame>,
}

/// The media kinds an upload and a media message name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaKind {
    /// A picture (at most 10 MB).
    Image,
    /// Any file (at most 20 MB).
    File,
}

impl MediaKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::File => "file",
        }
    }
}

/// Where a message goes.
#[derive(Clone, Copy, Debug)]
pub enum To<'a> {
    /// A reply to the callback `req_id`, which came on connection `conn`.
    Reply {
        /// The callback's `req_id`.
        req_id: &'a str,
        /// The connection it came on.
        conn: ConnId,
    },
    /// A message of the bot's own to a user id or a group's `chatid`.
    Chat(&'a str),
}

impl Link {
    /// A link with no connection yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A new connection's id.
    pub fn next_id(&self) -> ConnId {
        self.inner
            .last_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    /// Connection `id` is subscribed: commands go to it from now on, through the
    /// returned queue (the transport's writer reads it).
    pub fn attach(&self, id: ConnId) -> mpsc::Receiver<String> {
        let (outbox, frames) = mpsc::channel(OUTBOX);
        self.state().current = Some(Current { id, outbox });
        self.inner.freed.notify_waiters();
        frames
    }

    /// Connection `id` takes no new command (it is ending); those waiting for its answers
    /// still get them until [`Link::detach`].
    pub fn retire(&self, id: ConnId) {
        let mut state = self.state();
        if state.current.as_ref().is_some_and(|c| c.id == id) {
            state.current = None;
        }
    }

    /// Connection `id` ended: commands waiting on it end, and none goes to it any more.
    pub fn detach(&self, id: ConnId) {
        self.retire(id);
        let mut state = self.state();
        state.pending.retain(|_, p| p.conn != id);
        drop(state);
        self.inner.freed.notify_waiters();
    }

    /// WeCom's answer `frame` (no `cmd`) on connection `conn`: hands it to the command
    /// waiting for its `req_id`. `false` when none waits (late, or never asked).
    pub fn answer(&self, conn: ConnId, frame: Frame) -> bool {
        let mut state = self.state();
        let key = &frame.headers.req_id;
        if state.pending.get(key).is_none_or(|p| p.conn != conn) {
            return false;
        }
        let Some(waiting) = state.pending.remove(key) else {
            return false;
        };
        drop(state);
        self.inner.freed.notify_waiters();
        waiting.answer.send(frame).is_ok()
    }

    /// WeCom's refusal `frame` that names no `req_id` (its answer to an invalid request
    /// has no `headers`), on connection `conn`: handed to the command waiting on `conn`
    /// when it is the only one, so a permanent refusal is seen as one instead of as a
    /// missing answer. `false` when none or several wait (it cannot be placed; the
    /// transport also holds it back while a ping waits).
    pub fn refuse_only_waiting(&self, conn: ConnId, frame: Frame) -> bool {
        let mut state = self.state();
        let mut on_conn = state
            .pending
            .iter()
            .filter(|(_, p)| p.conn == conn)
            .map(|(key, _)| key);
        let key = match (on_conn.next(), on_conn.next()) {
            (Some(key), None) => key.clone(),
            _ => return false,
        };
        let Some(waiting) = state.pending.remove(&key) else {
            return false;
        };
        drop(state);
        self.inner.freed.notify_waiters();
        waiting.answer.send(frame).is_ok()
    }

    /// Sends `cmd` with `req_id` and `body` and waits for WeCom's answer (within
    /// `timeout`); `on` is the connection a reply is bound to. The answer when its
    /// `errcode` is 0.
    pub async fn request(
        &self,
        cmd: &'static str,
        req_id: &str,
        body: Value,
        on: Option<ConnId>,
        timeout: Duration,
    ) -> Result<Frame, ApiError> {
        let gone = |reason: &'static str| ApiError::Connection {
            op: cmd,
            reason: Cow::Borrowed(reason),
        };
        let text = serde_json::to_string(&Frame::request(cmd, req_id, Some(body)))
            .map_err(|_| gone("the frame could not be written"))?;
        let waiting_until = tokio::time::Instant::now() + CONNECT_WAIT;
        // Wait for a connection (a proactive command) and the req_id's turn.
        let (conn, outbox, answer) = loop {
            let freed = self.inner.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.state();
                let current = state.current.as_ref().map(|c| (c.id, c.outbox.clone()));
                let up = match (current, on) {
                    // A reply whose connection is gone can never be sent.
                    (None, Some(_)) => None,
                    (Some((id, _)), Some(bound)) if id != bound => None,
                    (current, _) => Some(current),
                };
                let Some(current) = up else {
                    return Err(ApiError::ReplyGone {
                        op: cmd,
                        errcode: crate::error::INVALID_REQ_ID,
                    });
                };
                if let Some((id, outbox)) = current
                    && !state.pending.contains_key(req_id)
                {
                    if state.pending.len() >= MAX_PENDING {
                        return Err(gone("too many commands wait for an answer"));
                    }
                    let (tx, rx) = oneshot::channel();
                    let waiting = Pending {
                        conn: id,
                        answer: tx,
                    };
                    state.pending.insert(req_id.to_owned(), waiting);
                    break (id, outbox, rx);
                }
            }
            if tokio::time::timeout_at(waiting_until, freed).await.is_err() {
                return Err(gone(
                    "no connection came up, or an earlier reply got no answer",
                ));
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let queued = tokio::time::timeout_at(deadline, outbox.send(text)).await;
        if !matches!(queued, Ok(Ok(()))) {
            self.forget(req_id, conn);
            return Err(gone(
                "the connection closed or stalled before the command went",
            ));
        }
        // Queued: from here the writer may have put it on the wire, and WeCom applied it.
        let unanswered = |reason: &'static str| ApiError::Unanswered {
            op: cmd,
            reason: Cow::Borrowed(reason),
        };
        let frame = match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(frame)) => frame,
            // Whatever it did, a command of a connection gone cannot be followed up on it
            // (a reply goes on its callback's connection): as good as unsent.
            Ok(Err(_)) => {
                self.forget(req_id, conn);
                return Err(gone("the connection closed before the answer"));
            }
            Err(_) => {
                self.forget(req_id, conn);
                return Err(unanswered("no answer in time"));
            }
        };
        ApiError::answer(cmd, frame.errcode)?;
        Ok(frame)
    }

    /// Drops the wait for `req_id` on `conn`, if it is still there.
    fn forget(&self, req_id: &str, conn: ConnId) {
        let mut state = self.state();
        if state.pending.get(req_id).is_some_and(|p| p.conn == conn) {
            state.pending.remove(req_id);
        }
        drop(state);
        self.inner.freed.notify_waiters();
    }

    /// One frame of stream `stream_id` answering the callback `req_id` (of connection
    /// `conn`): `content` is the whole text so far.
    pub async fn stream(
        &self,
        req_id: &str,
        conn: ConnId,
        stream_id: &str,
        content: &str,
        finish: bool,
    ) -> Result<(), ApiError> {
        let body =
            serde_json::to_value(StreamReply::new(stream_id, content, finish)).unwrap_or_default();
        self.request(model::RESPOND_MSG, req_id, body, Some(conn), ANSWER_TIMEOUT)
            .await
            .map(drop)
    }

    /// A command of the bot's own (not a reply): a fresh `req_id`, on the current
    /// connection.
    async fn call(
        &self,
        cmd: &'static str,
        body: impl serde::Serialize,
        timeout: Duration,
    ) -> Result<Frame, ApiError> {
        let body = serde_json::to_value(body).unwrap_or_default();
        self.request(cmd, &req_id(cmd), body, None, timeout).await
    }

    /// A markdown message of the bot's own (`aibot_send_msg`) to `chatid`.
    pub async fn send_markdown(&self, chatid: &str, content: &str) -> Result<(), ApiError> {
        let body = Outgoing::markdown(chatid, content);
        self.call(model::SEND_MSG, body, ANSWER_TIMEOUT)
            .await
            .map(drop)
    }

    /// An uploaded file or picture `media_id`, as a reply or a message of the bot's own.
    pub async fn send_media(
        &self,
        to: To<'_>,
        kind: MediaKind,
        media_id: &str,
    ) -> Result<(), ApiError> {
        let media = Some(MediaRef {
            media_id: media_id.to_owned(),
        });
        let (chatid, cmd, id, on) = match to {
            To::Reply { req_id, conn } => (None, model::RESPOND_MSG, req_id.to_owned(), Some(conn)),
            To::Chat(chatid) => (
                Some(chatid.to_owned()),
                model::SEND_MSG,
                self::req_id(model::SEND_MSG),
                None,
            ),
        };
        let outgoing = Outgoing {
            chatid,
            msgtype: kind.as_str().to_owned(),
            markdown: None,
            file: (kind == MediaKind::File).then(|| media.clone()).flatten(),
            image: (kind == MediaKind::Image).then_some(media).flatten(),
        };
        let body = serde_json::to_value(outgoing).unwrap_or_default();
        self.request(cmd, &id, body, on, ANSWER_TIMEOUT)
            .await
            .map(drop)
    }

    /// Uploads `bytes` as `filename` in chunks on the current connection: the `media_id`
    /// (valid three days). At most [`MAX_UPLOAD_BYTES`].
    pub async fn upload(
        &self,
        kind: MediaKind,
        filename: &str,
        bytes: &[u8],
    ) -> Result<String, ApiError> {
        let size = bytes.len() as u64;
        if size > MAX_UPLOAD_BYTES {
            return Err(ApiError::Http(
                im_bridge_channel::http::HttpError::TooLarge {
                    limit: MAX_UPLOAD_BYTES,
                },
            ));
        }
        let chunks: Vec<&[u8]> = bytes.chunks(UPLOAD_CHUNK_BYTES).collect();
        let init = UploadInit {
            kind: kind.as_str().to_owned(),
            filename: filename.to_owned(),
            total_size: size,
            total_chunks: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
            md5: Some(hex(&Md5::digest(bytes))),
        };
        let started = self.call(model::UPLOAD_INIT, init, ANSWER_TIMEOUT).await?;
        let upload_id = started
            .body_as::<UploadStarted>()
            .ok_or_else(|| bad_answer(model::UPLOAD_INIT))?
            .upload_id;
        for (index, chunk) in chunks.iter().enumerate() {
            let body = UploadChunk {
                upload_id: upload_id.clone(),
                chunk_index: u32::try_from(index).unwrap_or(u32::MAX),
                base64_data: base64::engine::general_purpose::STANDARD.encode(chunk),
            };
            self.call(model::UPLOAD_CHUNK, body, CHUNK_TIMEOUT).await?;
        }
        let finished = self
            .call(
                model::UPLOAD_FINISH,
                UploadFinish { upload_id },
                ANSWER_TIMEOUT,
            )
            .await?;
        let uploaded = finished
            .body_as::<Uploaded>()
            .ok_or_else(|| bad_answer(model::UPLOAD_FINISH))?;
        Ok(uploaded.media_id)
    }
}

/// An answer without the body its command promises.
fn bad_answer(op: &'static str) -> ApiError {
    ApiError::Http(im_bridge_channel::http::HttpError::decode(
        op,
        "the answer has no body of the expected shape",
    ))
}

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
