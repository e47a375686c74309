//! The WeChat adapter (issue 32): personal WeChat through Tencent's iLink bot API — a
//! bot token from a QR login, `getupdates` long polling, replies tied to each message's
//! context token, media through the AES-128-ECB encrypted CDN.
//!
//! Built in pieces, each tested on its own (the README says more):
//!
//! - `config`: the `channels.wechat` block (public: the daemon's tests build settings).
//! - `model`: every body read or written, each round-tripped against `tests/fixtures/`.
//! - `error`: iLink's answers sorted once onto the kit's errors (`-14`: an ended session).
//! - `inbound`: polled messages to normalized messages (pure).
//! - `api`: the iLink client and its child `cdn` (the files' encryption); the only place
//!   the bot token goes on the wire.
//! - `token`: where the token comes from: the configuration, the store, or a QR login.
//! - `transport`: the long poll (`transport/poll`), its cursor kept in the store.
//! - `channel`: the [`WechatChannel`] over these pieces, registered as [`PLATFORM`].
//! - `doctor`: the pre-flight check of `im-bridge doctor`.
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
mod model;
mod token;
mod transport;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "wechat";

pub use channel::{ILINK_TEXT_BYTES, MAX_TEXT_BYTES, REPLIES_PER_MESSAGE, WechatChannel};
pub use token::{LOGGED_IN_METRIC, SESSION_EXPIRED_METRIC, TOKEN_KEY};
pub use transport::poll::CURSOR_KEY;

use std::sync::Arc;

use im_bridge_channel::Adapter;

/// The registry entry: `channels.wechat`.
pub const PLATFORM: Adapter<config::WechatSettings> = Adapter {
    name: NAME,
    validate: config::validate,
    build: |settings, ctx| Ok(Arc::new(WechatChannel::new(settings.clone(), ctx)?)),
    doctor: doctor::checks,
};
