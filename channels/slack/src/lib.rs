//! The Slack adapter (issue 30, spec platforms.md §8), on the adapter skeleton
//! (`docs/adapter-spec.md`):
//!
//! - `config`: the `channels.slack` block, raw and resolved (pure `validate`), DeerFlow's
//!   keys (`bot_token`, `app_token`, `bot_user_id`) and ours.
//! - `model`: every wire type read or written (Socket Mode frames, Events API bodies,
//!   slash commands, Web API requests and answers), each round-tripped against
//!   `tests/fixtures/`.
//! - `error`: Slack's `{"ok": false, "error": code}` sorted once onto the kit's
//!   `HttpError` and `ChannelError`.
//! - `inbound`: events and slash commands to normalized messages, pure.
//! - `markup`: the agent's Markdown as Slack `mrkdwn` ([`SlackMrkdwn`]), a renderer
//!   dialect; the core's renderer cuts it into messages.
//! - `api`: the Web API calls (thin reqwest calls on the kit's `http`), the file upload and
//!   the bounded, host-checked file download.
//! - `transport`: `ws`, Socket Mode as a kit `LongConnection` (acks after admission, a
//!   new connection opened before a `disconnect` closes the old one); `webhook`, the
//!   Events API request check (`X-Slack-Signature` v0) and the reading of a signed body.
//! - `channel`: the [`SlackChannel`] over these pieces (and the Events API route's handler),
//!   registered as [`PLATFORM`].
//! - `doctor`: the pre-flight checks of `im-bridge doctor` (`auth.test`,
//!   `apps.connections.open` or the webhook's address).
//! - `fuzzing` (feature `fuzzing`): the fuzz targets' entry points.
//!
//! Public: `config` (the daemon's tests build settings), `error`, `inbound`, `model` and
//! `transport` (the fuzz target's types), and the items below.
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
mod markup;
pub mod model;
pub mod transport;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "slack";

pub use channel::{
    CAPABILITIES, DONE_REACTION, FAILED_REACTION, MAX_UPLOAD_BYTES, SlackChannel, WORKING_REACTION,
};
pub use markup::{DEFAULT_MESSAGE_BYTES, MAX_MESSAGE_BYTES, SlackMrkdwn};

use std::sync::Arc;

use im_bridge_channel::Adapter;

/// The registry entry: `channels.slack`.
pub const PLATFORM: Adapter<config::SlackSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(SlackChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};
