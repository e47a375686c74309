//! The gateway, run by serenity's `ShardManager` (one shard) with a raw event handler that
//! forwards READY (the bot's id) and MESSAGE_CREATE into a channel the adapter reads.
//!
//! - First `GET /users/@me` (the bot's id, forwarded as [`GatewayEvent::Identity`]
//!   before serenity starts), then the URL from our own `GET /gateway/bot` ([`DiscordApi::gateway_url`]), not
//!   serenity's `Client` (which asks `/gateway` and falls back to a hard-coded
//!   `wss://gateway.discord.gg` when that fails). serenity appends `?v=10` (JSON is the
//!   default encoding); a query on the discovered URL is dropped first.
//! - Intents: GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT (privileged: enable
//!   it in the Developer Portal, else Discord closes with 4014).
//! - Heartbeats, RESUME (session id and last sequence) after a dropped socket or op 7, and
//!   a fresh IDENTIFY after op 9 `false`, are serenity's. serenity 0.12.5 connects at the
//!   URL its shards share and never reads READY's `resume_gateway_url`; the gate puts
//!   that URL there for a resume (the shard's runner is alive) and the discovered one for
//!   a new session (a new shard boots), as Discord asks.
//! - serenity reconnects at once and for ever; the `gate` (a child module) holds the
//!   shared URL every connection of serenity's must read first, and lets them through
//!   one at a time, paced, counted and logged by the adapter's [`Reconnect`]: a server
//!   dropping every new connection sees a handful of attempts in 15 s, not hundreds
//!   (issue 27). This is why the gateway is no `LongConnection` driven by
//!   `Reconnect::drive` like the other adapters' long connections: serenity's shard owns
//!   the connect → serve → reconnect loop and exposes no step of it, so the gate applies
//!   the same `Reconnect` policy (waits, counters, rate-limited logs) to the connections
//!   serenity opens.
//! - A missed heartbeat ACK makes serenity restart the shard (a fresh IDENTIFY, not a
//!   RESUME): events of the zombied session are not replayed; the channel reads them
//!   back over REST after the new READY (`channel/backfill.rs`).
//! - On a RESUME serenity 0.12.5 ignores the new connection's HELLO (its `Shard` drops op
//!   10 while resuming, as upstream's later branches do) and heartbeats at the old
//!   connection's interval, from RESUMED. Discord gives the same interval on every
//!   connection in practice; should a new one be shorter, Discord times the connection
//!   out (4009), serenity opens a new session and reads that HELLO, and the read-back
//!   above covers the gap. serenity's shard exposes no hook to do better from here (the
//!   test `after_a_resume_on_a_shorter_heartbeat_the_gateway_heartbeats_at_it`).
//! - 4004 (wrong token), 4013 and 4014 (intents) end [`run`] with a clear
//!   [`GatewayError`]; serenity does not retry them.
//! - Messages by the bot itself or by any other bot are dropped here.
//!
//! serenity's events are delivered by spawned tasks, so two messages arriving together may
//! be forwarded out of order; the adapter dedupes by message id and does not rely on order.
//!
//! Children: `gate`, the reconnect gate over serenity's shared URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::StreamExt;
use im_bridge_channel::Reconnect;
use serenity::async_trait;
use serenity::client::{Context, RawEventHandler};
use serenity::gateway::{GatewayError as SerenityGatewayError, ShardManager, ShardManagerOptions};
use serenity::http::HttpBuilder;
use serenity::model::event::Event;
use serenity::model::gateway::GatewayIntents;
use serenity::model::id::ShardId;
use serenity::prelude::TypeMap;
use tokio::sync::{Mutex, RwLock, mpsc};
use tokio_util::sync::CancellationToken;

use crate::api::DiscordApi;
use crate::config::DiscordSettings;
use crate::error::ApiError;

use crate::model::Message;

mod gate;
#[cfg(test)]
mod tests;

use self::gate::{Gate, PROOFS, Proof, Resuming};

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn the_gateway_base_drops_query_and_slash_and_refuses_other_schemes() {
        assert_eq!(
            gateway_base("wss://gateway.discord.gg/").unwrap(),
            "wss://gateway.discord.gg"
        );
        assert_eq!(
            gateway_base("ws://127.0.0.1:9/gateway?encoding=json&v=9").unwrap(),
            "ws://127.0.0.1:9/gateway"
        );
        assert!(matches!(
            gateway_base("https://discord.com"),
            Err(GatewayError::BadUrl)
        ));
        assert!(matches!(
            gateway_base("not a url"),
            Err(GatewayError::BadUrl)
        ));
    }
}

/// What the gateway hands the adapter.
#[derive(Clone, Debug)]
pub enum GatewayEvent {
    /// Before connecting: the bot's user id from `GET /users/@me`, so mentions are known
    /// before any message (serenity delivers events through spawned tasks, so a message
    /// could overtake READY).
    Identity {
        /// The bot's user id.
        bot_id: u64,
    },
    /// READY: the session is up; the bot's user id (what `<@id>` mentions carry).
    Ready {
        /// The bot's user id.
        bot_id: u64,
    },
    /// RESUMED: a dropped session continues (missed events are replayed before it).
    Resumed,
    /// MESSAGE_CREATE by a user (not a bot, not this bot).
    Message(Box<Message>),
}

/// Why the gateway stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// `GET /gateway/bot` failed.
    #[error("finding the Discord gateway failed: {0}")]
    Discovery(#[source] ApiError),
    /// The discovered URL is not `ws://` or `wss://` with a host.
    #[error("the gateway URL Discord gave is not a ws:// or wss:// URL")]
    BadUrl,
    /// Close code 4004: the token was refused. Fatal.
    #[error("Discord refused the bot token (gateway close 4004): check channels.discord.bot_token")]
    InvalidToken,
    /// Close code 4014: a privileged intent is not enabled for the application. Fatal.
    #[error(
        "Discord refused the intents (gateway close 4014): enable the Message Content intent in the Developer Portal (Bot → Privileged Gateway Intents)"
    )]
    DisallowedIntents,
    /// Close code 4013: invalid intents. Fatal.
    #[error("Discord refused the intents as invalid (gateway close 4013)")]
    InvalidIntents,
    /// serenity could not start its shard.
    #[error("starting the gateway shard failed")]
    Boot,
    /// serenity's shard manager ended without being asked to.
    #[error("the gateway shard manager ended unexpectedly")]
    Ended,
}

/// The intents the adapter identifies with.
pub fn intents() -> GatewayIntents {
    GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT
}

/// The gateway URL serenity is given: `url` without query or fragment (serenity adds
/// `?v=10`), when it is `ws(s)://` with a host.
pub fn gateway_base(url: &str) -> Result<String, GatewayError> {
    let mut parsed = url::Url::parse(url).map_err(|_| GatewayError::BadUrl)?;
    if !matches!(parsed.scheme(), "ws" | "wss") || parsed.host().is_none() {
        return Err(GatewayError::BadUrl);
    }
    parsed.set_query(None);
    parsed.set_fragment(None);
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

/// Whether `message` is a user's: neither the bot's (`bot_id`) nor any other bot's, which
/// are dropped (logged at debug).
pub fn by_a_user(message: &Message, bot_id: u64) -> bool {
    let own = message.author.id.get() == bot_id;
    if message.author.bot || own {
        tracing::debug!(own, "ignored a bot's message");
        return false;
    }
    true
}

/// Forwards serenity's dispatches (and tells the gate what proves a connection).
struct Forward {
    events: mpsc::Sender<GatewayEvent>,
    proofs: mpsc::Sender<Proof>,
    bot_id: AtomicU64,
}

#[async_trait]
impl RawEventHandler for Forward {
    async fn raw_event(&self, _ctx: Context, event: Event) {
        let out = match event {
            Event::Ready(ready) => {
                let ready = ready.ready;
                let bot_id = ready.user.id.get();
                self.bot_id.store(bot_id, Ordering::Release);
                let resume_url = gateway_base(&ready.resume_gateway_url).ok();
                if resume_url.is_none() {
                    tracing::warn!(
                        "READY's resume_gateway_url is not a ws(s) URL; kept the old one"
                    );
                }
                self.prove(Proof::Ready { resume_url }).await;
                tracing::info!(bot_id, "discord gateway ready");
                GatewayEvent::Ready { bot_id }
            }
            Event::Resumed(_) => {
                self.prove(Proof::Resumed).await;
                tracing::info!("discord gateway resumed");
                GatewayEvent::Resumed
            }
            Event::MessageCreate(created) => {
                let message = created.message;
                if !by_a_user(&message, self.bot_id.load(Ordering::Acquire)) {
                    return;
                }
                GatewayEvent::Message(Box::new(message))
            }
            _ => return,
        };
        if self.events.send(out).await.is_err() {
            tracing::debug!("the adapter stopped reading gateway events");
        }
    }
}

impl Forward {
    /// Tells the gate; once `run` has ended nobody listens, which is fine.
    async fn prove(&self, proof: Proof) {
        let _ = self.proofs.send(proof).await;
    }
}

/// Connects and forwards events into `events` until `stop` or a fatal close. Transient
/// trouble (drops, op 7, op 9, 5xx on reconnect) is serenity's to recover from, each new
/// connection no sooner than `reconnect` allows.
pub async fn run(
    settings: &DiscordSettings,
    api: &DiscordApi,
    events: mpsc::Sender<GatewayEvent>,
    reconnect: Reconnect,
    stop: CancellationToken,
) -> Result<(), GatewayError> {
    let bot_id = api
        .current_user_id()
        .await
        .map_err(GatewayError::Discovery)?;
    let url = gateway_base(&api.gateway_url().await.map_err(GatewayError::Discovery)?)?;
    if events
        .send(GatewayEvent::Identity { bot_id })
        .await
        .is_err()
    {
        return Ok(());
    }
    // serenity's REST client is only held by its contexts (the adapter uses
    // `DiscordApi`); it still points at `api_url`, without serenity's ratelimiter (which
    // would ignore the proxy base).
    let http = Arc::new(
        HttpBuilder::new(settings.bot_token.expose())
            .proxy(settings.api_url.clone())
            .ratelimiter_disabled(true)
            .build(),
    );
    let ws_url = Arc::new(Mutex::new(url));
    let (proofs, proven) = mpsc::channel(PROOFS);
    let forward = Arc::new(Forward {
        events,
        proofs,
        bot_id: AtomicU64::new(bot_id),
    });
    let (manager, mut ended) = ShardManager::new(ShardManagerOptions {
        data: Arc::new(RwLock::new(TypeMap::new())),
        event_handlers: Vec::new(),
        raw_event_handlers: vec![forward],
        shard_index: 0,
        shard_init: 1,
        shard_total: 1,
        ws_url: ws_url.clone(),
        http,
        intents: intents(),
        presence: None,
    });
    // The shard's runner is alive while it resumes; a new session boots a new one.
    let runners = manager.runners.clone();
    let resuming: Resuming = Box::new(move || {
        let runners = runners.clone();
        Box::pin(async move { runners.lock().await.contains_key(&ShardId(0)) })
    });
    // Holds the URL before serenity can read it (it reads it first when the shard boots,
    // in `initialize`): its first connection goes through the gate.
    let gate = Gate::new(ws_url, reconnect, proven, resuming).await;
    if manager.initialize().is_err() {
        return Err(GatewayError::Boot);
    }
    let result = tokio::select! {
        ended = ended.next() => match ended {
            Some(Err(error)) => Err(fatal(&error)),
            _ if stop.is_cancelled() => Ok(()),
            _ => Err(GatewayError::Ended),
        },
        () = stop.cancelled() => Ok(()),
        () = gate.run() => Err(GatewayError::Ended),
    };
    // The gate is gone with the select: serenity's shard can take the URL and stop.
    manager.shutdown_all().await;
    result
}

fn fatal(error: &SerenityGatewayError) -> GatewayError {
    match error {
        SerenityGatewayError::InvalidAuthentication => GatewayError::InvalidToken,
        SerenityGatewayError::DisallowedGatewayIntents => GatewayError::DisallowedIntents,
        SerenityGatewayError::InvalidGatewayIntents => GatewayError::InvalidIntents,
        _ => GatewayError::Boot,
    }
}
