//! The Slack adapter (issue 30, spec platforms.md §8), on the adapter skeleton
//! (`docs/adapter-spec.md`). This first step holds its pure parts; the network parts (the
//! Web API client `api`, Socket Mode `transport/ws`, the Events API route's handler, the
//! `channel` and `doctor`) come next:
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
//! - `transport`: `webhook`, the Events API request check (`X-Slack-Signature` v0) and
//!   the reading of a signed body.
//! - `fuzzing` (feature `fuzzing`): the fuzz targets' entry points.
//!
//! Public: `config` (the daemon's tests build settings), `error`, `inbound`, `model` and
//! `transport` (the fuzz target's types and the coming transports), and the items below.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
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

pub use markup::{DEFAULT_MESSAGE_CHARS, MAX_MESSAGE_CHARS, SlackMrkdwn};
