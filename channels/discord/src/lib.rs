//! The Discord adapter (issue 18, spec platforms.md §7), on the adapter skeleton
//! (`docs/adapter-spec.md`) and serenity's gateway:
//!
//! - `config`: the `channels.discord` block, raw and resolved (pure `validate`).
//! - `model`: the REST wire types the adapter reads and writes, each round-tripped against
//!   `tests/fixtures/` (serenity's `Message` is the one gateway type it takes).
//! - `api` (+ `error`): the REST calls (thin reqwest calls to `{api_url}/api/v10`, the
//!   only place the token goes on the wire besides serenity's shard), 429s as
//!   `ChannelError::RetryAfter`, bounded attachment downloads.
//! - `inbound`: MESSAGE_CREATE to normalized messages (mentions, `mention_only`,
//!   `allowed_channels`, `allowed_guilds`, threads), pure.
//! - `transport`: `ws`, serenity's shard with a raw event handler forwarding READY and
//!   user messages; resume at `resume_gateway_url`; fatal close codes; serenity's
//!   reconnects paced by the shared `Reconnect` policy.
//! - `channel`: the [`DiscordChannel`] over these pieces, registered as [`PLATFORM`].
//! - `doctor`: the pre-flight check of `im-bridge doctor` (`GET /users/@me`).
//!
//! Public: `config` (the daemon's tests build settings), `error` and `inbound` (the fuzz
//! target's types), `fuzzing` (feature `fuzzing`), and the items below.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod api;
mod channel;
pub mod config;
mod doctor;
pub mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod inbound;
mod model;
mod transport;

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
