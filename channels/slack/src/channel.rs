//! The Slack channel: Socket Mode or the Events API in, Web API calls out.
//!
//! - **In**: each envelope's event or slash command is normalized ([`crate::inbound`]) and
//!   offered to the daemon's queue; only then is the envelope acknowledged (the HTTP
//!   request answered). The user's message gets the `eyes` reaction once admitted (in the
//!   background: a hint, never awaited by the ack). An event the daemon cannot take now
//!   (shutting down, overloaded) is left unacknowledged (answered 503), so Slack delivers
//!   it again. A redelivery (an unacknowledged envelope, an HTTP retry) carries the same
//!   message, whose redelivery key (workspace, `{channel}:{ts}`; a slash command's
//!   `trigger_id`) the daemon runs once.
//! - **Out**: an answer is posted into the thread of the message it answers (the inbound
//!   metadata's `thread_ts`; with `thread_replies: false`, a top-level message is answered
//!   in the channel) with `chat.postMessage` and, while it streams, edited in place with
//!   `chat.update` (at most one edit a second per message, paced by the delivery engine
//!   from the capabilities), in `mrkdwn` ([`SlackMrkdwn`]), cut at `max_message_bytes`
//!   of visible text; a message its markup writes past 4,000 bytes is cut again into
//!   follow-up messages ([`SendTarget::cuts`]), since Slack refuses a longer edit.
//!   When the bridge is done with a message ([`Channel::turn_ended`], after its last
//!   reply), the user's message gets `white_check_mark` (spec §8.3), or `x` when an answer
//!   of it was refused for good (or its retries after an outage gave up: the daemon tells
//!   the end once they settled). Files go up with the
//!   external upload into the answer's thread; files users share are fetched with the bot
//!   token from `file_hosts` only, a Slack Connect file's URL asked of `files.info` first
//!   (child `files`). A slash command typed where the bot is not a member is
//!   answered through its `response_url` (child `respond`).
//! - **Or in by webhook** (`event_delivery: http`, child `hook`): the same admission behind
//!   the Events API's signature and freshness checks.
//!
//! The bot's user id is `bot_user_id`, else `auth.test`'s (asked before the first
//! connection, or before the webhook serves).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use hashlink::LruCache;
use im_bridge_channel::http::HttpError;
use im_bridge_channel::reconnect;
use im_bridge_channel::{
    AdmitError, AllowedUsers, BuildContext, Capabilities, Channel, ChannelError, ChannelExit,
    ChannelIdentity, ChannelResult, ChatBudget, CommandVocabulary, FileLabel, InboundFile,
    InboundMessage, InboundSink, LengthUnit, MessageId, OutboundFile, RateBudget, SendParts,
    SendTarget, SentMessage, SentOnce, Skip, Stage, Telemetry, UpdateMode, WebhookRoute, Writes,
    fetch_handle_labeled, transport_ended,
};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod files;
mod hook;
mod respond;

use crate::api::SlackApi;
use crate::config::{Delivery, SlackSettings};
use crate::error::ApiError;
use crate::inbound::{InboundContext, normalize_command, normalize_event};
use crate::markup::slack_texts;
use crate::model::{EventBody, EventCallback, SlashCommand, envelope_kind};
use crate::transport::ws::{self, Envelopes, Verdict};
use crate::{NAME, SlackMrkdwn};

/// The largest file sent (read into memory whole before the upload). Slack takes up to
/// 1 GB; the bridge keeps a file's memory bounded.
pub const MAX_UPLOAD_BYTES: u64 = 50 * 1024 * 1024;
/// The reaction on a user's message once the bridge took it.
pub const WORKING_REACTION: &str = "eyes";
/// The reaction on a user's message once the bridge is done with it.
pub const DONE_REACTION: &str = "white_check_mark";
/// What the user's message gets instead when its answer was refused for good (spec
/// §1.7, DeerFlow's failure mark).
pub const FAILED_REACTION: &str = "x";

/// What Slack can show, `max_message_bytes` aside: one message edited in place while an
/// answer streams (one edit a second per message, `chat.update`'s Tier 3 pace), about one
/// new message a second per conversation after a short burst (`chat.postMessage`), the
/// agent's Markdown as `mrkdwn`, files, and the turn's end (for `white_check_mark`).
/// Lengths are bytes of UTF-8, as Slack counts a message's `text`.
pub const CAPABILITIES: Capabilities = Capabilities {
    updates: UpdateMode::EditInPlace,
    min_edit_interval_private: Duration::from_secs(1),
    min_edit_interval_group: Duration::from_secs(1),
    chat_budget: Some(
        ChatBudget::new(Writes::MESSAGES_EDITS_FILES, 5, Duration::from_secs(1))
            .holding_first_partial(Duration::from_secs(1)),
    ),
    rate_budgets: &[UPDATES_BUDGET],
    markup: &SlackMrkdwn,
    max_upload_bytes: MAX_UPLOAD_BYTES,
    turn_ends: true,
    length_unit: LengthUnit::Bytes,
    ..Capabilities::final_only(crate::DEFAULT_MESSAGE_BYTES)
};

/// The workspace as a whole: `chat.update` is a Tier 3 method, "50+ per minute" per method
/// per workspace per app (<https://api.slack.com/apis/rate-limits>, and the method's page).
/// Every streamed edit and finish counts; new messages (`chat.postMessage`, one a second per
/// conversation) are paced by the chat budget.
pub const UPDATES_BUDGET: RateBudget = RateBudget::per_minute("updates", Writes::EDITS, 10, 50);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The Slack channel.
pub struct SlackChannel {
    identity: ChannelIdentity,
    settings: SlackSettings,
    intake: Arc<Intake>,
    /// The Events API route on the daemon's shared host (`event_delivery: http` only).
    route: Option<WebhookRoute>,
}

/// What turns an envelope or a request into an admitted message: shared by Socket Mode and
/// the webhook handler.
struct Intake {
    settings: SlackSettings,
    api: SlackApi,
    allowed_users: AllowedUsers,
    commands: CommandVocabulary,
    telemetry: Telemetry,
    /// The bot's user id (`bot_user_id`, else `auth.test`).
    bot_user_id: Mutex<Option<String>>,
    /// The sink while the channel runs.
    sink: Mutex<Option<InboundSink>>,
    /// Reactions in flight (never awaited by an ack).
    reactions: TaskTracker,
    /// The `eyes` reactions whose turn has not ended yet.
    working: Mutex<Working>,
    /// Recent slash commands' `response_url`s (`respond.rs`).
    responders: respond::Responders,
    /// Each user's latest thread conversation by channel and user: where a native slash
    /// command acts (Slack sends none from a thread).
    latest_threads: Mutex<LruCache<(String, String), String>>,
    /// The messages of finals that landed, by send key: Slack has no send key of its own,
    /// so a final delivered again posts only what is still missing
    /// ([`SendParts::send_part`]; the newest [`im_bridge_channel::SENT_KEYS`]).
    posted: SentOnce,
}

impl std::fmt::Debug for SlackChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackChannel")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What became of an event or command offered to the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Admitted, skipped on purpose, or refused as too busy with the sender told.
    Done,
    /// Not admitted now: Slack should deliver it again.
    Again,
}

impl SlackChannel {
    /// A channel with `settings`, the daemon's commands, who may talk to it, and (with
    /// `event_delivery: http`) its route on the daemon's webhook host.
    pub fn new(settings: SlackSettings, ctx: &BuildContext) -> ChannelResult<Self> {
        let api = SlackApi::new(&settings).map_err(ChannelError::from)?;
        let telemetry = Telemetry::new(NAME);
        let route = match &settings.delivery {
            Delivery::Http { webhook, .. } => Some(ctx.webhooks.route_place(&telemetry, webhook)?),
            Delivery::Socket { .. } => None,
        };
        let capabilities = Capabilities {
            max_message_len: settings.max_message_bytes,
            ..CAPABILITIES
        };
        Ok(Self {
            identity: ChannelIdentity::new(&telemetry, capabilities),
            intake: Arc::new(Intake {
                bot_user_id: Mutex::new(settings.bot_user_id.clone()),
                settings: settings.clone(),
                api,
                allowed_users: ctx.allowed_users.clone(),
                commands: ctx.commands.clone(),
                telemetry,
                sink: Mutex::new(None),
                reactions: TaskTracker::new(),
                working: Mutex::new(Working::default()),
                responders: respond::Responders::default(),
                latest_threads: Mutex::new(LruCache::new(LATEST_THREADS)),
                posted: SentOnce::default(),
            }),
            settings,
            route,
        })
    }

    fn api(&self) -> &SlackApi {
        &self.intake.api
    }

    fn telemetry(&self) -> &Telemetry {
        &self.intake.telemetry
    }

    /// Posts `text` where `to` is answered: through the command's `response_url` where the
    /// bot cannot post (`respond.rs`), where a `partial` is held back.
    async fn post(
        &self,
        to: &SendTarget<'_>,
        text: &str,
        partial: bool,
    ) -> ChannelResult<SentMessage> {
        let command = respond::command_of(to);
        if let Some(trigger) = command
            && self.intake.responders.outside(trigger)
        {
            return self.respond(trigger, text, partial).await;
        }
        let posted = self
            .api()
            .post_message(to.chat_id.as_str(), text, answer_thread(to))
            .await;
        let posted = match (posted, command) {
            (Err(error), Some(trigger)) if self.intake.responders.refused(trigger, &error) => {
                return self.respond(trigger, text, partial).await;
            }
            (posted, _) => self
                .telemetry()
                .sending(posted.map_err(ChannelError::from))?,
        };
        Ok(SentMessage {
            id: MessageId::new(posted.ts),
        })
    }

    /// `text` through the command `trigger`'s `response_url`; a `partial` only opens the
    /// answer's message, which its final posts.
    async fn respond(
        &self,
        trigger: &str,
        text: &str,
        partial: bool,
    ) -> ChannelResult<SentMessage> {
        if !partial {
            let responded = self
                .intake
                .responders
                .respond(self.api(), trigger, text)
                .await;
            self.telemetry()
                .sending(responded.map_err(ChannelError::from))?;
        }
        Ok(SentMessage {
            id: respond::message_id(trigger),
        })
    }
}

/// The first message of `text` within Slack's cap: a preview's (the rest waits for the
/// final).
fn first_text(text: &str) -> String {
    slack_texts(text).into_iter().next().unwrap_or_default()
}

/// The thread an answer goes into: the inbound metadata's `thread_ts` (the conversation's
/// root), none for a top-level answer.
fn answer_thread<'a>(to: &SendTarget<'a>) -> Option<&'a str> {
    to.metadata
        .get("thread_ts")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
}

/// A final's message is posted once per send key: one that landed before (the final
/// delivered again after a later message of it failed) is not posted again, its message
/// answered instead. Slack has no send key of its own, so the keys are remembered in
/// memory ([`SentOnce`]).
impl SendParts for SlackChannel {
    async fn send_part(&self, to: &SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let post = || self.post(to, text, false);
        self.intake.posted.once(to.hints, post).await
    }
}

#[async_trait]
impl Channel for SlackChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        *lock(&self.intake.sink) = Some(sink.clone());
        let result = match &self.settings.delivery {
            Delivery::Socket { app_token } => {
                let reconnect = self.telemetry().reconnect(reconnect::BACKOFF);
                let handler: &dyn Envelopes = self.intake.as_ref();
                let mut link = ws::Link::new(self.api(), app_token, handler);
                let result = reconnect.drive(&mut link, &shutdown).await;
                if let Err(error) = &result {
                    tracing::error!(channel = NAME, %error, "Slack Socket Mode stopped.");
                }
                transport_ended(self.telemetry(), result)
            }
            Delivery::Http { signing_secret, .. } => {
                let route = WebhookRoute::required(self.route.as_ref())?;
                let secret = signing_secret.clone();
                let serving = hook::run(self.intake.clone(), secret, route, sink, &shutdown);
                // Both end by shutdown; the identity's ends sooner, once the id is known.
                let (exit, ()) = tokio::join!(serving, self.intake.learn_identity(&shutdown));
                Ok(exit)
            }
        };
        self.telemetry().set_connected(false);
        *lock(&self.intake.sink) = None;
        result
    }

    /// Answers in a thread read apart from the channel and from the other threads.
    fn thread_of<'a>(&self, to: SendTarget<'a>) -> Option<Cow<'a, str>> {
        answer_thread(&to).map(Cow::Borrowed)
    }

    /// The text as one message, or (grown past Slack's cap by its markup) several: the
    /// first is the reply, the rest follow it, each under its cut's hints.
    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.send_parts(&to, slack_texts(text)).await
    }

    /// A preview: what does not fit Slack's cap waits for the final.
    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.post(&to, &first_text(text), true).await
    }

    /// A preview: what does not fit Slack's cap waits for the final.
    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        // An answer through a `response_url` shows only its final.
        if respond::trigger_of(id).is_some() {
            return Ok(());
        }
        let edited = self
            .api()
            .update(to.chat_id.as_str(), id.as_str(), &first_text(text))
            .await
            .map_err(ChannelError::from);
        self.telemetry().sending(edited)
    }

    /// The stream message shows the final's first part; what Slack's cap left is posted
    /// after it. A failure after the stream message was finished is `FinishedThen`, so
    /// the final is not sent again as a new message repeating its first part. An answer
    /// through a `response_url` has no message to edit: its first part is a post, made
    /// once per send key like the cuts, so the final delivered again does not repeat it.
    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let mut texts = slack_texts(text).into_iter();
        let first = texts.next().unwrap_or_default();
        match respond::trigger_of(id) {
            // A post of its own, made once per send key like any.
            Some(trigger) => {
                let respond = || self.respond(trigger, &first, false);
                self.intake.posted.once(to.hints, respond).await?;
            }
            None => self.edit_text(to, id, &first).await?,
        }
        self.send_cuts(&to, texts)
            .await
            .map_err(ChannelError::after_finishing)
    }

    /// The bridge is done with the message `to` answers: `white_check_mark` on it, or `x`
    /// where its answer was refused for good.
    /// Added after the message's `eyes` (waited for, at most 10 s), in the chat's delivery
    /// lane, so the daemon's shutdown flush covers it (a `x` is the only word a user gets
    /// of an answer that will not come). A rate limit on reactions is waited out if Slack
    /// asks for at most 10 s, so the chat's next replies are held up little.
    async fn turn_ended(&self, to: SendTarget<'_>) -> ChannelResult {
        let Some(source) = to.reply_to else {
            return Ok(());
        };
        self.intake
            .working_added(to.chat_id.as_str(), source.as_str())
            .await;
        let reaction = match to.hints.unanswered {
            true => FAILED_REACTION,
            false => DONE_REACTION,
        };
        let (chat, ts) = (to.chat_id.as_str(), source.as_str());
        add_reaction(self.api(), chat, ts, reaction, TURN_MARK_WAIT)
            .await
            .map_err(ChannelError::from)
    }

    /// The external upload (`files.getUploadURLExternal`, the bytes,
    /// `files.completeUploadExternal`) into the answer's thread.
    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        if file.size > MAX_UPLOAD_BYTES {
            return Err(ChannelError::TooLarge {
                limit: MAX_UPLOAD_BYTES,
            });
        }
        let bytes = im_bridge_channel::read_staged(&file.path, MAX_UPLOAD_BYTES).await?;
        let sent = self
            .api()
            .upload(
                to.chat_id.as_str(),
                answer_thread(&to),
                &file.filename,
                Bytes::from(bytes),
            )
            .await
            .map_err(ChannelError::from);
        self.telemetry().sending(sent)
    }

    /// Downloads a file a user shared (`url_private_download`) with the bot token, from
    /// `file_hosts` only, bounded.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        Ok(self.fetch_labeled(file, max_bytes).await?.0)
    }

    /// A file's bytes from its URL (`file_hosts` only, with the bot token); a Slack
    /// Connect file's URL, name and type from `files.info` first.
    async fn fetch_labeled(
        &self,
        file: &InboundFile,
        max_bytes: u64,
    ) -> ChannelResult<(Bytes, FileLabel)> {
        let read = |handle| self.fetch(handle, max_bytes);
        fetch_handle_labeled(self.telemetry(), file, max_bytes, read).await
    }
}

impl Intake {
    /// Asks `auth.test` for the bot's user id, when it is not known at start, until it
    /// answers or `shutdown` (Events API mode, beside the route: events are served
    /// meanwhile), tried again after a failure with the reconnect backoff. Until then the
    /// bot is told by the `authorizations` an event carries ([`Intake::offer_event`]),
    /// which `auth.test`'s answer then confirms or corrects.
    async fn learn_identity(&self, shutdown: &CancellationToken) {
        if !self.needs_identity() {
            return;
        }
        let mut backoff = reconnect::BACKOFF;
        loop {
            match self.api.auth_test().await {
                Ok(me) => return self.identity(me.user_id, me.team_id),
                Err(error) => {
                    let wait = backoff.next_wait();
                    let failures = backoff.failures();
                    tracing::warn!(channel = NAME, %error, failures, ?wait, "Could not learn the bot's Slack user id; trying again.");
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    /// Normalizes with the bot's user id as known now, and offers the message (a skip is
    /// logged and counts as done).
    fn offer(
        &self,
        sink: &InboundSink,
        normalize: impl FnOnce(&InboundContext<'_>) -> Result<InboundMessage, Skip>,
    ) -> Offered {
        self.telemetry.received(1);
        let bot = lock(&self.bot_user_id).clone();
        let ctx = InboundContext {
            settings: &self.settings,
            bot_user_id: bot.as_deref(),
            allowed_users: &self.allowed_users,
            commands: &self.commands,
        };
        match normalize(&ctx) {
            Ok(msg) => self.admit(sink, msg),
            Err(skip) => {
                skip.log(NAME);
                Offered::Done
            }
        }
    }

    /// An Events API event: normalized and offered. While `auth.test` has not told the
    /// bot's user id, the event's bot authorization does (Slack lists the installation the
    /// event is delivered for; for a bot token, the bot user), so a mention of the bot is
    /// recognized and stripped from the first event on.
    pub(crate) fn offer_event(&self, sink: &InboundSink, callback: &EventCallback) -> Offered {
        if self.needs_identity()
            && let Some(bot) = callback.authorizations.iter().find(|a| a.is_bot)
            && let Some(user_id) = bot.user_id.as_ref().filter(|u| !u.is_empty())
        {
            let mut known = lock(&self.bot_user_id);
            if known.is_none() {
                tracing::info!(channel = NAME, bot_user_id = %user_id, "Slack bot identified by an event's authorization.");
                *known = Some(user_id.clone());
            }
        }
        self.offer(sink, |ctx| normalize_event(callback, ctx))
    }

    /// A slash command: normalized and offered, its `response_url` kept for a conversation
    /// the bot cannot post in (`respond.rs`). Slack runs no slash command inside a thread,
    /// so with `thread_replies` a native command acts in the conversation its user spoke
    /// in last in that channel (its thread, where the answer goes too): `/stop` stops the
    /// answer being written there, not the channel's own conversation, which no message
    /// uses. A user with no thread there yet gets the channel's.
    pub(crate) fn offer_command(&self, sink: &InboundSink, command: &SlashCommand) -> Offered {
        if let (Some(url), Some(trigger)) = (&command.response_url, &command.trigger_id) {
            let api_url = &self.settings.api_url;
            self.responders.remember(trigger, url, api_url);
        }
        self.offer(sink, |ctx| {
            let mut msg = normalize_command(command, ctx)?;
            if self.settings.thread_replies && msg.topic_id.is_none() {
                let key = (msg.chat_id.to_string(), msg.user_id.to_string());
                if let Some(root) = lock(&self.latest_threads).get(&key) {
                    msg.metadata
                        .insert("thread_ts".into(), Value::from(root.as_str()));
                    msg.topic_id = Some(root.clone());
                }
            }
            Ok(msg)
        })
    }

    /// Notes `msg`'s thread as its user's latest conversation in its channel.
    fn note_thread(&self, msg: &InboundMessage) {
        if let Some(root) = &msg.topic_id
            && !msg.metadata.contains_key("slash_command")
        {
            let key = (msg.chat_id.to_string(), msg.user_id.to_string());
            lock(&self.latest_threads).insert(key, root.clone());
        }
    }

    /// Offers a message; once admitted its source gets `eyes`. A redelivery (or the
    /// `message` of an `app_mention` pair) is offered too: the daemon's dedupe runs it
    /// once, and Slack answers the second `eyes` with `already_reacted`, which is success.
    fn admit(&self, sink: &InboundSink, msg: InboundMessage) -> Offered {
        self.note_thread(&msg);
        let source = msg
            .thread_ts
            .clone()
            .map(|ts| (msg.chat_id.to_string(), ts));
        match sink.offer(msg) {
            Ok(()) => {
                if let Some((channel, ts)) = source {
                    self.react(channel, ts, WORKING_REACTION);
                }
                Offered::Done
            }
            // Refused as too busy, the sender is told so: nothing to redeliver either.
            Err(AdmitError::QueueFull) => Offered::Done,
            Err(error) => {
                tracing::warn!(channel = NAME, %error, "A Slack event was not admitted; Slack will deliver it again.");
                Offered::Again
            }
        }
    }

    /// Adds `name` to message `ts` of `channel` in the background (a hint: a failure is
    /// logged).
    fn react(&self, channel: String, ts: MessageId, name: &'static str) {
        let api = self.api.clone();
        let key = format!("{channel}/{}", ts.as_str());
        let handle = self.reactions.spawn(async move {
            if let Err(error) = add_reaction(&api, &channel, ts.as_str(), name, REACTION_WAIT).await
            {
                tracing::debug!(channel = NAME, %error, name, "Adding a Slack reaction failed.");
            }
        });
        lock(&self.working).insert(key, handle);
    }

    /// Waits (at most [`WORKING_WAIT`]) for the `eyes` of message `ts` in `channel` to be
    /// added, so the user's message shows 👀 before ✅ however fast the answer was.
    async fn working_added(&self, channel: &str, ts: &str) {
        let handle = lock(&self.working).remove(&format!("{channel}/{ts}"));
        if let Some(handle) = handle {
            let _ = tokio::time::timeout(WORKING_WAIT, handle).await;
        }
    }
}

/// The `eyes` reactions in flight or done, by `{channel}/{ts}`, until their turn ends (the
/// oldest forgotten first past [`WORKING_CAPACITY`]).
#[derive(Default)]
struct Working {
    handles: HashMap<String, JoinHandle<()>>,
    order: VecDeque<String>,
}

impl Working {
    fn insert(&mut self, key: String, handle: JoinHandle<()>) {
        if self.handles.insert(key.clone(), handle).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > WORKING_CAPACITY {
            if let Some(old) = self.order.pop_front() {
                self.handles.remove(&old);
            }
        }
    }

    fn remove(&mut self, key: &str) -> Option<JoinHandle<()>> {
        let handle = self.handles.remove(key)?;
        self.order.retain(|k| k != key);
        Some(handle)
    }
}

/// `eyes` reactions remembered until their turn ends.
const WORKING_CAPACITY: usize = 4096;

/// Users' latest threads remembered (by channel and user), for native slash commands.
const LATEST_THREADS: usize = 4096;

/// Calls made in all to add one reaction.
const REACTION_ATTEMPTS: u32 = 3;

/// The longest rate-limit wait before a message's `eyes` is tried again, in the
/// background (Tier 3's window).
const REACTION_WAIT: Duration = Duration::from_secs(60);

/// The longest rate-limit wait before a turn's mark is tried again, in the chat's
/// delivery lane.
const TURN_MARK_WAIT: Duration = Duration::from_secs(10);

/// How long the end of a turn waits for its message's `eyes` to be added.
const WORKING_WAIT: Duration = Duration::from_secs(10);

/// Adds reaction `name` to message `ts` of `channel`. `reactions.add` is Tier 3, about 50
/// a minute per workspace, so a busy workspace meets its 429: a wait Slack names of at
/// most `max_wait` is waited out and the reaction added after it, [`REACTION_ATTEMPTS`]
/// calls in all.
async fn add_reaction(
    api: &SlackApi,
    channel: &str,
    ts: &str,
    name: &str,
    max_wait: Duration,
) -> Result<(), ApiError> {
    let mut attempt = 1;
    loop {
        match api.react(channel, ts, name).await {
            Err(ApiError::Http(HttpError::RetryAfter(wait)))
                if attempt < REACTION_ATTEMPTS && wait <= max_wait =>
            {
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            added => return added,
        }
    }
}

impl Envelopes for Intake {
    fn needs_identity(&self) -> bool {
        lock(&self.bot_user_id).is_none()
    }

    fn identity(&self, user_id: String, team_id: String) {
        tracing::info!(channel = NAME, bot_user_id = %user_id, team_id = %team_id, "Slack bot identified.");
        *lock(&self.bot_user_id) = Some(user_id);
    }

    fn handle(&self, envelope: crate::model::Envelope) -> Verdict {
        let Some(sink) = lock(&self.sink).clone() else {
            return Verdict::Again;
        };
        let offered = match envelope.kind.as_str() {
            envelope_kind::EVENTS_API => match EventBody::from_value(envelope.payload) {
                Ok(EventBody::EventCallback(callback)) => self.offer_event(&sink, &callback),
                Ok(_) => Offered::Done,
                Err(error) => {
                    self.unreadable(&error);
                    Offered::Done
                }
            },
            envelope_kind::SLASH_COMMANDS => {
                match serde_json::from_value::<SlashCommand>(envelope.payload) {
                    // A slash command is never delivered again: acked whatever became of it.
                    Ok(command) => {
                        self.offer_command(&sink, &command);
                        Offered::Done
                    }
                    Err(error) => {
                        self.unreadable(&error);
                        Offered::Done
                    }
                }
            }
            other => {
                tracing::debug!(
                    channel = NAME,
                    kind = other,
                    "Acknowledged a Slack envelope of a type not handled."
                );
                Offered::Done
            }
        };
        match offered {
            Offered::Done => Verdict::Ack,
            Offered::Again => Verdict::Again,
        }
    }

    fn connected(&self, up: bool) {
        self.telemetry.set_connected(up);
    }
}

impl Intake {
    /// A payload that does not read as Slack's: counted and logged without its text.
    pub(crate) fn unreadable(&self, error: &serde_json::Error) {
        self.telemetry.error(Stage::Receiving);
        tracing::warn!(channel = NAME, error = ?error.classify(), "Skipped a Slack payload that could not be read.");
    }
}

#[cfg(test)]
mod tests;
