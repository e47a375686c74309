//! The DingTalk adapter (issue 16, spec platforms.md §5).
//!
//! Built in pieces, each tested on its own:
//!
//! - `config`: the `channels.dingtalk` block.
//! - `token`: the `accessToken` every REST call carries (the core's cache, DingTalk's
//!   request).
//! - `stream`: stream mode: `connections/open` for an endpoint and a one-time ticket, the
//!   WebSocket of JSON frames, the ack of every frame before its event is handled, the
//!   SYSTEM `ping` and `disconnect`, reconnects with backoff and jitter.
//! - `inbound`: robot messages (`ChatbotMessage`) to normalized messages.
//! - `markup`: the `sampleMarkdown` the agent's Markdown is rendered in
//!   ([`DingTalkMarkdown`]).
//! - `api` (with `error`): the REST calls: robot messages to groups and users, file
//!   download and upload, AI-card create-and-deliver and streaming.
//!
//! - `channel`: the [`DingTalkChannel`] over these pieces, registered as
//!   [`PLATFORM`].
//! - `doctor`: the pre-flight check of `im-bridge doctor` (a token request).
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
pub mod inbound;
pub mod markup;
pub mod stream;
pub mod token;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "dingtalk";

pub use channel::{DingTalkChannel, capabilities};
pub use markup::DingTalkMarkdown;

use std::sync::Arc;

use im_bridge_channel::Adapter;

/// The registry entry: `channels.dingtalk`.
pub const PLATFORM: Adapter<config::DingTalkSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(DingTalkChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};
