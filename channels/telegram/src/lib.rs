//! The Telegram adapter: [`TelegramChannel`] implements [`Channel`] over the Bot API.
//!
//! Layout (the adapter skeleton, STYLE habit 4):
//! - `config` — raw `channels.telegram` keys and their pure validation;
//! - `model` — the Bot API payload types used, each round-tripped against a fixture;
//! - `api` — a thin HTTP client, the only place the bot token is put on the wire;
//! - `inbound` — update → [`InboundMessage`](im_bridge_channel::InboundMessage)
//!   normalization (pure), plus the polling and webhook transports and the download of
//!   inbound attachments;
//! - `markup` — Telegram's HTML parse mode, the markup the agent's Markdown is rendered
//!   in ([`TelegramHtml`]);
//! - `outbound` — the send/edit/upload primitives;
//! - `doctor` — the read-only pre-flight checks of `im-bridge doctor`;
//! - `error` — Bot API failures and their mapping onto [`ChannelError`].
//!
//! Client choice: a thin `reqwest` client over the ten Bot API methods used, rather than
//! `teloxide-core` 0.13. teloxide-core was evaluated (rust-version 1.82, about 35 s of its
//! own build plus ~25 extra crates on 2 cores) and would work, but it fights this project
//! in small ways that add up: its `Bot` derives `Debug` with the token inside (any `{:?}`
//! of a holder leaks it); one client-wide timeout serves both 30 s long polls and sends;
//! its large, strict message model would replace our fixture-tested wire types with a
//! third party's; and the daemon already carries `reqwest` with rustls. Here the token
//! lives in one [`Secret`], errors drop the URL, redirects are not followed, and each call
//! has its own timeout.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod api;
pub mod config;
mod doctor;
mod error;
pub mod inbound;
pub mod markup;
pub mod model;
mod outbound;

use std::sync::RwLock;
use std::time::Duration;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use im_bridge_channel::{
    Adapter, AllowedUsers, BuildContext, Capabilities, Channel, ChannelError, ChannelExit,
    ChannelResult, ChatBudget, CommandMenu, CommandVocabulary, InboundFile, InboundSink,
    LengthUnit, MenuEntry, MessageId, OutboundFile, Secret, SendTarget, SentMessage, Stage,
    Telemetry, UpdateMode, WebhookLimits, WebhookRoute,
};
use tokio_util::sync::CancellationToken;

pub use config::{RawTelegramConfig, RawWebhook, TelegramSettings, Transport, WebhookSettings};
pub use error::TelegramError;
pub use inbound::files::MAX_DOWNLOAD_BYTES;
pub use markup::TelegramHtml;

use api::Api;
use inbound::{InboundContext, Normalized};
use model::{BotCommand, SetMyCommands, Update};

/// The provider key of this channel.
pub const NAME: &str = "telegram";

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
    // 20 per minute per group.
    chat_budget: Some(ChatBudget {
        burst: 3,
        private: Duration::from_secs(1),
        group: Duration::from_secs(3),
        // An answer that is complete within this costs one write, not a stream start and
        // its finish.
        first_partial_hold: Duration::from_millis(300),
    }),
    reply_window: None,
    serialize_conversations: false,
    working_placeholder: true,
    typing_refresh: None,
    // The agent's Markdown is rendered into Telegram's HTML subset.
    markup: &TelegramHtml,
    // Photos up to 10 MB go as photos, everything up to 50 MB as a document.
    max_upload_bytes: outbound::MAX_DOCUMENT_BYTES,
    turn_ends: false,
};

/// The registry entry: `channels.telegram`.
pub const PLATFORM: Adapter<TelegramSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(TelegramChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};

/// State shared by the transports and the primitives.
pub(crate) struct Shared {
    pub(crate) api: Api,
    pub(crate) allowed_users: AllowedUsers,
    /// The daemon's commands, to classify messages with.
    pub(crate) commands: CommandVocabulary,
    /// The adapter telemetry contract; its connection state is whether the last poll (or
    /// the webhook registration) succeeded.
    pub(crate) telemetry: Telemetry,
    /// The bot's username from `getMe`, once known.
    bot_username: RwLock<Option<String>>,
    /// Expected in every webhook request's secret-token header (webhook mode only).
    pub(crate) webhook_secret: Option<Secret>,
}

impl Shared {
    pub(crate) fn bot_username(&self) -> Option<String> {
        self.bot_username
            .read()
            .map(|u| u.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    fn set_bot_username(&self, username: Option<String>) {
        match self.bot_username.write() {
            Ok(mut slot) => *slot = username,
            Err(poisoned) => *poisoned.into_inner() = username,
        }
    }

    pub(crate) fn normalize(&self, update: &Update) -> Normalized {
        let username = self.bot_username();
        inbound::normalize(
            update,
            &InboundContext {
                bot_username: username.as_deref(),
                allowed_users: &self.allowed_users,
                commands: &self.commands,
            },
        )
    }
}

/// The Telegram channel.
pub struct TelegramChannel {
    shared: Arc<Shared>,
    settings: TelegramSettings,
    menu: CommandMenu,
    /// The webhook route on the daemon's shared host (webhook mode only).
    route: Option<WebhookRoute>,
}

impl std::fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("settings", &self.settings)
            .field("connected", &self.shared.telemetry.is_connected())
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
        Ok(Self {
            shared: Arc::new(Shared {
                api,
                allowed_users: ctx.allowed_users.clone(),
                commands: ctx.commands.clone(),
                telemetry,
                bot_username: RwLock::new(None),
                webhook_secret,
            }),
            settings,
            menu: ctx.menu.clone(),
            route,
        })
    }

    /// The bot's username, once `getMe` answered.
    pub fn bot_username(&self) -> Option<String> {
        self.shared.bot_username()
    }

    /// The settings this channel runs with.
    pub fn settings(&self) -> &TelegramSettings {
        &self.settings
    }

    /// `getMe`, retried until it succeeds; `None` when shutdown came first.
    async fn identify(&self, shutdown: &CancellationToken) -> ChannelResult<Option<model::User>> {
        inbound::retry::until_ok(&self.shared, shutdown, "getMe", || self.shared.api.get_me()).await
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
                r = self.shared.api.set_my_commands(&params) => r,
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
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn is_connected(&self) -> bool {
        self.shared.telemetry.is_connected()
    }

    /// Long polling admits one poller per bot; a webhook serves every replica.
    fn exclusive_transport(&self) -> bool {
        matches!(self.settings.transport, Transport::Polling { .. })
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let Some(me) = self.identify(&shutdown).await? else {
            return Ok(ChannelExit::Stopped);
        };
        tracing::info!(
            bot_id = me.id,
            username = me.username.as_deref().unwrap_or(""),
            "Identified the Telegram bot."
        );
        self.shared.set_bot_username(me.username);
        self.publish_menu(&shutdown).await;
        let exit = match &self.settings.transport {
            Transport::Polling { timeout } => {
                inbound::polling::run(&self.shared, &sink, &shutdown, *timeout).await
            }
            Transport::Webhook(hook) => match &self.route {
                Some(route) => {
                    inbound::webhook::run(&self.shared, hook, route, sink, &shutdown).await
                }
                None => Err(ChannelError::Unsupported("a webhook without its route")),
            },
        };
        self.shared.telemetry.set_connected(false);
        exit
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let result = outbound::send_text(&self.shared.api, to, text).await;
        self.shared.telemetry.sending(result)
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let result = outbound::edit_text(&self.shared.api, to, id, text).await;
        self.shared.telemetry.sending(result)
    }

    /// "Typing…" while the agent works; a failure counts as a `sending` error and is
    /// otherwise ignored (it is only a hint).
    async fn show_typing(&self, to: SendTarget<'_>) -> ChannelResult {
        let result = outbound::show_typing(&self.shared.api, to).await;
        if result.is_err() {
            self.shared.telemetry.error(Stage::Sending);
        }
        result
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let result = outbound::send_file(&self.shared.api, to, file).await;
        self.shared.telemetry.sending(result)
    }

    /// Downloads a photo or document by its `file_id` (`getFile`, then the file path),
    /// refusing more than `max_bytes` or [`MAX_DOWNLOAD_BYTES`], whichever is smaller. A
    /// failure counts as a `processing` error: the message arrived, its attachment did not.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let result = inbound::files::fetch(&self.shared.api, file, max_bytes).await;
        if let Err(error) = &result {
            self.shared.telemetry.error(Stage::Processing);
            tracing::debug!(%error, "Fetching a Telegram attachment failed.");
        }
        result
    }
}
