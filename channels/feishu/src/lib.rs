//! The Feishu / Lark adapter (issue 15, spec platforms.md §4): the long connection or the
//! event webhook in, streaming interactive cards out.
//!
//! Built in pieces, each tested on its own:
//!
//! - `frame`: the long connection's binary `pbbp2.Frame` (prost), its headers, and the
//!   reassembly of payloads split into `sum` parts (bounded in time and memory).
//! - `ws`: the long connection: endpoint discovery at `{domain}/callback/ws/endpoint`, the
//!   WebSocket, ping/pong with the server's `ClientConfig`, the ack of every data frame
//!   before its event is handled, reconnects with the shared jittered backoff
//!   (`im_bridge_channel::Reconnect`, counted and logged there) with the server's timers
//!   as a floor, and the handshake refusals.
//! - `webhook`: the event webhook's URL verification, token check, AES-256-CBC decryption
//!   and signature check (the signed timestamp's freshness is the core's `Freshness`,
//!   checked in `channel/hook.rs`).
//! - `markup`: the card markdown the agent's Markdown is rendered in ([`FeishuCard`]).
//! - `card`: interactive message cards (`update_multi`), split at the card size limit.
//! - `config`: the `channels.feishu` block.
//! - `token` (+ `api`, `error`): the `tenant_access_token` and the REST calls: cards,
//!   reactions, resource downloads, image and file uploads.
//! - `inbound`: `im.message.receive_v1` events to normalized messages.
//! - `channel`: the [`FeishuChannel`] over these pieces, registered with the daemon as
//!   [`PLATFORM`] (`channels.feishu`, the default `feishu` feature).
//! - `doctor`: the pre-flight checks of `im-bridge doctor` (a token request).
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod card;
mod channel;
pub mod config;
mod doctor;
pub mod error;
pub mod frame;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod inbound;
pub mod markup;
pub mod token;
pub mod webhook;
pub mod ws;

pub use channel::{CAPABILITIES, FeishuChannel, MAX_CARD_TEXT_BYTES};
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
