//! The DingTalk adapter (issue 16, spec platforms.md §5).
//!
//! Built in pieces, each tested on its own (the README's layout table says more):
//!
//! - `config`: the `channels.dingtalk` block (public: the daemon's tests build settings).
//! - `model`: the JSON DingTalk sends and answers (`ChatbotMessage`, the API answers), each
//!   type round-tripped against `tests/fixtures/`.
//! - `token`: the `accessToken` every REST call carries (the core's cache, DingTalk's
//!   request).
//! - `api` (with `error`, whose child `answer` reads either host's answers): the REST
//!   calls: robot messages to groups and users, file download and upload, AI-card
//!   create-and-deliver and streaming.
//! - `inbound`: robot messages (`ChatbotMessage`) to normalized messages.
//! - `transport`: stream mode (`transport/ws`): `connections/open` for an endpoint and a
//!   one-time ticket, the WebSocket of JSON frames (`transport/ws/frame`), the ack of every
//!   frame before its event is handled, the SYSTEM `ping` and `disconnect`, reconnects
//!   through the core's driver.
//! - `markup`: the `sampleMarkdown` the agent's Markdown is rendered in
//!   ([`DingTalkMarkdown`]).
//! - `channel`: the [`DingTalkChannel`] over these pieces, registered as [`PLATFORM`].
//! - `doctor`: the pre-flight check of `im-bridge doctor` (a token request).
//! - `fuzzing` (feature `fuzzing`): entry points for the fuzz targets.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod api;
mod channel;
pub mod config;
mod doctor;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod inbound;
mod markup;
mod model;
mod token;
mod transport;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "dingtalk";

pub use channel::DingTalkChannel;
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
