//! The QQ official bot adapter (issue 17, spec platforms.md §6), on the adapter skeleton
//! (`docs/adapter-spec.md`):
//!
//! - `config`: the `channels.qq` block, raw and resolved (pure `validate`).
//! - `model`: every wire type read or written, each round-tripped against
//!   `tests/fixtures/`.
//! - `token`: the app access token, for the core's single-flight cache.
//! - `api` (+ `error`): gateway discovery, the passive-reply endpoints within a source
//!   message's reply budget, attachment downloads; the only place a token goes on the wire
//!   (the gateway's Identify takes it from `api` too).
//! - `inbound`: message events to normalized messages (pure).
//! - `transport`: how events arrive: `ws`, the op-code gateway (a `LongConnection` driven
//!   by the core's `Reconnect::drive`), or `webhook`, the signed callbacks.
//! - `channel`: the [`QqChannel`] over these pieces, registered as [`PLATFORM`].
//! - `doctor`: the pre-flight checks of `im-bridge doctor` (a token request).
//!
//! Public: `config` (the daemon's tests build settings), `inbound` (the fuzz target's
//! context), `fuzzing` (feature `fuzzing`), and the items below.
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
pub mod inbound;
mod model;
mod token;
mod transport;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "qq";

pub use channel::{CAPABILITIES, EXPIRED_METRIC, QqChannel};

use std::sync::Arc;

use im_bridge_channel::Adapter;

/// The registry entry: `channels.qq`.
pub const PLATFORM: Adapter<config::QqSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(QqChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};
