//! How updates arrive: long polling (`poll`) or a webhook (`webhook`), both feeding one
//! [`Intake`].
//!
//! The [`Intake`] is what the channel shares with its transports (and the webhook host
//! keeps while a request runs): the API client, the telemetry, who may talk to the bot, the
//! daemon's commands, the bot's username once `getMe` named it, and the webhook secret. Its
//! [`accept`](Intake::accept) is the one update path of both transports: a decoded update
//! is normalized (`inbound`, pure) into a message to admit, or skipped with a debug line.
//!
//! An album (media group) arrives as one update per photo or document; both transports
//! gather its parts into one message (`inbound::join`) for [`ALBUM_WINDOW`] after the
//! latest part, each in the way its acknowledgement allows (see `poll` and `webhook`).
//!
//! Children:
//! - `poll` — `deleteWebhook`, then `getUpdates` long polls with offset acknowledgement
//!   and backpressure (child `backlog`: the updates polled and not yet acknowledged);
//! - `webhook` — a route on the daemon's shared webhook host Telegram posts updates to,
//!   guarded by the secret token;
//! - `album` — the webhook's open albums, bounded;
//! - `retry` — the one backoff and retry loop every Bot API call of the transports uses.
//!
//! Polling is no long connection (each `getUpdates` is a call of its own), so it is not
//! driven by the core's `Reconnect`: a failed call is retried by `retry`, with Telegram's
//! `retry_after` honoured.

mod album;
mod poll;
mod retry;
mod webhook;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use im_bridge_channel::{
    AllowedUsers, ChannelExit, ChannelResult, CommandVocabulary, InboundMessage, InboundSink,
    Secret, Stage, Telemetry, WebhookRoute,
};
use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::config::Transport;
use crate::inbound::{self, AlbumKey, InboundContext, Normalized};
use crate::model::{Update, User};

/// How long an album waits for its next part after the latest one. Telegram hands a
/// client's album to the bot as consecutive updates, well within a second of each other.
pub(crate) const ALBUM_WINDOW: Duration = Duration::from_secs(1);

/// An update turned into a message to admit.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// The message.
    pub(crate) msg: InboundMessage,
    /// The album it is a part of, whose other parts it is to be gathered with.
    pub(crate) album: Option<AlbumKey>,
}

/// What turns an update into an admitted message: shared by the channel, both transports
/// and the webhook handler.
pub(crate) struct Intake {
    /// The Bot API client (`getMe`, `deleteWebhook`, `getUpdates`, `setWebhook`).
    pub(crate) api: Api,
    /// The adapter telemetry contract; its connection state is whether the last poll (or
    /// the webhook registration) succeeded.
    pub(crate) telemetry: Telemetry,
    allowed_users: AllowedUsers,
    /// The daemon's commands, to classify messages with.
    commands: CommandVocabulary,
    /// The bot's username from `getMe`, once known.
    bot_username: RwLock<Option<String>>,
    /// Expected in every webhook request's secret-token header (webhook mode only).
    webhook_secret: Option<Secret>,
}

impl Intake {
    /// The intake of a channel that has not identified its bot yet.
    pub(crate) fn new(
        api: Api,
        telemetry: Telemetry,
        allowed_users: AllowedUsers,
        commands: CommandVocabulary,
        webhook_secret: Option<Secret>,
    ) -> Self {
        Self {
            api,
            telemetry,
            allowed_users,
            commands,
            bot_username: RwLock::new(None),
            webhook_secret,
        }
    }

    /// The bot's username, once `getMe` answered.
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

    /// `getMe`, retried until it succeeds, and the username it gives remembered (to
    /// recognise `/cmd@ThisBot`); `None` when shutdown came first.
    pub(crate) async fn identify(
        &self,
        shutdown: &CancellationToken,
    ) -> ChannelResult<Option<User>> {
        let me = retry::until_ok(self, shutdown, "getMe", || self.api.get_me());
        let me = me.await?;
        if let Some(me) = &me {
            self.set_bot_username(me.username.clone());
        }
        Ok(me)
    }

    /// Joins a later part of an album into the album's message.
    fn join(&self, album: &mut InboundMessage, part: InboundMessage) {
        inbound::join(album, part, &self.commands);
    }

    /// The one update path of both transports: a decoded (or undecodable) update becomes a
    /// message to admit, or is skipped with a debug line. An undecodable update counts as a
    /// `processing` error and is skipped too: redelivering it cannot help. Logs carry the
    /// update id and serde's error class, never the update's text.
    fn accept(
        &self,
        update_id: i64,
        update: Result<Update, serde_json::Error>,
    ) -> Option<Accepted> {
        let update = match update {
            Ok(update) => update,
            Err(error) => {
                self.telemetry.error(Stage::Processing);
                tracing::warn!(update_id, error = ?error.classify(), "Skipped a Telegram update that could not be read.");
                return None;
            }
        };
        let username = self.bot_username();
        let context = InboundContext {
            bot_username: username.as_deref(),
            allowed_users: &self.allowed_users,
            commands: &self.commands,
        };
        match inbound::normalize(&update, &context) {
            Normalized::Message(msg) => Some(Accepted {
                msg: *msg,
                album: inbound::album_key(&update),
            }),
            Normalized::Skipped(reason) => {
                tracing::debug!(
                    update_id,
                    reason = reason.as_str(),
                    "Skipped a Telegram update."
                );
                None
            }
        }
    }
}

/// Receives updates as `transport` says until `shutdown`, admitting messages through
/// `sink`; the channel reports disconnected afterwards.
pub(crate) async fn run(
    intake: &Arc<Intake>,
    transport: &Transport,
    route: Option<&WebhookRoute>,
    sink: InboundSink,
    shutdown: &CancellationToken,
) -> ChannelResult<ChannelExit> {
    let exit = match transport {
        Transport::Polling { timeout } => poll::run(intake, &sink, shutdown, *timeout).await,
        Transport::Webhook(hook) => {
            let route = WebhookRoute::required(route)?;
            webhook::run(intake, hook, route, sink, shutdown).await
        }
    };
    intake.telemetry.set_connected(false);
    exit
}
