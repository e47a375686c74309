//! The Feishu / Lark adapter (issue 15, spec platforms.md §4): the long connection or the
//! event webhook in, streaming interactive cards out.
//!
//! Built in pieces, each tested on its own (the README's layout table says more):
//!
//! - `config`: the `channels.feishu` block (public: the daemon's tests build settings).
//! - `model`: the JSON Feishu sends and answers, each type round-tripped against
//!   `tests/fixtures/`.
//! - `token` (+ `api`, `error`): the `tenant_access_token` and the REST calls: cards
//!   (`api/card`), reactions, resource downloads, image and file uploads.
//! - `inbound`: `im.message.receive_v1` events to normalized messages.
//! - `transport`: how events arrive: the long connection (`transport/ws`, with its binary
//!   `pbbp2.Frame` in `transport/ws/frame`) or the event webhook's checks
//!   (`transport/webhook`).
//! - `markup`: the card markdown the agent's Markdown is rendered in ([`FeishuCard`]).
//! - `channel`: the [`FeishuChannel`] over these pieces, registered with the daemon as
//!   [`PLATFORM`] (`channels.feishu`, the default `feishu` feature).
//! - `doctor`: the pre-flight checks of `im-bridge doctor` (a token request).
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

pub use channel::FeishuChannel;
pub use markup::FeishuCard;

use std::sync::Arc;

use im_bridge_channel::Adapter;

/// The registry entry: `channels.feishu`.
pub const PLATFORM: Adapter<config::FeishuSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(FeishuChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "feishu";
