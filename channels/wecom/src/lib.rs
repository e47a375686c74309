//! The WeCom (企业微信) adapter (issue 31, spec platforms.md §9): the intelligent bot
//! (智能机器人) over its long connection.
//!
//! Built in pieces, each tested on its own (the README says more):
//!
//! - `config`: the `channels.wecom` block (public: the daemon's tests build settings).
//! - `model`: every frame of the long connection, each type round-tripped against
//!   `tests/fixtures/`.
//! - `error`: WeCom's `errcode`s sorted once onto the kit's errors.
//! - `inbound`: message callbacks to normalized messages; its child `media` decrypts the
//!   files a callback points at.
//! - `markup`: the markdown the agent's Markdown is rendered in ([`WeComMarkdown`]).
//! - `api`: the commands sent on the long connection and `Link`, the handle to the
//!   current connection they go through (answers by `req_id`, replies bound to the
//!   connection their callback came on, chunked uploads); the only place the Secret goes
//!   on the wire.
//! - `transport`: the long connection (`transport/ws`): subscribe, pings, answers,
//!   callbacks, a replaced connection, reconnects through the core's driver.
//! - `channel`: the [`WeComChannel`] over these pieces, registered as [`PLATFORM`].
//! - `doctor`: the pre-flight check of `im-bridge doctor` (a subscribe round trip).
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
mod transport;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "wecom";

pub use channel::WeComChannel;
pub use markup::WeComMarkdown;

use std::sync::Arc;

use im_bridge_channel::Adapter;

/// The registry entry: `channels.wecom`.
pub const PLATFORM: Adapter<config::WeComSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(WeComChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};
