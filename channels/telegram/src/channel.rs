//! [`TelegramChannel`]: the [`Channel`] impl over the Bot API, its [`CAPABILITIES`], and the
//! state it shares with its transports (the `transport::Intake`).
//!
//! `run` identifies the bot (`getMe`, to recognise `/cmd@ThisBot`), publishes the command
//! menu (`setMyCommands`, best effort, once per language), then runs the configured
//! transport. The primitives are one Bot API call each (child `outbound`); every one is
//! counted in the telemetry contract.

mod outbound;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use im_bridge_channel::{
    BuildContext, Capabilities, Channel, ChannelExit, ChannelIdentity, ChannelResult, ChatBudget,
    CommandMenu, InboundFile, InboundSink, LengthUnit, MenuEntry, MessageId, OutboundFile,
    RateBudget, Reaction, SendTarget, SentMessage, Stage, Telemetry, UpdateMode, WebhookLimits,
    WebhookRoute, Writes,
};
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::api::Api;
use crate::config::{TelegramSettings, Transport};
use crate::error::TelegramError;
use crate::markup::TelegramHtml;
use crate::model::{BotCommand, SetMyCommands};
use crate::transport::{self, Intake};

/// What Telegram can show: one message edited in place while a reply streams, at most
/// 4096 UTF-16 code units per message, edits no closer than 1 s in private chats and 3 s
/// in groups (Telegram's flood limits), and the localized "working on it" placeholder the
/// answer replaces.
pub const CAPABILITIES: Capabilities = Capabilities {
    updates: UpdateMode::EditInPlace,
    length_unit: LengthUnit::Utf16,
    max_message_len: 4096,
    min_edit_interval_private: Duration::from_secs(1),
    min_edit_interval_group: Duration::from_secs(3),
    // Telegram's flood limits: a short burst, then about 1 message/s per private chat and
    // 20 per minute per group (see [`GROUP_SPACING`]).
    // An answer that is complete within the first partial's hold costs one write, not a
    // stream start and its finish.
    chat_budget: Some(
        ChatBudget::new(
            Writes::MESSAGES_EDITS_FILES,
            CHAT_BURST,
            Duration::from_secs(1),
        )
        .in_groups(GROUP_SPACING)
        .holding_first_partial(Duration::from_millis(300)),
    ),
    rate_budgets: &[BOT_BUDGET],
    reply_window: None,
    serialize_conversations: false,
    working_placeholder: true,
    typing_refresh: None,
    files_expire_after: None,
    // The agent's Markdown is rendered into Telegram's HTML subset.
    markup: &TelegramHtml,
    // Photos up to 10 MB go as photos, everything up to 50 MB as a document.
    max_upload_bytes: outbound::MAX_DOCUMENT_BYTES,
    turn_ends: false,
    // `setMessageReaction`: a message sent while its conversation is busy is marked 👀
    // (queued) or 🤷 (turned away) once the notice was given.
    reactions: true,
    // A message edited in place needs no ending.
    finish_closes_stream: false,
};

/// Writes a quiet chat takes back to back before its spacing applies.
const CHAT_BURST: u32 = 3;

/// The spacing of writes in a group: "your bot will not be able to send more than 20
/// messages per minute to the same group" (the Bot API FAQ, "My bot is hitting limits, how
/// do I avoid this?", <https://core.telegram.org/bots/faq>). A budget lets its burst and
/// one write per spacing through in any span, so any minute holds at most
/// [`CHAT_BURST`] + 60 s / spacing writes: 16 a minute after a burst of 3 is 19, one under
/// Telegram's 20, since the budget counts a write when it is sent and Telegram when it
/// arrives.
const GROUP_SPACING: Duration = Duration::from_nanos(60_000_000_000 / 16);

/// The bot as a whole: "If you're sending bulk notifications to multiple users, the API will
/// not allow more than 30 messages per second or so" (the same FAQ). Every message, edit
/// and upload counts; the typing hint does not. A budget lets its burst and a second's
/// refill through in any second, so the two together stay one under Telegram's 30 (a write
/// is counted when sent, Telegram counts it when it arrives): a burst of 4, then 25 a
/// second.
pub const BOT_BUDGET: RateBudget =
    RateBudget::per_second("bot", Writes::MESSAGES_EDITS_FILES, 4, 25);

/// The Telegram channel.
pub struct TelegramChannel {
    identity: ChannelIdentity,
    /// The client the primitives call (a clone of the intake's).
    api: Api,
    telemetry: Telemetry,
    /// What the transports admit updates through, shared with the webhook handler.
    intake: Arc<Intake>,
    settings: TelegramSettings,
    menu: CommandMenu,
    /// The webhook route on the daemon's shared host (webhook mode only).
    route: Option<WebhookRoute>,
}

impl std::fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("settings", &self.settings)
            .field("connected", &self.telemetry.is_connected())
            .finish_non_exhaustive()
    }
}

impl TelegramChannel {
    /// A channel with validated settings and what the daemon hands every adapter: who may
    /// talk to the bot (messages from anyone else are dropped), the command vocabulary,
    /// the localized command menu to register, and (webhook mode) the shared webhook host
    /// its route is registered on.
    pub fn new(settings: TelegramSettings, ctx: &BuildContext) -> Result<Self, TelegramError> {
        let api = Api::new(&settings.api_url, settings.bot_token.clone())?;
        let telemetry = Telemetry::new(NAME);
        let (route, webhook_secret) = match &settings.transport {
            Transport::Polling { .. } => (None, None),
            Transport::Webhook(hook) => {
                let route = ctx.webhooks.route(
                    &telemetry,
                    hook.listen,
                    &hook.path,
                    WebhookLimits::default(),
                )?;
                (Some(route), Some(hook.secret_token.clone()))
            }
        };
        let intake = Intake::new(
            api.clone(),
            telemetry.clone(),
            ctx.allowed_users.clone(),
            ctx.commands.clone(),
            webhook_secret,
        );
        // Long polling admits one poller per bot; a webhook serves every replica.
        let polling = matches!(settings.transport, Transport::Polling { .. });
        Ok(Self {
            identity: ChannelIdentity::new(&telemetry, CAPABILITIES).exclusive(polling),
            api,
            telemetry,
            intake: Arc::new(intake),
            settings,
            menu: ctx.menu.clone(),
            route,
        })
    }

    /// The bot's username, once `getMe` answered.
    pub fn bot_username(&self) -> Option<String> {
        self.intake.bot_username()
    }

    /// The settings this channel runs with.
    pub fn settings(&self) -> &TelegramSettings {
        &self.settings
    }

    /// `setMyCommands` for the default menu and each language; best effort.
    async fn publish_menu(&self, shutdown: &CancellationToken) {
        let default = std::iter::once((None, &self.menu.default));
        let localized = self
            .menu
            .by_language
            .iter()
            .map(|(lang, entries)| (Some(lang.clone()), entries));
        for (language_code, entries) in default.chain(localized) {
            if entries.is_empty() {
                continue;
            }
            let params = SetMyCommands {
                commands: entries.iter().map(bot_command).collect(),
                language_code,
            };
            let result = tokio::select! {
                () = shutdown.cancelled() => return,
                r = self.api.set_my_commands(&params) => r,
            };
            if let Err(error) = result {
                tracing::warn!(%error, language = params.language_code.as_deref().unwrap_or("default"), "Registering the Telegram command menu failed.");
            }
        }
    }
}

fn bot_command(entry: &MenuEntry) -> BotCommand {
    BotCommand {
        command: entry.command.clone(),
        description: entry.description.clone(),
    }
}

#[async_trait]
impl Channel for TelegramChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let Some(me) = self.intake.identify(&shutdown).await? else {
            return Ok(ChannelExit::Stopped);
        };
        tracing::info!(
            bot_id = me.id,
            username = me.username.as_deref().unwrap_or(""),
            "Identified the Telegram bot."
        );
        self.publish_menu(&shutdown).await;
        let route = self.route.as_ref();
        transport::run(
            &self.intake,
            &self.settings.transport,
            route,
            sink,
            &shutdown,
        )
        .await
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let result = outbound::send_text(&self.api, to, text).await;
        self.telemetry.sending(result)
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let result = outbound::edit_text(&self.api, to, id, text).await;
        self.telemetry.sending(result)
    }

    /// A forum topic reads apart from the chat's other topics.
    fn thread_of<'a>(&self, to: SendTarget<'a>) -> Option<Cow<'a, str>> {
        outbound::forum_topic(&to).map(|topic| Cow::Owned(topic.to_string()))
    }

    /// "Typing…" while the agent works; a failure counts as a `sending` error and is
    /// otherwise ignored (it is only a hint).
    async fn show_typing(&self, to: SendTarget<'_>) -> ChannelResult {
        let result = outbound::show_typing(&self.api, to).await;
        if result.is_err() {
            self.telemetry.error(Stage::Sending);
        }
        result
    }

    /// 👀 or 🤷 on the user's message; a failure counts as a `sending` error (a reaction
    /// is no message, so a success counts as none).
    async fn react(&self, to: SendTarget<'_>, reaction: Reaction) -> ChannelResult {
        let result = outbound::react(&self.api, to, reaction).await;
        if result.is_err() {
            self.telemetry.error(Stage::Sending);
        }
        result
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let result = outbound::send_file(&self.api, to, file).await;
        self.telemetry.sending(result)
    }

    /// Downloads a photo or document by its `file_id` (`getFile`, then the file path),
    /// refusing more than `max_bytes` or [`MAX_DOWNLOAD_BYTES`](crate::MAX_DOWNLOAD_BYTES),
    /// whichever is smaller. A failure counts as a `processing` error: the message
    /// arrived, its attachment did not.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let result = self.api.fetch(file, max_bytes).await;
        if let Err(error) = &result {
            self.telemetry.error(Stage::Processing);
            tracing::debug!(%error, "Fetching a Telegram attachment failed.");
        }
        result
    }
}
