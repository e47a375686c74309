//! The QQ channel: the op-code gateway (or the signed webhook) in, passive replies out.
//!
//! - **In**: each `GROUP_AT_MESSAGE_CREATE` / `C2C_MESSAGE_CREATE` is normalized and, unless
//!   this replica saw its event or message id already (QQ pushes duplicates), offered to
//!   the daemon's queue; its ids are remembered once the daemon took it (admitted, or
//!   refused with the sender told), so an event turned away as overloaded passes when QQ
//!   delivers it again. A message whose reply window has already closed is dropped with a
//!   log line and [`EXPIRED_METRIC`]: no answer could reach the chat.
//! - **Out**: final-only. Every reply is a passive reply to its source message; the
//!   delivery engine enforces the window (5 minutes in groups, an hour in C2C) and the 5
//!   replies per source from [`CAPABILITIES`]`.reply_window`, and this adapter numbers
//!   them (`msg_seq`, taken before each attempt and never reused). An answer that would
//!   outlive its window is handed off by the daemon ([`LateReplies::NextMessage`]): what
//!   is written goes out in time, the rest as the first reply to the chat's next message. The agent's Markdown
//!   is sent as readable text (QQ's markdown needs permissions a bot rarely has), at most
//!   4000 UTF-8 bytes a message.
//!
//! How events arrive is `crate::transport`'s: the gateway calls [`EventHandler`] and the
//! webhook [`Admit`], both implemented here over one intake.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use im_bridge_channel::render::PlainText;
use im_bridge_channel::{
    AdmitError, AllowedUsers, BuildContext, Capabilities, Channel, ChannelError, ChannelExit,
    ChannelIdentity, ChannelResult, CommandVocabulary, InboundFile, InboundSink, LateReplies,
    LengthUnit, ReplyWindow, SendTarget, SentMessage, Stage, Telemetry, WebhookRoute, fetch_handle,
    transport_ended,
};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::api::{
    Api, C2C_WINDOW, GROUP_WINDOW, MAX_REPLIES, MAX_REPLY_BYTES, ReplyBook, Target, keyed_seq,
};
use crate::config::{QqSettings, Transport};
use crate::inbound::BAD_TIMESTAMP;
use crate::inbound::{InboundContext, Seen, normalize};
use crate::transport::ws::{self, Dispatch, Dropped, EventHandler, GatewaySettings, Ready};
use crate::transport::{Admit, Offered, webhook};
use im_bridge_channel::Skip;

/// Counter of messages dropped because their reply window had closed before they were
/// admitted, by `channel`.
pub const EXPIRED_METRIC: &str = "im_bridge_inbound_expired_total";
/// Event and message ids remembered against duplicate pushes.
const SEEN_CAPACITY: usize = 4096;
/// How long they are remembered (past the longest reply window, nothing can be answered).
const SEEN_TTL: Duration = Duration::from_secs(60 * 60);

/// What QQ can show: finals only, as passive replies within the source's window and
/// budget, in plain text of at most 4000 bytes.
pub const CAPABILITIES: Capabilities = Capabilities {
    length_unit: LengthUnit::Bytes,
    reply_window: Some(ReplyWindow {
        group: GROUP_WINDOW,
        private: C2C_WINDOW,
        max_replies_per_source: MAX_REPLIES,
        // No proactive messages since 2025-04-21 (api::reply): an answer that outlives its
        // source's window is finished as the first reply to the chat's next message.
        late: LateReplies::NextMessage,
        // QQ drops a second reply under one `msg_seq`, and counts it once.
        repeats_shown_once: true,
    }),
    markup: &PlainText,
    ..Capabilities::final_only(MAX_REPLY_BYTES)
};

/// The QQ channel.
pub struct QqChannel {
    identity: ChannelIdentity,
    settings: QqSettings,
    api: Api,
    intake: Arc<Intake>,
    /// The webhook route on the daemon's shared host (webhook mode only).
    route: Option<WebhookRoute>,
    /// Each source message's `msg_seq` and reply count.
    replies: Mutex<ReplyBook>,
}

impl std::fmt::Debug for QqChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QqChannel")
            .field("app_id", &self.settings.app_id)
            .field("api_url", &self.settings.api_url)
            .finish_non_exhaustive()
    }
}

/// What admits events: shared by the gateway and the webhook handler.
struct Intake {
    app_id: String,
    allowed_users: AllowedUsers,
    commands: CommandVocabulary,
    telemetry: Telemetry,
    /// The bot's user id, once READY named it (its mentions are stripped).
    bot_id: Mutex<Option<String>>,
    seen: Mutex<Seen>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl QqChannel {
    /// A channel with `settings`, the daemon's commands and who may talk to it.
    pub fn new(settings: QqSettings, ctx: &BuildContext) -> ChannelResult<Self> {
        let api = Api::from_settings(&settings).map_err(ChannelError::from)?;
        let telemetry = Telemetry::new(NAME);
        let route = match &settings.transport {
            Transport::Webhook(place) => Some(ctx.webhooks.route_place(&telemetry, place)?),
            Transport::Websocket => None,
        };
        Ok(Self {
            identity: ChannelIdentity::new(&telemetry, CAPABILITIES),
            intake: Arc::new(Intake {
                app_id: settings.app_id.clone(),
                allowed_users: ctx.allowed_users.clone(),
                commands: ctx.commands.clone(),
                telemetry,
                bot_id: Mutex::new(None),
                seen: Mutex::new(Seen::new(SEEN_CAPACITY, SEEN_TTL)),
            }),
            settings,
            api,
            route,
            replies: Mutex::new(ReplyBook::new()),
        })
    }
}

impl Admit for Intake {
    /// Normalizes an event and offers it to the daemon's queue.
    fn offer(&self, sink: &InboundSink, kind: &str, id: Option<&str>, data: &Value) -> Offered {
        let bot_id = lock(&self.bot_id).clone();
        let ctx = InboundContext {
            app_id: &self.app_id,
            bot_id: bot_id.as_deref(),
            allowed_users: &self.allowed_users,
            commands: &self.commands,
            now: SystemTime::now(),
        };
        let msg = match normalize(kind, id, data, &ctx) {
            Ok(msg) => msg,
            Err(Skip::Expired) => {
                metrics::counter!(EXPIRED_METRIC, "channel" => NAME).increment(1);
                tracing::warn!(
                    channel = NAME,
                    "Dropped a QQ message whose reply window had already closed."
                );
                return Offered::Done;
            }
            Err(skip) => {
                if matches!(skip, Skip::Malformed | BAD_TIMESTAMP) {
                    self.telemetry.error(Stage::Processing);
                }
                skip.log(NAME);
                return Offered::Done;
            }
        };
        let message_id = msg.thread_ts.clone();
        let message_id = message_id.as_ref().map_or("", |m| m.as_str());
        // Held across the offer (it does not wait), so a redelivery racing this one is
        // either admitted by it or skipped after it, never both.
        let mut seen = lock(&self.seen);
        let now = Instant::now();
        if seen.contains(id, message_id, now) {
            tracing::debug!(channel = NAME, "Skipped a QQ event pushed twice.");
            return Offered::Done;
        }
        match sink.offer(msg) {
            // Refused as too busy, the sender is told so: nothing to redeliver either.
            Ok(()) | Err(AdmitError::QueueFull) => {
                seen.remember(id, message_id, now);
                Offered::Done
            }
            // Not remembered: QQ delivers it again, and then it must pass.
            Err(error) => {
                tracing::warn!(channel = NAME, %error, "A QQ event was not admitted; QQ may deliver it again.");
                Offered::Again
            }
        }
    }
}

/// Admits each gateway event.
struct GatewayIntake<'a> {
    intake: &'a Intake,
    sink: &'a InboundSink,
}

impl EventHandler for GatewayIntake<'_> {
    fn ready(&mut self, ready: &Ready) {
        *lock(&self.intake.bot_id) = Some(ready.bot_id.clone());
        self.intake.telemetry.set_connected(true);
    }

    fn resumed(&mut self) {
        self.intake.telemetry.set_connected(true);
    }

    fn event(&mut self, event: Dispatch) -> Offered {
        self.intake.telemetry.received(1);
        self.intake
            .offer(self.sink, &event.kind, event.id.as_deref(), &event.data)
    }

    fn dropped(&mut self, _: Dropped) {
        self.intake.telemetry.error(Stage::Receiving);
    }

    fn disconnected(&mut self) {
        self.intake.telemetry.set_connected(false);
    }
}

/// When the source of `to` was sent (now, if the reply does not say).
fn source_time(to: &SendTarget<'_>) -> SystemTime {
    to.source_at
        .filter(|at| at.is_finite() && *at >= 0.0)
        .and_then(|at| UNIX_EPOCH.checked_add(Duration::from_secs_f64(at)))
        .unwrap_or_else(SystemTime::now)
}

#[async_trait]
impl Channel for QqChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        match &self.settings.transport {
            Transport::Websocket => {
                let mut admit = GatewayIntake {
                    intake: &self.intake,
                    sink: &sink,
                };
                let reconnect = self.intake.telemetry.reconnect(ws::RECONNECT_BACKOFF);
                let result = ws::run(
                    &self.api,
                    &GatewaySettings::default(),
                    &mut admit,
                    reconnect,
                    &shutdown,
                )
                .await;
                transport_ended(&self.intake.telemetry, result)
            }
            Transport::Webhook(_) => {
                let route = WebhookRoute::required(self.route.as_ref())?;
                let key = webhook::key(&self.settings)?;
                let telemetry = self.intake.telemetry.clone();
                let intake = self.intake.clone();
                Ok(webhook::run(intake, telemetry, key, route, sink, &shutdown).await)
            }
        }
    }

    /// A passive reply to the source message (QQ has no other kind since 2025-04).
    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let Some(source) = to.reply_to else {
            return Err(ChannelError::Unsupported(
                "a message that answers no source message",
            ));
        };
        let target = Target::from_chat_id(to.chat_id).map_err(ChannelError::from)?;
        let context = lock(&self.replies).context(
            target,
            source.clone(),
            source_time(&to),
            SystemTime::now(),
        );
        let mut context = context.lock().await;
        let keyed = to.hints.send_key_hash().map(keyed_seq);
        let sent = self.api.reply(&mut context, text, keyed).await;
        let sent = self
            .intake
            .telemetry
            .sending(sent.map_err(ChannelError::from))?;
        Ok(SentMessage { id: sent.id })
    }

    /// Downloads an image a user sent (QQ's attachment URLs carry their own signature).
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let download = |url| self.api.download(url, max_bytes);
        fetch_handle(&self.intake.telemetry, file, max_bytes, download).await
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use im_bridge_channel::{InboundMessage, REFUSALS_CAPACITY, inbound_queue};
    use im_bridge_fakes::qq::{Event, rfc3339};

    use super::*;

    fn intake() -> Intake {
        Intake {
            app_id: "app".into(),
            allowed_users: AllowedUsers::default(),
            commands: CommandVocabulary::default(),
            telemetry: Telemetry::new("qq-test"),
            bot_id: Mutex::new(None),
            seen: Mutex::new(Seen::new(SEEN_CAPACITY, SEEN_TTL)),
        }
    }

    #[tokio::test]
    async fn an_event_turned_away_as_overloaded_is_taken_when_qq_delivers_it_again() {
        let intake = intake();
        let (sink, mut queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
        // The queue is full, and so is the side channel telling senders "too busy".
        sink.offer(InboundMessage::new(NAME, "c", "u", "filler"))
            .unwrap();
        for _ in 0..REFUSALS_CAPACITY {
            let told = sink.offer(InboundMessage::new(NAME, "c", "u", "told"));
            assert_eq!(told, Err(AdmitError::QueueFull));
        }
        let event = Event::c2c("U1", "hello").with_timestamp(&rfc3339(SystemTime::now()));
        let payload = event.payload(None);
        let offer = || intake.offer(&sink, event.kind(), Some(event.event_id()), &payload["d"]);
        assert_eq!(offer(), Offered::Again, "the webhook answers 503");
        assert_eq!(queue.recv().await.unwrap().text, "filler");
        // QQ delivers it again: admitted this time.
        assert_eq!(offer(), Offered::Done);
        assert_eq!(queue.len(), 1, "the redelivery was admitted");
        assert_eq!(queue.recv().await.unwrap().text, "hello");
        // Once admitted, a duplicate push is skipped.
        assert_eq!(offer(), Offered::Done);
        assert_eq!(queue.len(), 0, "the duplicate was skipped");
    }
}
