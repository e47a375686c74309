//! The WeCom channel: the long connection in, stream replies out.
//!
//! - **In**: each message callback is normalized (`inbound`) and offered to the daemon's
//!   queue, with the id of the connection it came on (metadata `connection`): WeCom has no
//!   acknowledgement, and a callback's `req_id` can be answered only on that connection.
//!   Redeliveries carry the same `msgid` and are dropped by the daemon's dedupe.
//! - **Out, streamed**: a reply is one stream message (`aibot_respond_msg`, `msgtype:
//!   stream`) refreshed in place: the delivery engine starts it (with the "working on it"
//!   notice, or the first text), sends the whole text so far at most once a second, and
//!   finishes it with the final (`finish: true`). A long answer is several messages of at
//!   most `max_markdown_bytes`, in [`WeComMarkdown`](crate::WeComMarkdown). WeCom reads
//!   no send key, so each message of a final goes once per send key ([`SentOnce`]): a
//!   final delivered again after one of its messages failed sends only what is missing.
//! - **The final always lands**: when the stream can no longer be updated (846608, six
//!   minutes after the user's message) or its callback's connection is gone (846605, or known
//!   without asking after a reconnect), the engine sends the final as a message of its
//!   own: after 846608 straight as a proactive markdown message (`aibot_send_msg`) to the
//!   user or the group, as WeCom's plugin does (the callback's stream channel is spent);
//!   otherwise a new finished stream on the callback when it still takes one, else the
//!   proactive message. A final refused because the connection is no longer subscribed
//!   (846609) or not sent for want of a connection goes the same way, on the connection
//!   the transport subscribes anew meanwhile, or is delivered again later. A finishing
//!   frame whose answer never came in 5 s, its connection still up, may or may not have
//!   landed: it fails as `ChannelError::Unconfirmed` (see `WeComChannel::finish`), so the
//!   final is delivered again by the same frame, not sent as a second message at once.
//! - **Files**: presented files are uploaded over the socket in chunks and sent as a file
//!   or image reply (or message); files users send are downloaded from WeCom's file host
//!   (`file_hosts` only, bounded) and decrypted with the callback's `aeskey`.

mod recent;

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use im_bridge_channel::{
    AdmitError, AllowedUsers, BuildContext, Capabilities, Channel, ChannelError, ChannelExit,
    ChannelIdentity, ChannelResult, ChatBudget, CommandVocabulary, FileLabel, InboundFile,
    InboundSink, LengthUnit, MessageId, OutboundFile, SendParts, SendTarget, SentMessage, SentOnce,
    Skip, Stage, Telemetry, UpdateMode, Writes, fetch_handle_labeled, http, split,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::api::{ConnId, Link, MediaKind, To};
use crate::config::{MAX_STREAM_BYTES, WeComSettings};
use crate::error::{ApiError, STREAM_EXPIRED};
use crate::inbound::media::decrypt;
use crate::inbound::{InboundContext, normalize_frame, parse_handle};
use crate::markup::WeComMarkdown;
use crate::model::Frame;
use crate::transport::ws::{self, Dropped, EventHandler, Exit, Timers, WsSettings};
use recent::Recent;

/// The metadata key of the connection a message came on.
const CONNECTION: &str = "connection";
/// The largest file sent (WeCom's file limit, 20 MB).
pub const MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;
/// The largest picture sent as one (10 MB); a larger one goes as a file.
pub const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;
/// The pictures WeCom takes as images ("图片（image）：10MB，支持JPG,PNG格式", 上传临时素材);
/// any other goes as a file.
pub const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/jpg", "image/png"];
/// The most bytes a file's padding adds (PKCS#7 to 32 bytes).
const PADDING: u64 = 32;
/// How long the channel stays off WeCom after another connection took the bot over
/// before it subscribes again (see [`Channel::run`]).
pub const REPLACED_HOLD: Duration = Duration::from_secs(10 * 60);
/// The prefix of the id of a message sent on its own (not a stream: it cannot be edited).
const SENT_PREFIX: &str = "sent:";
/// How many callbacks whose stream expired (846608) are remembered, so what follows goes
/// straight as a message of the bot's own. At the bound the oldest is forgotten: a
/// forgotten one costs one more refused stream frame before that message.
const EXPIRED_CALLBACKS: usize = 256;

/// The WeCom channel. `Debug` shows no secret (the settings' Secret is a `Secret`).
#[derive(Debug)]
pub struct WeComChannel {
    identity: ChannelIdentity,
    settings: WeComSettings,
    link: Link,
    files: reqwest::Client,
    allowed_users: AllowedUsers,
    commands: CommandVocabulary,
    telemetry: Telemetry,
    /// The `req_id`s of callbacks whose stream expired (at most [`EXPIRED_CALLBACKS`]).
    expired: Recent,
    /// The messages of finals that landed, by send key: WeCom reads none, so a final
    /// delivered again sends only what is still missing ([`SendParts::send_part`]; the
    /// newest [`im_bridge_channel::SENT_KEYS`]).
    sent: SentOnce,
}

/// WeCom takes at most 30 messages a minute and 1,000 an hour in one conversation, replies
/// and messages sent on the bot's own together; a stream counts once, however often it is
/// refreshed (documented: "总共给某个会话发消息的限制为 30 条/分钟，1000 条/小时"). One
/// budget keeps within both: a burst of 12, then one every 3.7 s, is at most 28 in any
/// minute and 985 in any hour, a little under each as a budget should be (a write is
/// counted when its answer comes). Over them WeCom answers `45009` and the chat waits.
pub const CONVERSATION_BUDGET: ChatBudget =
    ChatBudget::new(Writes::MESSAGES_FILES, 12, Duration::from_millis(3_700));

/// How long a callback's media URL can be downloaded: "资源下载地址，5 分钟内有效" (the intelligent
/// bot's message callbacks, <https://developer.work.weixin.qq.com/document/path/100719>).
pub const MEDIA_URL_LIFETIME: Duration = Duration::from_secs(5 * 60);

/// What WeCom can show: one stream message refreshed in place (at most once a second)
/// until a refresh says it is finished, markdown of at most `max_markdown_bytes`, files
/// out.
pub fn capabilities(settings: &WeComSettings) -> Capabilities {
    Capabilities {
        updates: UpdateMode::EditInPlace,
        length_unit: LengthUnit::Bytes,
        min_edit_interval_private: Duration::from_secs(1),
        min_edit_interval_group: Duration::from_secs(1),
        chat_budget: Some(CONVERSATION_BUDGET),
        working_placeholder: true,
        finish_closes_stream: true,
        markup: &WeComMarkdown,
        max_upload_bytes: MAX_FILE_BYTES,
        files_expire_after: Some(MEDIA_URL_LIFETIME),
        ..Capabilities::final_only(settings.max_markdown_bytes)
    }
}

impl WeComChannel {
    /// A channel with `settings`, the daemon's commands and who may talk to it.
    pub fn new(settings: WeComSettings, ctx: &BuildContext) -> ChannelResult<Self> {
        let files = http::file_client(&settings.file_hosts).map_err(ChannelError::from)?;
        let telemetry = Telemetry::new(NAME);
        Ok(Self {
            // WeCom keeps one connection per bot, a newer one replacing the older: with a
            // shared store only the lease holder connects.
            identity: ChannelIdentity::new(&telemetry, capabilities(&settings)).exclusive(true),
            settings,
            link: Link::new(),
            files,
            allowed_users: ctx.allowed_users.clone(),
            commands: ctx.commands.clone(),
            telemetry,
            expired: Recent::new(EXPIRED_CALLBACKS),
            sent: SentOnce::default(),
        })
    }

    /// Whether the callback `req_id`'s stream expired: it takes no new stream.
    fn stream_expired(&self, req_id: &str) -> bool {
        self.expired.contains(req_id)
    }

    /// Remembers that the callback `req_id`'s stream expired, when `result` says so.
    fn note_expiry<T>(&self, req_id: &str, result: &Result<T, ApiError>) {
        if let Err(ApiError::ReplyGone {
            errcode: STREAM_EXPIRED,
            ..
        }) = result
        {
            self.expired.insert(req_id);
        }
    }

    /// Records a send's outcome.
    fn sent<T>(&self, result: Result<T, ApiError>) -> ChannelResult<T> {
        self.telemetry.sending(result.map_err(ChannelError::from))
    }

    /// A markdown message on its own: a finished stream answering the callback when its
    /// connection is still up and its stream has not expired, else a proactive message to
    /// the chat.
    async fn send_message(&self, to: &SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        if let Some((req_id, conn)) = reply_of(to).filter(|(r, _)| !self.stream_expired(r)) {
            let stream_id = stream_id();
            let streamed = self.link.stream(req_id, conn, &stream_id, text, true).await;
            self.note_expiry(req_id, &streamed);
            match streamed {
                Ok(()) => {
                    self.telemetry.sent();
                    return Ok(SentMessage {
                        id: MessageId::new(format!("{SENT_PREFIX}{stream_id}")),
                    });
                }
                Err(ApiError::ReplyGone { errcode, .. }) => {
                    tracing::debug!(
                        errcode,
                        "The WeCom callback takes no more replies; sending a message of the bot's own."
                    );
                }
                Err(error) => return self.sent(Err(error)),
            }
        }
        self.sent(self.link.send_markdown(to.chat_id.as_str(), text).await)?;
        Ok(SentMessage {
            id: MessageId::new(format!("{SENT_PREFIX}{}", crate::api::req_id("send"))),
        })
    }

    /// One frame of the stream `id` (started by [`Channel::start_stream`]), as WeCom
    /// answered it.
    async fn stream(
        &self,
        to: &SendTarget<'_>,
        id: &MessageId,
        text: &str,
        finish: bool,
    ) -> ChannelResult<Result<(), ApiError>> {
        let Some((req_id, conn)) = reply_of(to) else {
            return Err(ChannelError::NotEditable);
        };
        if id.as_str().starts_with(SENT_PREFIX) {
            return Err(ChannelError::NotEditable);
        }
        let streamed = self
            .link
            .stream(req_id, conn, id.as_str(), text, finish)
            .await;
        self.note_expiry(req_id, &streamed);
        Ok(streamed)
    }

    /// The frame finishing stream `id` with `text`. When its answer does not come in
    /// time on a connection still up, WeCom may have applied it or not: the failure is
    /// `Unconfirmed`, so the engine does not send the final anew as a second message but
    /// delivers it again as it was, by the same finishing frame, which lands if the first
    /// did not. If the first did land, WeCom refuses the second (a finished stream takes
    /// no frame) and the final goes as a message of its own, shown twice: WeCom's answer
    /// to a frame on a finished stream is not known, so a refusal cannot be read as "it
    /// landed" without risking a final that never did. A stream gone (846605, 846608) is
    /// `NotEditable` as ever: the final then goes as a message of its own.
    async fn finish(&self, to: &SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let finished = match self.stream(to, id, text, true).await? {
            Err(error @ ApiError::Unanswered { .. }) => {
                Err(ChannelError::Unconfirmed(error.to_string()))
            }
            other => other.map_err(ChannelError::from),
        };
        self.telemetry.sending(finished)
    }
}

/// The callback a reply answers and the connection it came on, from the metadata the
/// inbound side left.
fn reply_of<'t>(to: &'t SendTarget<'_>) -> Option<(&'t str, ConnId)> {
    let req_id = to.metadata.get("req_id")?.as_str()?;
    let conn = to.metadata.get(CONNECTION)?.as_u64()?;
    (!req_id.is_empty()).then_some((req_id, conn))
}

/// `text` (WeCom markdown, split on its visible text) as contents WeCom takes, each at
/// most [`MAX_STREAM_BYTES`] written: one, unless what the renderer does not count (link
/// addresses, markers) grew it past that; then it is cut again on what is written.
fn contents(text: &str) -> Vec<String> {
    let max = usize::try_from(MAX_STREAM_BYTES).unwrap_or(usize::MAX);
    if text.len() <= max {
        return vec![text.to_owned()];
    }
    split::split(text, LengthUnit::Bytes, max)
}

/// A new stream's id.
fn stream_id() -> String {
    format!("stream{:016x}", rand::random::<u64>())
}

/// A message of a final is sent once per send key (`WeComChannel::send_message`): one
/// that landed before (the final delivered again after a later message of it failed) is
/// not sent again.
impl SendParts for WeComChannel {
    async fn send_part(&self, to: &SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.sent
            .once(to.hints, || self.send_message(to, text))
            .await
    }
}

#[async_trait]
impl Channel for WeComChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    /// Holds the long connection until `shutdown`. When another connection takes the bot
    /// over (`disconnected_event`), taking it back at once would start an endless mutual
    /// kick (observed), so the channel stays off WeCom for `REPLACED_HOLD` (ten minutes) first: in a
    /// rolling deploy the old replica is gone by then, and after a `doctor` run (whose
    /// subscribe replaces the running connection) the daemon comes back by itself.
    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let settings = WsSettings {
            ws_url: self.settings.ws_url.clone(),
            bot_id: self.settings.bot_id.clone(),
            secret: self.settings.bot_secret.clone(),
            timers: Timers::default(),
        };
        let mut admit = Admit {
            channel: self,
            sink: &sink,
        };
        loop {
            let reconnect = self.telemetry.reconnect(ws::RECONNECT_BACKOFF);
            let result = ws::run(&settings, &self.link, &mut admit, reconnect, &shutdown).await;
            self.telemetry.set_connected(false);
            match result {
                Ok(Exit::Shutdown) => return Ok(ChannelExit::Stopped),
                Ok(Exit::Replaced) => {
                    self.telemetry.error(Stage::Receiving);
                    tracing::error!(
                        channel = NAME,
                        hold_s = REPLACED_HOLD.as_secs(),
                        "Another connection took this WeCom bot over (another replica or deployment, or a doctor run); staying off WeCom for a while instead of taking it back."
                    );
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
                        () = tokio::time::sleep(REPLACED_HOLD) => {}
                    }
                }
                Err(ws::WsError::Refused(error)) => {
                    self.telemetry.error(Stage::Receiving);
                    return Err(ChannelError::from(error));
                }
            }
        }
    }

    /// The text as one message, or (grown past WeCom's limit by its markup) several: the
    /// first is the reply, the rest follow it, each under its cut's hints and sent once.
    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.send_parts(&to, contents(text)).await
    }

    /// Starts a stream answering the source message's callback, unless its stream expired
    /// (then the engine goes on with messages of the bot's own).
    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let Some((req_id, conn)) = reply_of(&to).filter(|(r, _)| !self.stream_expired(r)) else {
            return Err(ChannelError::NotEditable);
        };
        let id = stream_id();
        let started = self.link.stream(req_id, conn, &id, text, false).await;
        self.note_expiry(req_id, &started);
        self.sent(started)?;
        Ok(SentMessage {
            id: MessageId::new(id),
        })
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let streamed = self.stream(&to, id, text, false).await?;
        self.sent(streamed)
    }

    /// The stream shows the final's first part; what WeCom's limit left follows it as
    /// messages of their own. The finishing frame goes once per send key too: a finished
    /// stream takes no frame, so finishing it again would fail and the final would go out
    /// anew, its first part twice. A failure after the stream was finished is
    /// `FinishedThen`, so the final is not sent again as a new message either; nor is a
    /// finish that went unanswered (`Unconfirmed`, see `WeComChannel::finish`).
    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let mut contents = contents(text).into_iter();
        let first = contents.next().unwrap_or_default();
        let finish = || async {
            self.finish(&to, id, &first).await?;
            Ok(SentMessage { id: id.clone() })
        };
        self.sent.once(to.hints, finish).await?;
        self.send_cuts(&to, contents)
            .await
            .map_err(ChannelError::after_finishing)
    }

    /// Uploads the file over the socket and sends it as a reply (or a message of its own).
    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let bytes = im_bridge_channel::read_staged(&file.path, MAX_FILE_BYTES).await?;
        let size = bytes.len() as u64;
        let kind = if file.is_image_of(IMAGE_TYPES) && size <= MAX_IMAGE_BYTES {
            MediaKind::Image
        } else {
            MediaKind::File
        };
        let uploaded = self.link.upload(kind, &file.filename, &bytes).await;
        let media_id = self.sent(uploaded)?;
        if let Some((req_id, conn)) = reply_of(&to) {
            match self
                .link
                .send_media(To::Reply { req_id, conn }, kind, &media_id)
                .await
            {
                Err(ApiError::ReplyGone { .. }) => {}
                other => return self.sent(other),
            }
        }
        let chat = To::Chat(to.chat_id.as_str());
        self.sent(self.link.send_media(chat, kind, &media_id).await)
    }

    /// Downloads a file a user sent (only from `file_hosts`, bounded) and decrypts it.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        self.fetch_labeled(file, max_bytes)
            .await
            .map(|(bytes, _)| bytes)
    }

    /// The same, with the name and type WeCom gives a file only in its download's
    /// `Content-Disposition` and `Content-Type` (a callback's `file` carries neither): a
    /// user's `report.pdf` reaches the agent as `report.pdf`, not `attachment-1.bin`.
    async fn fetch_labeled(
        &self,
        file: &InboundFile,
        max_bytes: u64,
    ) -> ChannelResult<(Bytes, FileLabel)> {
        let read = |handle| self.fetch(handle, max_bytes);
        fetch_handle_labeled(&self.telemetry, file, max_bytes, read).await
    }
}

impl WeComChannel {
    /// A file's bytes (decrypted) and what its download's headers named of it.
    async fn fetch(&self, handle: &str, max_bytes: u64) -> ChannelResult<(Bytes, FileLabel)> {
        let Some((key, url)) = parse_handle(handle) else {
            return Err(ChannelError::Rejected {
                reason: "not a WeCom media handle".into(),
            });
        };
        let bound = max_bytes.saturating_add(PADDING);
        let (data, label) =
            http::download_labeled(&self.files, &self.settings.file_hosts, url, bound)
                .await
                .map_err(ChannelError::from)?;
        if key.is_empty() {
            return if data.len() as u64 > max_bytes {
                Err(ChannelError::TooLarge { limit: max_bytes })
            } else {
                Ok((data, label))
            };
        }
        let plain = decrypt(&data, key).map_err(|e| ChannelError::Rejected {
            reason: e.to_string(),
        })?;
        if plain.len() as u64 > max_bytes {
            return Err(ChannelError::TooLarge { limit: max_bytes });
        }
        // The file host serves the ciphertext: its type says nothing of the file.
        let label = FileLabel {
            mime_type: None,
            ..label
        };
        Ok((Bytes::from(plain), label))
    }
}

/// Admits each message callback.
struct Admit<'a> {
    channel: &'a WeComChannel,
    sink: &'a InboundSink,
}

impl EventHandler for Admit<'_> {
    fn subscribed(&mut self) {
        self.channel.telemetry.set_connected(true);
    }

    fn message(&mut self, frame: &Frame, conn: ConnId) {
        let channel = self.channel;
        channel.telemetry.received(1);
        let ctx = InboundContext {
            allowed_users: &channel.allowed_users,
            commands: &channel.commands,
        };
        let mut msg = match normalize_frame(frame, &ctx) {
            Ok(msg) => msg,
            Err(Skip::Malformed) => {
                channel.telemetry.error(Stage::Processing);
                tracing::warn!(
                    channel = NAME,
                    "Skipped a WeCom message callback that could not be read."
                );
                return;
            }
            Err(skip) => {
                skip.log(NAME);
                return;
            }
        };
        msg.metadata
            .insert(CONNECTION.to_owned(), Value::from(conn));
        match self.sink.offer(msg) {
            // Refused as too busy, the sender is told so.
            Ok(()) | Err(AdmitError::QueueFull) => {}
            Err(error) => {
                tracing::warn!(channel = NAME, %error, "A WeCom message was not admitted.");
            }
        }
    }

    fn dropped(&mut self, _: Dropped) {
        self.channel.telemetry.error(Stage::Processing);
    }

    fn disconnected(&mut self, lost: bool) {
        self.channel.telemetry.set_connected(false);
        if lost {
            self.channel.telemetry.error(Stage::Receiving);
        }
    }
}

#[cfg(test)]
mod tests;
