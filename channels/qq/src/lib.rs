//! The QQ official bot adapter (issue 17, spec platforms.md §6).
//!
//! Built in pieces, each tested on its own:
//!
//! - `config`: the `channels.qq` block.
//! - `token`: the app access token, for the core's single-flight cache.
//! - `api` (+ `error`): gateway discovery, the passive-reply endpoints within a source
//!   message's reply budget, attachment downloads.
//! - `gateway`: the op-code WebSocket: Identify or Resume, READY, heartbeats and their
//!   ACKs, op 7 / op 9, close codes, backoff, frame bounds.
//! - `webhook`: webhook mode's ed25519 signatures and the op 13 validation answer.
//! - `inbound`: message events to normalized messages.
//!
//! - `channel`: the [`QqChannel`] over these pieces, registered as [`PLATFORM`].
//! - `doctor`: the pre-flight checks of `im-bridge doctor` (a token request).
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
pub mod token;
pub mod webhook;

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
