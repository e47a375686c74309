//! The Telegram adapter: [`TelegramChannel`] implements
//! [`Channel`](im_bridge_channel::Channel) over the Bot API.
//!
//! Layout (the adapter skeleton, `docs/adapter-spec.md`):
//! - `channel` — the `Channel` impl, [`CAPABILITIES`], and the send/edit/upload primitives
//!   (child `outbound`);
//! - `config` — raw `channels.telegram` keys and their pure validation;
//! - `api` — a thin HTTP client, the only place the bot token is put on the wire
//!   (children `files`: an inbound attachment's bytes; `upload`: multipart uploads);
//! - `error` — Bot API refusals next to the core's `HttpError`, mapped onto `ChannelError`;
//! - `model` — the Bot API payload types used, each round-tripped against a fixture;
//! - `inbound` — update → [`InboundMessage`](im_bridge_channel::InboundMessage)
//!   normalization (pure);
//! - `transport` — how updates arrive: long polling (`poll`) or a webhook (`webhook`),
//!   with the one retry loop of their Bot API calls (`retry`);
//! - `markup` — Telegram's HTML parse mode, the markup the agent's Markdown is rendered
//!   in ([`TelegramHtml`]);
//! - `doctor` — the read-only pre-flight checks of `im-bridge doctor`.
//!
//! Client choice: a thin `reqwest` client over the ten Bot API methods used, rather than
//! `teloxide-core` 0.13. teloxide-core was evaluated (rust-version 1.82, about 35 s of its
//! own build plus ~25 extra crates on 2 cores) and would work, but it fights this project
//! in small ways that add up: its `Bot` derives `Debug` with the token inside (any `{:?}`
//! of a holder leaks it); one client-wide timeout serves both 30 s long polls and sends;
//! its large, strict message model would replace our fixture-tested wire types with a
//! third party's; and the daemon already carries `reqwest` with rustls. Here the token
//! lives in one [`Secret`](im_bridge_channel::Secret), errors drop the URL, redirects are
//! not followed, and each call has its own timeout.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod api;
mod channel;
pub mod config;
mod doctor;
mod error;
pub mod inbound;
mod markup;
pub mod model;
mod transport;

use std::sync::Arc;

use im_bridge_channel::Adapter;

pub use api::MAX_DOWNLOAD_BYTES;
pub use channel::{CAPABILITIES, TelegramChannel};
pub use config::{TelegramSettings, Transport, WebhookSettings};
pub use error::TelegramError;
pub use markup::TelegramHtml;

/// The provider key of this channel.
pub const NAME: &str = "telegram";

/// The registry entry: `channels.telegram`.
pub const PLATFORM: Adapter<TelegramSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(TelegramChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};
