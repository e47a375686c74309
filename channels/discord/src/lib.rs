//! The Discord adapter (issue 18, spec platforms.md §7), on serenity's gateway.
//!
//! Built in pieces, each tested on its own:
//!
//! - `config`: the `channels.discord` block.
//! - `api` (+ `error`): the REST calls (thin reqwest calls to `{api_url}/api/v10`), 429s
//!   as `ChannelError::RetryAfter`, bounded attachment downloads.
//! - `gateway`: serenity's shard with a raw event handler forwarding READY and user
//!   messages; resume at `resume_gateway_url`; fatal close codes; serenity's reconnects
//!   paced by the shared `Reconnect` policy.
//! - `inbound`: MESSAGE_CREATE to normalized messages (mentions, `mention_only`,
//!   `allowed_channels`, `allowed_guilds`, threads).
//! - `channel`: the [`DiscordChannel`] over these pieces, registered as
//!   [`PLATFORM`].
//! - `doctor`: the pre-flight check of `im-bridge doctor` (`GET /users/@me`).
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
mod channel;
pub mod config;
mod doctor;
pub mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod inbound;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "discord";

pub use channel::{CAPABILITIES, DiscordChannel, MAX_MESSAGE_CHARS, MAX_UPLOAD_BYTES};

use std::sync::Arc;

use im_bridge_channel::Adapter;

/// The registry entry: `channels.discord`.
pub const PLATFORM: Adapter<config::DiscordSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(DiscordChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};
