//! The Feishu channel: the long connection in, interactive cards out.
//!
//! - **In**: each complete data frame is an event; an `im.message.receive_v1` is normalized
//!   and offered to the daemon's queue *before* its ack goes back (Feishu re-pushes what it
//!   does not see acknowledged within 3 s), and the source message gets the `OK` reaction.
//!   An event the daemon cannot take now (shutting down, overloaded) is acked 500, so
//!   Feishu delivers it again, possibly to another replica. A file of a burst (child
//!   `burst`) is acked when its burst is admitted, 0.75 s after the burst's first file.
//! - **Out**: a reply is an interactive card (`update_multi: true`) replying to the user's
//!   message; a streamed reply patches that card in place (paced by the channel's budget,
//!   within Feishu's 5 QPS per message); the final is the last patch, and then the source
//!   message gets the `DONE` reaction. Files go up as images (≤ 10 MB) or files (≤ 30 MB)
//!   and are sent as image or file messages replying to the answer.
//! - **Or in by webhook** (`mode: webhook`, child `hook`): the same admission behind the
//!   event webhook's signature, decryption and token checks.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use im_bridge_channel::{
    AdmitError, AllowedUsers, BuildContext, Capabilities, Channel, ChannelError, ChannelExit,
    ChannelIdentity, ChannelResult, ChatBudget, ChatKind, CommandVocabulary, InboundFile,
    InboundMessage, InboundSink, LengthUnit, MessageId, OutboundFile, RateBudget, SendParts,
    SendTarget, SentMessage, Stage, Telemetry, UpdateMode, WebhookLimits, WebhookRoute, Writes,
    fetch_handle, transport_ended,
};
use im_bridge_channel::{http, reconnect};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod burst;
mod hook;

use crate::NAME;
use crate::api::{
    Api, IMAGE_TYPES, MAX_CARD_BYTES, MAX_FILE_BYTES, MAX_IMAGE_BYTES, MediaKind, card,
};
use crate::config::{FeishuSettings, Transport};
use crate::inbound::{InboundContext, TOPIC_THREAD_KEY, normalize, parse_handle};
use crate::markup::FeishuCard;
use crate::model::Envelope;
use crate::transport::ws::{self, EventHandler, Verdict, WsSettings};

/// The longest text one card carries, in UTF-8 bytes as the renderer counts them (`<` and
/// `>` as the five-byte entities they become): the card limit is 30 KB of JSON, and JSON
/// escaping can double a text (every newline or quote), so a card's text stays under half.
/// What the renderer cannot see (link addresses) is caught by a second cut at the card
/// limit itself.
pub const MAX_CARD_TEXT_BYTES: usize = 14 * 1024;
/// Sources whose `DONE` reaction was added, remembered so a split answer adds it once.
const MAX_DONE_REMEMBERED: usize = 1024;
/// Quotes remembered for the answers of messages sent inside threads.
const MAX_QUOTES: usize = 1024;
/// Room a card keeps for its quote note.
const QUOTE_ROOM: usize = 1024;

/// What Feishu can show: one card patched in place while a reply streams, in the card's
/// markdown; a short burst of writes per chat, then 5 per second (Feishu's per-chat and
/// per-message QPS); the "working on it" placeholder as the first card. Not
/// `serialize_conversations`: a conversation's runs keep their order on every channel
/// (DeerFlow's Feishu policy, queue rather than busy, is `busy_policy: queue`), and, as in
/// DeerFlow's own bridge, the commands that start no run answer at once.
pub const CAPABILITIES: Capabilities = Capabilities {
    updates: UpdateMode::Card,
    length_unit: LengthUnit::Bytes,
    max_message_len: MAX_CARD_TEXT_BYTES,
    min_edit_interval_private: Duration::from_secs(1),
    min_edit_interval_group: Duration::from_secs(1),
    chat_budget: Some(
        ChatBudget::new(Writes::MESSAGES_EDITS_FILES, 5, Duration::from_millis(200))
            .holding_first_partial(Duration::from_millis(300)),
    ),
    rate_budgets: &RATE_BUDGETS,
    reply_window: None,
    serialize_conversations: false,
    working_placeholder: true,
    typing_refresh: None,
    files_expire_after: None,
    markup: &FeishuCard,
    max_upload_bytes: MAX_FILE_BYTES,
    turn_ends: false,
    // Every message already gets the `OK` reaction when it arrives.
    reactions: false,
    // A card is patched whole; a finish also marks the user's message answered.
    finish_closes_stream: false,
};

/// The app as a whole, per API: sending a message (`POST /im/v1/messages`, replies too)
/// and patching a card (`PATCH /im/v1/messages/:message_id`) each allow "1000 次/分钟、50
/// 次/秒" per app (<https://open.feishu.cn/document/server-docs/im-v1/message/create>,
/// <https://open.feishu.cn/document/server-docs/im-v1/message/patch>; whichever bound is
/// met first refuses, <https://open.feishu.cn/document/server-docs/api-call-guide/frequency-control>).
/// A burst of 40 then 16/s keeps within both: at most 40 in any second, 1000 in any minute.
/// Sending a file is an upload (its own API) and a message: it counts as a message.
pub const RATE_BUDGETS: [RateBudget; 2] = [
    RateBudget::per_second("messages", Writes::MESSAGES_FILES, 40, 16),
    RateBudget::per_second("card_updates", Writes::EDITS, 40, 16),
];

/// The Feishu / Lark channel.
pub struct FeishuChannel {
    identity: ChannelIdentity,
    settings: FeishuSettings,
    http: reqwest::Client,
    /// What admits events, shared with the webhook handler.
    intake: Arc<Intake>,
    /// The webhook route on the daemon's shared host (webhook mode only).
    route: Option<WebhookRoute>,
    done: Mutex<Done>,
}

/// What turns an event into an admitted message: shared by the long connection and the
/// webhook handler (which the host keeps as long as a request runs).
struct Intake {
    api: Api,
    allowed_users: AllowedUsers,
    commands: CommandVocabulary,
    telemetry: Telemetry,
    /// Reactions in flight (never waited for by a message).
    reactions: TaskTracker,
    /// What the answers to messages sent inside a thread quote of them.
    quotes: Mutex<Quotes>,
    /// Lone file messages waiting for the rest of their burst.
    bursts: Mutex<burst::Bursts>,
    /// The bot's `open_id`, learnt before the channel serves: what a group message
    /// mentions when it is for the bot.
    bot_open_id: std::sync::OnceLock<String>,
}

/// Quotes by source message id, the oldest forgotten first past [`MAX_QUOTES`].
#[derive(Default)]
struct Quotes {
    by_source: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Quotes {
    fn insert(&mut self, source: String, quote: String) {
        if self.by_source.insert(source.clone(), quote).is_none() {
            self.order.push_back(source);
            if self.order.len() > MAX_QUOTES
                && let Some(old) = self.order.pop_front()
            {
                self.by_source.remove(&old);
            }
        }
    }
}

/// What became of an offered event: answered with its ack (or the webhook's status).
enum Offered {
    /// Admitted, skipped, or refused as too busy with the sender told: not to redeliver.
    Done,
    /// Not admitted now (shutting down, overloaded): Feishu should deliver it again.
    Again,
    /// Held with its file burst: `true` once the burst was admitted (as [`Offered::Done`]),
    /// `false` (or the sender dropped) when it was not (as [`Offered::Again`]).
    Later(tokio::sync::oneshot::Receiver<bool>),
}

#[derive(Default)]
struct Done {
    set: HashSet<String>,
    order: VecDeque<String>,
}

/// The settings only (every secret in them is a `Secret`): the rest holds quotes of what
/// users wrote, which no log may show.
impl std::fmt::Debug for FeishuChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeishuChannel")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl FeishuChannel {
    /// A channel with `settings`, the daemon's commands and who may talk to it.
    pub fn new(settings: FeishuSettings, ctx: &BuildContext) -> ChannelResult<Self> {
        let api = Api::from_settings(&settings).map_err(ChannelError::from)?;
        let http = http::client().map_err(ChannelError::from)?;
        let telemetry = Telemetry::new(NAME);
        let route = match &settings.transport {
            Transport::Webhook(hook) => Some(
                ctx.webhooks
                    .route(
                        &telemetry,
                        hook.place.listen,
                        &hook.place.path,
                        WebhookLimits::default(),
                    )
                    .map_err(|e| ChannelError::Transport(e.to_string()))?,
            ),
            Transport::Websocket => None,
        };
        Ok(Self {
            // Feishu gives each event to one connected client: every replica connects.
            identity: ChannelIdentity::new(&telemetry, CAPABILITIES),
            settings,
            http,
            intake: Arc::new(Intake {
                api,
                allowed_users: ctx.allowed_users.clone(),
                commands: ctx.commands.clone(),
                telemetry,
                reactions: TaskTracker::new(),
                quotes: Mutex::new(Quotes::default()),
                bursts: Mutex::new(burst::Bursts::new()),
                bot_open_id: std::sync::OnceLock::new(),
            }),
            route,
            done: Mutex::new(Done::default()),
        })
    }

    fn api(&self) -> &Api {
        &self.intake.api
    }

    fn telemetry(&self) -> &Telemetry {
        &self.intake.telemetry
    }

    /// The `DONE` reaction on the source of a final, once per source.
    fn done(&self, to: &SendTarget<'_>) {
        let Some(source) = to.reply_to else {
            return;
        };
        let first = {
            let mut done = lock(&self.done);
            let first = done.set.insert(source.to_string());
            if first {
                done.order.push_back(source.to_string());
                if done.order.len() > MAX_DONE_REMEMBERED
                    && let Some(old) = done.order.pop_front()
                {
                    done.set.remove(&old);
                }
            }
            first
        };
        if first {
            self.intake.react(source.clone(), "DONE");
        }
    }

    /// Patches card `id` to show `text`; what does not fit the card limit is returned.
    async fn patch(
        &self,
        to: &SendTarget<'_>,
        id: &MessageId,
        text: &str,
    ) -> ChannelResult<Vec<String>> {
        let mut texts = card_texts(text);
        let first = if texts.is_empty() {
            String::new()
        } else {
            texts.remove(0)
        };
        let card = card::quoting(self.intake.quote(to).as_deref(), &first);
        let result = self.api().patch_card(id, &card).await;
        self.telemetry()
            .sending(result.map_err(ChannelError::from))?;
        Ok(texts)
    }
}

/// `text` as the texts of cards within the card limit: itself when it surely fits.
fn card_texts(text: &str) -> Vec<String> {
    // Escaping twice grows a byte to seven at most: short texts need no measuring.
    let max = MAX_CARD_BYTES - QUOTE_ROOM;
    if text.len() * card::MAX_ESCAPE_GROWTH + 512 <= max || card::card_len(text) <= max {
        vec![text.to_owned()]
    } else {
        card::split_for_cards(text, max)
    }
}

/// Cards with a text (already card markdown), replying to the source message (or sent to
/// the chat): one, unless what the renderer cannot see (link addresses, JSON escaping) grew
/// it past the card limit (`card_texts` cuts it again into follow-up cards; the first is
/// the reply). Each card goes under its own `uuid` when the reply has a send key, so a
/// card sent again (a lost answer, a restart) is not shown twice.
impl SendParts for FeishuChannel {
    async fn send_part(&self, to: &SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let card = card::quoting(self.intake.quote(to).as_deref(), text);
        let uuid = to
            .hints
            .send_key_hash()
            .map(|hash| format!("imb-{hash:016x}"));
        let uuid = uuid.as_deref();
        let sent = match to.reply_to {
            Some(source) => self.api().reply_card(source, &card, uuid).await,
            None => self.api().send_card(to.chat_id, &card, uuid).await,
        };
        let id = self.telemetry().sending(sent.map_err(ChannelError::from))?;
        Ok(SentMessage { id })
    }
}

#[async_trait]
impl Channel for FeishuChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        if !self.intake.learn_bot(&shutdown).await? {
            return Ok(ChannelExit::Stopped);
        }
        match &self.settings.transport {
            Transport::Websocket => {
                let settings = WsSettings {
                    domain: self.settings.domain.clone(),
                    app_id: self.settings.app_id.clone(),
                    app_secret: self.settings.app_secret.clone(),
                };
                let mut admit = Admit {
                    intake: &self.intake,
                    sink: &sink,
                };
                self.telemetry().set_connected(true);
                let reconnect = self.telemetry().reconnect(reconnect::BACKOFF);
                let result = ws::run(&settings, &self.http, &mut admit, reconnect, &shutdown).await;
                transport_ended(self.telemetry(), result)
            }
            Transport::Webhook(settings) => {
                let route = WebhookRoute::required(self.route.as_ref())?;
                Ok(hook::run(self.intake.clone(), settings, route, sink, &shutdown).await)
            }
        }
    }

    /// A topic thread reads apart from the rest of its chat.
    fn thread_of<'a>(&self, to: SendTarget<'a>) -> Option<Cow<'a, str>> {
        let thread = to.metadata.get(TOPIC_THREAD_KEY)?.as_str()?;
        Some(Cow::Borrowed(thread))
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let sent = self.send_parts(&to, card_texts(text)).await?;
        self.done(&to);
        Ok(sent)
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.send_parts(&to, card_texts(text)).await
    }

    /// A preview: what does not fit one card waits for the final.
    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.patch(&to, id, text).await.map(drop)
    }

    /// The card shows the final's first part; what the card limit left is sent after it,
    /// each under its send key. A failure after the patch is `FinishedThen`: the final is
    /// delivered again as it was (the same patch, the cards already sent shown once by
    /// their `uuid`), never as a new card repeating the first part.
    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let rest = self.patch(&to, id, text).await?;
        self.send_cuts(&to, rest)
            .await
            .map_err(ChannelError::after_finishing)?;
        self.done(&to);
        Ok(())
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let bytes = Bytes::from(im_bridge_channel::read_staged(&file.path, MAX_FILE_BYTES).await?);
        let size = bytes.len() as u64;
        let as_image = file.is_image_of(IMAGE_TYPES) && size <= MAX_IMAGE_BYTES;
        let result = async {
            let (kind, content) = if as_image {
                let key = self.api().upload_image(bytes).await?;
                (MediaKind::Image, serde_json::json!({ "image_key": key }))
            } else {
                let key = self.api().upload_file(&file.filename, bytes).await?;
                (MediaKind::File, serde_json::json!({ "file_key": key }))
            };
            match to.reply_to {
                Some(source) => self.api().reply_file(source, kind, &content).await,
                None => {
                    self.api()
                        .send_file_message(to.chat_id, kind, &content)
                        .await
                }
            }
        }
        .await;
        self.telemetry()
            .sending(result.map(drop).map_err(ChannelError::from))
    }

    /// Downloads an image or file a user sent (`…/messages/{id}/resources/{key}`).
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let download = |handle| self.download(handle, max_bytes);
        fetch_handle(self.telemetry(), file, max_bytes, download).await
    }
}

impl FeishuChannel {
    /// The resource a handle (`inbound::parse_handle`) names, at most `max_bytes` of it.
    async fn download(&self, handle: &str, max_bytes: u64) -> ChannelResult<Bytes> {
        let Some((kind, message, key)) = parse_handle(handle) else {
            return Err(ChannelError::Rejected {
                reason: "not a Feishu resource handle".into(),
            });
        };
        let kind = if kind == "image" {
            MediaKind::Image
        } else {
            MediaKind::File
        };
        let message = MessageId::new(message);
        let (bytes, _) = self
            .api()
            .download_resource(&message, key, kind, max_bytes)
            .await?;
        Ok(bytes)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Admits each long-connection event; what it answers is the frame's ack.
struct Admit<'a> {
    intake: &'a Arc<Intake>,
    sink: &'a InboundSink,
}

impl EventHandler for Admit<'_> {
    fn handle(&mut self, kind: &str, payload: Bytes) -> Verdict {
        if kind != "event" {
            // Card callbacks: nothing to do, and nothing to redeliver.
            return Verdict::Now(true);
        }
        self.intake.telemetry.received(1);
        match serde_json::from_slice(&payload) {
            Ok(envelope) => match self.intake.offer(self.sink, &envelope) {
                Offered::Done => Verdict::Now(true),
                Offered::Again => Verdict::Now(false),
                Offered::Later(settled) => Verdict::Later(settled),
            },
            Err(error) => {
                self.intake.unreadable(&error);
                Verdict::Now(true)
            }
        }
    }
}

impl Intake {
    /// Normalizes an event and offers it to the daemon's queue (a lone file message after
    /// the rest of its burst); an admitted message's source gets the `OK` reaction.
    fn offer(self: &Arc<Self>, sink: &InboundSink, envelope: &Envelope) -> Offered {
        let ctx = InboundContext {
            allowed_users: &self.allowed_users,
            commands: &self.commands,
            bot_open_id: self.bot_open_id.get().map(String::as_str),
        };
        let msg = match normalize(envelope, &ctx) {
            Ok(msg) => msg,
            Err(skip) => {
                skip.log(NAME);
                return Offered::Done;
            }
        };
        let source = msg.thread_ts.clone();
        // Inside a thread of a group, the answer quotes what it answers (spec §4.2).
        let in_thread = msg.chat_kind == ChatKind::Group
            && msg.topic_id.as_deref() != source.as_ref().map(MessageId::as_str);
        if in_thread && let (Some(source), Some(quote)) = (&source, card::quote(&msg.text)) {
            lock(&self.quotes).insert(source.to_string(), quote);
        }
        if burst::is_lone_file(&msg) {
            if let Some(source) = source {
                self.react(source, "OK");
            }
            return self.hold(sink, msg);
        }
        let offered = self.admit(sink, msg);
        if let (Offered::Done, Some(source)) = (&offered, source) {
            self.react(source, "OK");
        }
        offered
    }

    /// Asks Feishu for the bot's `open_id` (`GET /open-apis/bot/v3/info`), unless known,
    /// until it answers, tried again after a failure with the reconnect backoff. Events
    /// are not taken meanwhile (the webhook host answers 503, so Feishu delivers them
    /// later). `false` when `shutdown` came first; a refusal (not network or server
    /// trouble: the app's bot capability off, say) ends the run with its error, for the
    /// supervisor and `/health` to show.
    async fn learn_bot(&self, shutdown: &CancellationToken) -> ChannelResult<bool> {
        let mut backoff = reconnect::BACKOFF;
        while self.bot_open_id.get().is_none() {
            let error = match self.api.bot_open_id().await {
                Ok(open_id) => {
                    tracing::info!(channel = NAME, bot_open_id = %open_id, "Feishu bot identified.");
                    let _ = self.bot_open_id.set(open_id);
                    break;
                }
                Err(error) => ChannelError::from(error),
            };
            self.telemetry.error(Stage::Receiving);
            if !error.is_transient() {
                tracing::error!(channel = NAME, %error, "Feishu refused to say who the bot is; the channel cannot tell which group messages are for it.");
                return Err(error);
            }
            let wait = backoff.next_wait();
            let failures = backoff.failures();
            tracing::warn!(channel = NAME, %error, failures, ?wait, "Could not learn the Feishu bot's open_id; trying again.");
            tokio::select! {
                () = shutdown.cancelled() => return Ok(false),
                () = tokio::time::sleep(wait) => {}
            }
        }
        Ok(true)
    }

    /// Offers a normalized message to the daemon's queue.
    fn admit(&self, sink: &InboundSink, msg: InboundMessage) -> Offered {
        match sink.offer(msg) {
            // Refused as too busy, the sender is told so: nothing to redeliver either.
            Ok(()) | Err(AdmitError::QueueFull) => Offered::Done,
            Err(error) => {
                tracing::warn!(channel = NAME, %error, "A Feishu event was not admitted; Feishu will deliver it again.");
                Offered::Again
            }
        }
    }

    /// An event whose JSON is not an event envelope: counted, logged, not redelivered
    /// (another try cannot read better).
    fn unreadable(&self, error: &serde_json::Error) {
        self.telemetry.error(Stage::Processing);
        tracing::warn!(channel = NAME, error = ?error.classify(), "Skipped a Feishu event that could not be read.");
    }

    /// What an answer to `to`'s source quotes, if that source was sent inside a thread.
    fn quote(&self, to: &SendTarget<'_>) -> Option<String> {
        let source = to.reply_to?;
        lock(&self.quotes).by_source.get(source.as_str()).cloned()
    }

    /// Adds `emoji` to `message` in the background (a hint: a failure is logged).
    fn react(&self, message: MessageId, emoji: &'static str) {
        let api = self.api.clone();
        self.reactions.spawn(async move {
            if let Err(error) = api.add_reaction(&message, emoji).await {
                tracing::debug!(channel = NAME, %error, emoji, "Adding a reaction failed.");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_heavy_cards_are_cut_again_within_the_card_limit() {
        // 200 links of 330 bytes: little visible text, over 60 KB of card markdown.
        let link = format!("[doc](https://example.com/{})\n", "a".repeat(300));
        let text = link.repeat(200);
        let texts = card_texts(&text);
        assert!(texts.len() > 1, "{}", texts.len());
        assert!(texts.iter().all(|t| card::card_len(t) <= MAX_CARD_BYTES));
        assert_eq!(texts.concat(), text);
        assert_eq!(card_texts("short"), ["short"]);
    }
}
