//! The Feishu / Lark adapter (issue 15, spec platforms.md §4), under construction.
//!
//! Built in pieces, each tested on its own before the channel is registered:
//!
//! - `frame`: the long connection's binary `pbbp2.Frame` (prost), its headers, and the
//!   reassembly of payloads split into `sum` parts (bounded in time and memory).
//! - `ws`: the long connection: endpoint discovery at `{domain}/callback/ws/endpoint`, the
//!   WebSocket, ping/pong with the server's `ClientConfig`, the ack of every data frame
//!   before its event is handled, reconnects with the server's settings plus jitter, and
//!   the handshake refusals.
//! - `webhook`: the event webhook's URL verification, token check, AES-256-CBC decryption
//!   and signature check.
//! - `card`: interactive message cards (`update_multi`), split at the card size limit.
//!
//! Nothing here is registered with the daemon yet: the registry line comes with the
//! channel itself.

pub mod api;
pub mod card;
pub mod error;
pub mod token;
pub mod webhook;
