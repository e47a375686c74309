//! The Feishu / Lark adapter (issue 15, spec platforms.md §4), under construction.
//!
//! Built in pieces, each tested on its own before the channel is registered:
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
//! - `card`: interactive message cards (`update_multi`), split at the card size limit.
//! - `config`: the `channels.feishu` block.
//! - `inbound`: `im.message.receive_v1` events to normalized messages.
//! - `doctor`: the pre-flight checks of `im-bridge doctor` (a token request).
//!
//! Nothing here is registered with the daemon yet: the registry line comes with the
//! channel itself.

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
pub mod token;
pub mod webhook;
pub mod ws;

pub use channel::{CAPABILITIES, FeishuChannel, MAX_CARD_TEXT_BYTES};

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
