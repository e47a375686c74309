//! The Discord channel: serenity's gateway in (`crate::transport::ws`), thin REST calls
//! out (`crate::api`).
//!
//! - **In**: each user message is normalized ([`crate::inbound`]); a message id seen
//!   before (a RESUME replay, a redelivery) is skipped before any side effect; a
//!   [`Route::NewThread`] starts the thread (falling back to the channel when Discord
//!   refuses) and remembers it as the channel's active thread; then the message is offered
//!   to the daemon's queue. The thread maps live in memory for now (the store-backed map,
//!   `discord_threads.json`'s equivalent, is left to the daemon side). A READY that starts
//!   a new session after an earlier one reads back what the old one missed (`backfill`).
//! - **Out**: one reply edited in place while the answer streams (at most one edit a
//!   second per message, paced by the delivery engine from [`CAPABILITIES`]), at most
//!   2000 characters a message, the agent's Markdown as written (Discord's Markdown), every
//!   message with `allowed_mentions: {"parse": []}`. A reply goes into the thread named by
//!   the inbound metadata's `thread`, else into the chat (the parent channel).
//!
//! Children: `backfill`, the channels active lately and the read-back after a lost
//! session; `lanes`, where messages are taken in off the event loop; `state`, the
//! intake's memory; `tests`.

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::Fuse;
use im_bridge_channel::reconnect;
use im_bridge_channel::render::Plain;
use im_bridge_channel::{
    AdmitError, AllowedUsers, BuildContext, Capabilities, Channel, ChannelError, ChannelExit,
    ChannelIdentity, ChannelResult, ChatBudget, CommandVocabulary, InboundFile, InboundSink,
    MessageId, OutboundFile, RateBudget, SendTarget, SentMessage, Telemetry, UpdateMode, Writes,
    fetch_handle, transport_ended,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::api::{DONE_EMOJI, DiscordApi, MessageRef};
use crate::config::DiscordSettings;
use crate::error::{ApiError, THREAD_EXISTS};
use crate::inbound::{InboundContext, Route, admit, normalize};
use crate::model::Message;
use crate::transport::ws::{self, GatewayEvent};

use self::backfill::Mark;
use self::lanes::Lanes;
use self::state::{State, lock};

/// Discord's limit on a message's content, in characters.
pub const MAX_MESSAGE_CHARS: usize = 2000;
/// The largest upload (Discord's default limit for bots, 10 MiB).
pub const MAX_UPLOAD_BYTES: u64 = 10 * 1024 * 1024;
/// Gateway events buffered between serenity and the intake.
const EVENTS: usize = 256;
/// Calls made in all to start a thread before the answer goes into the channel instead.
const THREAD_ATTEMPTS: u32 = 3;
/// The longest rate-limit wait for a thread: longer, and the answer goes into the channel.
const THREAD_WAIT: Duration = Duration::from_secs(5);
/// The pause before a call safe to repeat is made again after network or server trouble.
const TROUBLE_RETRY: Duration = Duration::from_millis(500);
/// How long a channel whose lookup failed is not asked about again (longer when a 429
/// says so); meanwhile its messages are taken as a plain channel's.
const LOOKUP_RETRY: Duration = Duration::from_secs(60);
/// Calls made in all to show a final in its stream message before the engine sends it as
/// a new message instead.
const FINAL_EDIT_ATTEMPTS: u32 = 3;

/// What Discord can show: one message edited in place (about one edit a second), 2000
/// characters, Discord's Markdown as the agent writes it, files up to 10 MiB. Discord
/// allows about 5 messages per 5 seconds in a channel.
pub const CAPABILITIES: Capabilities = Capabilities {
    updates: UpdateMode::EditInPlace,
    min_edit_interval_private: Duration::from_secs(1),
    min_edit_interval_group: Duration::from_secs(1),
    chat_budget: Some(
        ChatBudget::new(Writes::MESSAGES_EDITS_FILES, 5, Duration::from_secs(1))
            .holding_first_partial(Duration::from_secs(1)),
    ),
    rate_budgets: &[BOT_BUDGET],
    markup: &Plain,
    max_upload_bytes: MAX_UPLOAD_BYTES,
    // Discord's typing hint fades after about 10 s.
    typing_refresh: Some(Duration::from_secs(8)),
    ..Capabilities::final_only(MAX_MESSAGE_CHARS)
};

/// The bot as a whole: "All bots can make up to 50 requests per second to our API" (the
/// global rate limit, <https://discord.com/developers/docs/topics/rate-limits#global-rate-limit>).
/// Every call the engine makes counts, the typing hint too; 40/s leaves the rest for the
/// calls the adapter makes on its own (the ✅ reaction, threads, file downloads).
pub const BOT_BUDGET: RateBudget = RateBudget::per_second("bot", Writes::ALL, 40, 40);

/// The Discord channel.
pub struct DiscordChannel {
    identity: ChannelIdentity,
    settings: DiscordSettings,
    api: DiscordApi,
    allowed_users: AllowedUsers,
    commands: CommandVocabulary,
    telemetry: Telemetry,
    state: Mutex<State>,
}

impl std::fmt::Debug for DiscordChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordChannel")
            .field("api_url", &self.settings.api_url)
            .finish_non_exhaustive()
    }
}

impl DiscordChannel {
    /// A channel with `settings` and the daemon's commands.
    pub fn new(settings: DiscordSettings, ctx: &BuildContext) -> ChannelResult<Self> {
        let api = DiscordApi::new(&settings).map_err(ChannelError::from)?;
        let telemetry = Telemetry::new(NAME);
        Ok(Self {
            identity: ChannelIdentity::new(&telemetry, CAPABILITIES),
            settings,
            api,
            allowed_users: ctx.allowed_users.clone(),
            commands: ctx.commands.clone(),
            telemetry,
            state: Mutex::new(State::default()),
        })
    }

    /// Adds the ✅ reaction to the user's message `to` answers (its `channel_id` and
    /// `message_id` from the inbound metadata): for the daemon side to call once the
    /// answer is done (the channel cannot tell a split final's last part).
    pub async fn mark_done(&self, to: SendTarget<'_>) -> ChannelResult {
        let id = |key: &str| {
            to.metadata
                .get(key)
                .and_then(|v| v.as_str())
                .and_then(|s| s.parse::<u64>().ok())
        };
        let (Some(channel_id), Some(message_id)) = (id("channel_id"), id("message_id")) else {
            return Err(ChannelError::Unsupported(
                "a reaction without its source message",
            ));
        };
        let at = MessageRef {
            channel_id,
            message_id,
        };
        self.api
            .react(at, DONE_EMOJI)
            .await
            .map_err(ChannelError::from)
    }

    /// Creates a message with `text` where `to` goes.
    async fn create(&self, to: &SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let channel = target_channel(to)?;

        // A reply's send key names it for Discord (a final's, or a stream's for its
        // start): sent again (a lost answer, a restart, a stream started again), it is
        // the same message.
        let nonce = to.hints.send_key_hash().map(|hash| format!("{hash:016x}"));
        let sent = self
            .api
            .create_message(channel, text, nonce)
            .await
            .map_err(ChannelError::from);
        let sent = self.telemetry.sending(sent)?;
        Ok(SentMessage {
            id: MessageId::new(sent.message_id.to_string()),
        })
    }

    /// Adds ✅ to the user's message of `to`, once per source; a failure is only logged
    /// (a hint, like the typing indicator).
    async fn done(&self, to: &SendTarget<'_>) {
        let Some(source) = to.reply_to else {
            return;
        };
        if !lock(&self.state).first_done(source.as_str()) {
            return;
        }
        if let Err(error) = self.mark_done(*to).await {
            tracing::debug!(channel = NAME, %error, "Adding the done reaction failed.");
        }
    }

    /// Asks Discord whether an unknown guild channel is a thread the bot opened, and in
    /// which channel: a message in a thread the bot opened before a restart (or on another
    /// replica) then continues that thread's conversation, as the answers before it did. Other guilds,
    /// when `allowed_guilds` excludes them, are never asked about.
    async fn learn_channel(&self, message: &Message) {
        let guild = message.guild_id.map(|g| g.get());
        let channel = message.channel_id.get();
        let asking =
            |state: &State| state.unknown(channel) && state.may_ask(channel, Instant::now());
        if guild.is_none() || !self.settings.guild_allowed(guild) || !asking(&lock(&self.state)) {
            return;
        }
        let thread = self.api.thread_parent(channel).await;
        let bot = lock(&self.state).bot_id;
        match thread {
            // The bot's own thread continues its conversation; anyone else's thread (a
            // forum post, a user's thread) is a channel like any other: `mention_only`
            // holds there.
            Ok(Some(thread)) if bot.is_some() && thread.owner == bot => {
                lock(&self.state).know_thread(channel, thread.parent);
            }
            Ok(_) => lock(&self.state).add_plain(channel),
            Err(error) => {
                tracing::debug!(channel = NAME, %error, "Could not tell whether a Discord channel is a thread.");
                let (wait, global) = match error {
                    ApiError::RateLimited {
                        retry_after,
                        global,
                        ..
                    } => (retry_after.max(LOOKUP_RETRY), global),
                    _ => (LOOKUP_RETRY, false),
                };
                lock(&self.state).lookup_failed(channel, Instant::now() + wait, global);
            }
        }
    }

    /// One event from the gateway, and what follows from it. serenity hands each
    /// dispatch to its raw handler in a task of its own, so READY and the first
    /// MESSAGE_CREATE reach the channel in either order: a message proves the session as
    /// READY does (the bot's id is known from [`GatewayEvent::Identity`], sent before the
    /// shard starts). A READY after an earlier one started a new session, which missed
    /// what the old one was not told: the channels to read back (`backfill`).
    fn on_event(&self, event: GatewayEvent) -> Next {
        match event {
            GatewayEvent::Identity { bot_id } => lock(&self.state).bot_id = Some(bot_id),
            GatewayEvent::Ready { bot_id } => {
                self.telemetry.set_connected(true);
                let mut state = lock(&self.state);
                state.bot_id = Some(bot_id);
                state.sessions += 1;
                if state.sessions > 1 {
                    return Next::ReadBack(state.recent.marks());
                }
            }
            GatewayEvent::Resumed => {
                self.telemetry.set_connected(true);
            }
            GatewayEvent::Message(message) => {
                self.telemetry.set_connected(true);
                return Next::TakeIn(message);
            }
        }
        Next::Nothing
    }

    /// Starts the thread an answer to `at` goes into. A rate limit is waited out (at most
    /// [`THREAD_WAIT`]) and network or server trouble tried again, [`THREAD_ATTEMPTS`]
    /// calls in all, so a passing hiccup does not move the conversation into the channel.
    /// A thread that exists already (an earlier call landed, its answer lost) has the
    /// message's id, as every thread started from a message has.
    async fn start_thread(&self, at: MessageRef, name: &str) -> Result<u64, ApiError> {
        let mut attempt = 1;
        loop {
            let error = match self.api.start_thread(at, name).await {
                Ok(thread) => return Ok(thread),
                Err(error) if error.code() == Some(THREAD_EXISTS) => {
                    return Ok(at.message_id);
                }
                Err(error) => error,
            };
            let wait = match &error {
                ApiError::RateLimited { retry_after, .. } => *retry_after,
                error if is_trouble(error) => TROUBLE_RETRY,
                _ => return Err(error),
            };
            if attempt >= THREAD_ATTEMPTS || wait > THREAD_WAIT {
                return Err(error);
            }
            tracing::debug!(channel = NAME, %error, attempt, "Starting a Discord thread failed; trying again.");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// What normalizing a message in `channel` needs, as `state` knows it.
    fn context<'a>(&'a self, state: &State, channel: u64) -> InboundContext<'a> {
        InboundContext {
            settings: &self.settings,
            bot_id: state.bot_id,
            allowed_users: &self.allowed_users,
            commands: &self.commands,
            known_thread_parent: state.threads.get(&channel).copied(),
            active_thread: state.active.get(&channel).copied(),
        }
    }

    /// Normalizes a user's message, performs its side effects, and offers it; whether it
    /// was new and offered.
    async fn intake(&self, sink: &InboundSink, message: &Message) -> bool {
        self.telemetry.received(1);
        if self
            .settings
            .guild_allowed(message.guild_id.map(|g| g.get()))
        {
            lock(&self.state).recent.saw(message);
        }
        // Who may be answered is known without asking Discord anything.
        let channel = message.channel_id.get();
        if let Err(skip) = admit(message, &self.context(&lock(&self.state), channel)) {
            skip.log(NAME);
            return false;
        }
        self.learn_channel(message).await;
        let normalized = normalize(message, &self.context(&lock(&self.state), channel));
        let mut n = match normalized {
            Ok(n) => n,
            Err(skip) => {
                skip.log(NAME);
                return false;
            }
        };
        if !lock(&self.state).first_time(n.message_id) {
            tracing::debug!(channel = NAME, "Skipped a Discord message delivered twice.");
            return false;
        }
        if let Route::NewThread { name } = &n.route {
            let at = MessageRef {
                channel_id: n.channel_id,
                message_id: n.message_id,
            };
            match self.start_thread(at, name).await {
                Ok(thread) => {
                    lock(&self.state).add_thread(thread, n.channel_id);
                    n.in_thread(thread);
                }
                Err(error) => {
                    tracing::warn!(channel = NAME, %error, "Could not start a Discord thread; answering in the channel.");
                    n.route = Route::Channel;
                }
            }
        }
        match sink.offer(n.message) {
            Ok(()) => true,
            Err(AdmitError::QueueFull) => false,
            Err(error) => {
                tracing::warn!(channel = NAME, %error, "A Discord message was not admitted.");
                false
            }
        }
    }
}

/// What a gateway event asks of the channel's event loop.
enum Next {
    /// Nothing more.
    Nothing,
    /// Take the message in (in its lane).
    TakeIn(Box<Message>),
    /// Read back these channels: a new session missed what the old one was not told.
    ReadBack(Vec<(u64, Mark)>),
}

/// The thread a reply goes into: the inbound metadata's `thread`, as text and as the
/// channel id it names.
fn reply_thread<'a>(to: &SendTarget<'a>) -> Option<(&'a str, u64)> {
    let thread = to.metadata.get("thread")?.as_str()?;
    Some((thread, thread.parse().ok()?))
}

/// Where a reply goes: its thread (see [`reply_thread`]), else the chat.
fn target_channel(to: &SendTarget<'_>) -> ChannelResult<u64> {
    match reply_thread(to) {
        Some((_, t)) => Ok(t),
        None => to
            .chat_id
            .as_str()
            .parse()
            .map_err(|_| ChannelError::Rejected {
                reason: "the chat id is not a Discord channel id".to_owned(),
            }),
    }
}

fn message_id(id: &MessageId) -> ChannelResult<u64> {
    id.as_str().parse().map_err(|_| ChannelError::Rejected {
        reason: "the message id is not a Discord id".to_owned(),
    })
}

/// Message `id` where `to` is answered.
fn message_ref(to: &SendTarget<'_>, id: &MessageId) -> ChannelResult<MessageRef> {
    Ok(MessageRef {
        channel_id: target_channel(to)?,
        message_id: message_id(id)?,
    })
}

/// Network or server trouble: the call may or may not have reached Discord.
fn is_trouble(error: &ApiError) -> bool {
    match error {
        ApiError::Http(http) => http.is_transient(),
        ApiError::Api { status, .. } => *status >= 500,
        _ => false,
    }
}

#[async_trait]
impl Channel for DiscordChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let (tx, mut events) = mpsc::channel(EVENTS);
        let reconnect = self.telemetry.reconnect(reconnect::BACKOFF);
        let gateway = ws::run(&self.settings, &self.api, tx, reconnect, shutdown.clone());
        let (lanes, queues) = Lanes::new();
        let serve = async {
            // Dropped when `serve` returns: the lanes then end once empty.
            let lanes = lanes;
            tokio::pin!(gateway);
            // At most one read-back runs, beside the lanes; a newer session's replaces it.
            let read_back = Fuse::terminated();
            tokio::pin!(read_back);
            let mut open = true;
            loop {
                tokio::select! {
                    ended = &mut gateway => break ended,
                    () = &mut read_back => {}
                    event = events.recv(), if open => match event.map(|e| self.on_event(e)) {
                        Some(Next::TakeIn(message)) => lanes.send(message).await,
                        Some(Next::ReadBack(marks)) => {
                            read_back.set(backfill::read_back(self, &sink, marks).fuse());
                        }
                        Some(Next::Nothing) => {}
                        None => open = false,
                    },
                }
            }
        };
        let (result, ()) = tokio::join!(serve, lanes::take_in(self, &sink, queues, &shutdown));
        if let Err(error) = &result {
            tracing::error!(channel = NAME, %error, "The Discord gateway stopped.");
        }
        transport_ended(&self.telemetry, result)
    }

    /// A new message; the answer (or a command's reply) is done, so its source gets ✅.
    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let sent = self.create(&to, text).await?;
        self.done(&to).await;
        Ok(sent)
    }

    /// A streamed answer's first message: not done yet.
    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.create(&to, text).await
    }

    /// The stream message shows the final. An edit sets the whole content, so one that met
    /// network or server trouble (it may have applied: a 502, or a timeout after Discord
    /// took it) is made again, three calls in all, before the error goes to the engine,
    /// which finishes a final with a send key again later (never as a new message, which
    /// would show it twice had the edit applied) and sends one without as a new message.
    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let at = message_ref(&to, id)?;
        let mut attempt = 1;
        let edited = loop {
            match self.api.edit_message(at, text).await {
                Err(error) if is_trouble(&error) && attempt < FINAL_EDIT_ATTEMPTS => {
                    tracing::debug!(channel = NAME, %error, attempt, "Showing a final in its Discord message failed; trying again.");
                    tokio::time::sleep(TROUBLE_RETRY).await;
                    attempt += 1;
                }
                edited => break edited,
            }
        };
        self.telemetry.sending(edited.map_err(ChannelError::from))?;
        self.done(&to).await;
        Ok(())
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let at = message_ref(&to, id)?;
        let edited = self
            .api
            .edit_message(at, text)
            .await
            .map_err(ChannelError::from);
        self.telemetry.sending(edited)
    }

    /// A thread reads apart from its channel and from the other threads.
    fn thread_of<'a>(&self, to: SendTarget<'a>) -> Option<Cow<'a, str>> {
        reply_thread(&to).map(|(thread, _)| Cow::Borrowed(thread))
    }

    async fn show_typing(&self, to: SendTarget<'_>) -> ChannelResult {
        let channel = target_channel(&to)?;
        self.api.typing(channel).await.map_err(ChannelError::from)
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        if file.size > MAX_UPLOAD_BYTES {
            return Err(ChannelError::TooLarge {
                limit: MAX_UPLOAD_BYTES,
            });
        }
        let channel = target_channel(&to)?;
        let bytes = im_bridge_channel::read_staged(&file.path, MAX_UPLOAD_BYTES).await?;
        let sent = self
            .api
            .upload(channel, &file.filename, bytes, None)
            .await
            .map(drop)
            .map_err(ChannelError::from);
        self.telemetry.sending(sent)
    }

    /// Downloads an attachment a user sent (a CDN URL), bounded.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let download = |url| self.api.download(url, max_bytes);
        fetch_handle(&self.telemetry, file, max_bytes, download).await
    }
}

mod backfill;
mod lanes;
mod state;
#[cfg(test)]
mod tests;
