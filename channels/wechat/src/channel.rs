//! The WeChat channel: iLink's long poll in, final answers out.
//!
//! - **In**: the poll (`transport`) admits each user's message with its context token in
//!   the metadata; redeliveries carry the same `message_id` and are dropped by the daemon's
//!   dedupe.
//! - **Out**: WeChat shows no edits, so the channel shows finals only, in plain text
//!   ([`PlainText`]: the agent's Markdown as readable text), split under
//!   [`MAX_TEXT_BYTES`] UTF-8 bytes. Every send carries the context token of the message
//!   it answers (a send without one uses the user's newest). iLink takes at most
//!   [`REPLIES_PER_MESSAGE`] sends per context token and delivers sends within a day of the
//!   user's message: declared as the [`ReplyWindow`], so the delivery engine counts every
//!   send and ends an answer that needs more with the localized "cut short" line.
//! - **Typing**: `getconfig` gives a user's typing ticket (kept per user); `sendtyping`
//!   status 1 at admission and every [`TYPING_REFRESH`] until the first reply, status 2
//!   when the bridge is done with the message ([`Channel::turn_ended`]).
//! - **Files**: presented pictures and files are encrypted (AES-128-ECB), uploaded through
//!   `getuploadurl` and the CDN, and sent one item per message; files users send are
//!   downloaded from the CDN (`file_hosts` only, bounded) and decrypted.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use hashlink::LruCache;
use im_bridge_channel::render::PlainText;
use im_bridge_channel::{
    BuildContext, Capabilities, Channel, ChannelError, ChannelExit, ChannelIdentity, ChannelResult,
    FileKind, InboundFile, InboundSink, LateReplies, LengthUnit, MessageId, OutboundFile,
    ReplyWindow, SendTarget, SentMessage, Telemetry, fetch_handle, http,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::api::{Api, cdn};
use crate::config::WechatSettings;
use crate::error::ApiError;
use crate::inbound::{CONTEXT_TOKEN, parse_handle};
use crate::model::{self, Item, MediaItem, OutMessage, TextItem, item, media_type};
use crate::transport::{Intake, poll};

/// iLink's limit on a text item: 16,384 UTF-8 bytes (observed: a longer one is `ret -2`).
pub const ILINK_TEXT_BYTES: usize = 16_384;
/// Where answers are split: under [`ILINK_TEXT_BYTES`], with room to spare.
pub const MAX_TEXT_BYTES: usize = 16_000;
/// Sends iLink takes per context token (observed: the eleventh is `ret -2`).
pub const REPLIES_PER_MESSAGE: u32 = 10;
/// How long after a user's message what the bot sends still reaches them (observed: later
/// sends are answered success and dropped).
pub const DELIVERY_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// How often the typing hint is sent again (the plugin's keepalive: 5 s).
pub const TYPING_REFRESH: Duration = Duration::from_secs(5);
/// Users whose typing ticket is kept; past it the least recently used is forgotten.
pub const MAX_TICKETS: usize = 4096;
/// After `getconfig` gave a user no ticket (or failed), typing is not asked for that user
/// again for this long, doubled each time up to [`NO_TICKET_MAX_WAIT`] (the plugin's
/// config cache backs off so, up to an hour), instead of once every [`TYPING_REFRESH`].
const NO_TICKET_WAIT: Duration = Duration::from_secs(60);
/// The longest pause before asking `getconfig` again for a user without a ticket.
const NO_TICKET_MAX_WAIT: Duration = Duration::from_secs(3600);
/// The most bytes a file's padding adds.
const PADDING: u64 = 16;

/// The WeChat channel. `Debug` shows no secret.
#[derive(Debug)]
pub struct WechatChannel {
    identity: ChannelIdentity,
    intake: Arc<Intake>,
    /// Each user's typing ticket (or why there is none), at most [`MAX_TICKETS`].
    tickets: Mutex<Tickets>,
}

/// What `getconfig` last said of a user's typing ticket.
#[derive(Clone, Debug)]
enum Ticket {
    /// The ticket typing is sent with.
    Kept(String),
    /// None came: not asked again before `until`; the next pause is `next`.
    Absent {
        until: tokio::time::Instant,
        next: Duration,
    },
}

/// The users' typing tickets, the least recently used forgotten first past
/// [`MAX_TICKETS`].
struct Tickets(LruCache<String, Ticket>);

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tickets")
            .field("users", &self.0.len())
            .finish()
    }
}

/// What WeChat can show: finals only, plain text of at most [`MAX_TEXT_BYTES`], ten sends a
/// message within a day, typing kept up, files out.
pub fn capabilities(settings: &WechatSettings) -> Capabilities {
    Capabilities {
        length_unit: LengthUnit::Bytes,
        reply_window: Some(ReplyWindow {
            group: DELIVERY_WINDOW,
            private: DELIVERY_WINDOW,
            max_replies_per_source: REPLIES_PER_MESSAGE,
            // A reply needs a context token, and only the user's next message brings a
            // fresh one: iLink has no proactive message.
            late: LateReplies::NextMessage,
            // iLink reads no send key: every send counts.
            repeats_shown_once: false,
        }),
        typing_refresh: Some(TYPING_REFRESH),
        turn_ends: true,
        markup: &PlainText,
        max_upload_bytes: settings
            .max_outbound_image_bytes
            .max(settings.max_outbound_file_bytes),
        ..Capabilities::final_only(MAX_TEXT_BYTES)
    }
}

impl WechatChannel {
    /// A channel with `settings`, the daemon's commands, who may talk to it and its state.
    pub fn new(settings: WechatSettings, ctx: &BuildContext) -> ChannelResult<Self> {
        // iLink hands each message to one poller: with a shared store only the lease
        // holder polls.
        let telemetry = Telemetry::new(NAME);
        let identity = ChannelIdentity::new(&telemetry, capabilities(&settings)).exclusive(true);
        let api = Api::new(Arc::new(settings)).map_err(ChannelError::from)?;
        let intake = Intake::new(
            api,
            telemetry,
            ctx.state.clone(),
            ctx.allowed_users.clone(),
            ctx.commands.clone(),
        );
        Ok(Self {
            identity,
            intake: Arc::new(intake),
            tickets: Mutex::new(Tickets(LruCache::new(MAX_TICKETS))),
        })
    }

    fn api(&self) -> &Api {
        &self.intake.api
    }

    /// Records a send's outcome.
    fn sent<T>(&self, result: Result<T, ApiError>) -> ChannelResult<T> {
        self.intake
            .telemetry
            .sending(result.map_err(ChannelError::from))
    }

    /// The context token a send to `to` carries: its message's, else the user's newest.
    fn context_token(&self, to: &SendTarget<'_>) -> Result<String, ApiError> {
        to.metadata
            .get(CONTEXT_TOKEN)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .or_else(|| self.intake.contexts.get(to.chat_id.as_str()))
            .ok_or(ApiError::NoContext)
    }

    /// Sends one item to `to`; its client id (`keyed`: named by the reply's send key) is
    /// the sent message's id.
    async fn send_item(
        &self,
        to: &SendTarget<'_>,
        item: Item,
        keyed: bool,
    ) -> Result<SentMessage, ApiError> {
        let context_token = self.context_token(to)?;
        let key = to.hints.send_key_hash().filter(|_| keyed);
        let client_id = client_id(key);
        let mut wait = THROTTLE_FIRST_WAIT;
        let msg = OutMessage {
            from_user_id: String::new(),
            to_user_id: to.chat_id.as_str().to_owned(),
            client_id: client_id.clone(),
            message_type: model::BOT_FINISHED,
            message_state: model::BOT_FINISHED,
            context_token,
            item_list: vec![item],
        };
        for _ in 1..THROTTLE_TRIES {
            match self.api().send_message(msg.clone()).await {
                // Refused alike for every cause, and the others are ruled out before the
                // send (a context token, the text's size, the sends left): throttled.
                Err(ApiError::Api { ret: REFUSED, .. }) => {
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                sent => return sent.map(|()| sent_as(client_id)),
            }
        }
        match self.api().send_message(msg).await {
            Ok(()) => Ok(sent_as(client_id)),
            Err(ApiError::Api { ret: REFUSED, .. }) => Err(ApiError::SendsSpent),
            Err(error) => Err(error),
        }
    }

    fn ticket(&self, user: &str) -> Option<Ticket> {
        let mut tickets = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        tickets.0.get(user).cloned()
    }

    fn keep_ticket(&self, user: &str, ticket: Option<Ticket>) {
        let mut tickets = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        match ticket {
            Some(ticket) => {
                tickets.0.insert(user.to_owned(), ticket);
            }
            None => {
                tickets.0.remove(user);
            }
        }
    }

    /// Sends `status` to `user`'s chat, asking for a ticket first when none is kept.
    async fn typing(&self, to: &SendTarget<'_>, status: i64) -> Result<(), ApiError> {
        let user = to.chat_id.as_str();
        let now = tokio::time::Instant::now();
        let pause = match self.ticket(user) {
            Some(Ticket::Kept(ticket)) => Ok(ticket),
            Some(Ticket::Absent { until, .. }) if now < until => return Ok(()),
            Some(Ticket::Absent { next, .. }) => Err(next),
            None => Err(NO_TICKET_WAIT),
        };
        let ticket = match pause {
            Ok(ticket) => ticket,
            Err(_) if status == model::TYPING_DONE => return Ok(()),
            Err(pause) => {
                let context = self.context_token(to).ok();
                let asked = self.api().typing_ticket(user, context.as_deref()).await;
                let Ok(Some(ticket)) = asked else {
                    // No ticket for this user now: not asked again for a while.
                    let next = (pause * 2).min(NO_TICKET_MAX_WAIT);
                    let until = now + pause;
                    self.keep_ticket(user, Some(Ticket::Absent { until, next }));
                    return asked.map(drop);
                };
                self.keep_ticket(user, Some(Ticket::Kept(ticket.clone())));
                ticket
            }
        };
        let sent = self.api().send_typing(user, &ticket, status).await;
        if matches!(sent, Err(ApiError::Api { .. })) {
            // A ticket iLink no longer takes: ask for a new one next time.
            self.keep_ticket(user, None);
        }
        sent
    }

    /// The bound on a file a user sent of `kind`, within the daemon's `max_bytes`.
    fn inbound_bound(&self, kind: FileKind, max_bytes: u64) -> u64 {
        let settings = self.api().settings();
        let own = match kind {
            FileKind::Image => settings.max_inbound_image_bytes,
            _ => settings.max_inbound_file_bytes,
        };
        own.min(max_bytes)
    }

    async fn fetch(
        &self,
        file: &InboundFile,
        handle: &str,
        max_bytes: u64,
    ) -> ChannelResult<Bytes> {
        let settings = self.api().settings();
        let (key, param, full_url) = parse_handle(handle)
            .filter(|(key, ..)| key.is_some() || file.kind == FileKind::Image)
            .ok_or(ApiError::BadHandle)?;
        if file.kind == FileKind::File
            && !file
                .filename
                .as_deref()
                .is_some_and(|name| settings.allows_file(name))
        {
            return Err(ChannelError::Rejected {
                reason: "the file's type is not in channels.wechat.allowed_file_extensions".into(),
            });
        }
        let bound = self.inbound_bound(file.kind, max_bytes);
        if file.size.is_some_and(|size| size > bound) {
            return Err(ChannelError::TooLarge { limit: bound });
        }
        let listed = http::file_url(full_url).filter(|url| settings.file_hosts.allows(url));
        let url = match listed {
            Some(url) => url,
            None => self
                .api()
                .cdn_url("download", &[("encrypted_query_param", param)])?,
        };
        let Some(key) = key else {
            // A picture sent unencrypted (no key): its bytes as they are, under the bound.
            return Ok(self.api().download(url.as_str(), bound).await?);
        };
        let sealed = self
            .api()
            .download(url.as_str(), bound.saturating_add(PADDING))
            .await?;
        let plain = cdn::decrypt(&sealed, &key).ok_or(ApiError::Decrypt)?;
        if plain.len() as u64 > bound {
            return Err(ChannelError::TooLarge { limit: bound });
        }
        Ok(Bytes::from(plain))
    }

    async fn upload_and_send(&self, to: &SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let settings = self.api().settings();
        let image = file.is_image;
        let limit = if image {
            settings.max_outbound_image_bytes
        } else {
            settings.max_outbound_file_bytes
        };
        if !image && !settings.allows_file(&file.filename) {
            return Err(ChannelError::Rejected {
                reason: "the file's type is not in channels.wechat.allowed_file_extensions".into(),
            });
        }
        if file.size > limit {
            return Err(ChannelError::TooLarge { limit });
        }
        let bytes = im_bridge_channel::read_staged(&file.path, limit).await?;
        let to_user = to.chat_id.as_str();
        let kind = if image {
            media_type::IMAGE
        } else {
            media_type::FILE
        };
        let (param, key) = self.api().upload(to_user, kind, &bytes).await?;
        let media = model::Media {
            encrypt_query_param: Some(param),
            aes_key: Some(cdn::encode_key(&key)),
            encrypt_type: Some(1),
            ..model::Media::default()
        };
        let item = if image {
            Item {
                kind: item::IMAGE,
                image_item: Some(MediaItem {
                    media: Some(media),
                    mid_size: Some(cdn::padded_size(bytes.len() as u64)),
                    ..MediaItem::default()
                }),
                ..Item::default()
            }
        } else {
            Item {
                kind: item::FILE,
                file_item: Some(MediaItem {
                    media: Some(media),
                    file_name: Some(file.filename.clone()),
                    md5: Some(cdn::md5_hex(&bytes)),
                    len: Some(bytes.len().to_string()),
                    ..MediaItem::default()
                }),
                ..Item::default()
            }
        };
        // Never under the answer's key: the file is a message of its own.
        self.send_item(to, item, false).await?;
        Ok(())
    }
}

#[async_trait]
impl Channel for WechatChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let exit = poll::run(&self.intake, &sink, &shutdown).await;
        self.intake.telemetry.set_connected(false);
        exit
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let item = Item {
            kind: item::TEXT,
            text_item: Some(TextItem {
                text: text.to_owned(),
            }),
            ..Item::default()
        };
        let sent = self.send_item(&to, item, true).await;
        self.sent(sent)
    }

    async fn show_typing(&self, to: SendTarget<'_>) -> ChannelResult {
        self.typing(&to, model::TYPING)
            .await
            .map_err(ChannelError::from)
    }

    /// The bridge is done with the message: the typing hint ends.
    async fn turn_ended(&self, to: SendTarget<'_>) -> ChannelResult {
        self.typing(&to, model::TYPING_DONE)
            .await
            .map_err(ChannelError::from)
    }

    /// Encrypts and uploads the file through the CDN and sends it as one message.
    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let sent = self.upload_and_send(&to, file).await;
        self.intake.telemetry.sending(sent)
    }

    /// Downloads a file a user sent from the CDN (only from `file_hosts`, bounded) and
    /// decrypts it.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let download = |handle| self.fetch(file, handle, max_bytes);
        fetch_handle(&self.intake.telemetry, file, max_bytes, download).await
    }
}

/// How many times a send iLink refuses (`ret -2`, as it throttles) is made before the
/// refusal stands, and the first wait between them (doubled each time).
const THROTTLE_TRIES: u32 = 3;
const THROTTLE_FIRST_WAIT: Duration = Duration::from_secs(1);
/// iLink's `ret` for a refused send.
const REFUSED: i64 = -2;

/// The message sent under `client_id`.
fn sent_as(client_id: String) -> SentMessage {
    SentMessage {
        id: MessageId::new(client_id),
    }
}

/// A sent message's `client_id`: named by `key`, a reply's send key
/// ([`DeliveryHints::send_key_hash`](im_bridge_channel::DeliveryHints::send_key_hash)), so
/// every attempt at a reply names it alike, or random. iLink documents no deduplication by
/// it; should it drop a repeat, a reply sent twice (a retry after a lost answer) shows once.
fn client_id(key: Option<u64>) -> String {
    let id = key.unwrap_or_else(rand::random::<u64>);
    format!("im-bridge-{id:016x}")
}

#[cfg(test)]
mod tests;
