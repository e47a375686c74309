//! How Feishu's events arrive: over the long connection the bridge opens itself (`ws`,
//! the default: no public URL), or posted to the event webhook (`webhook`, `mode:
//! webhook`). Either way the channel only admits each event to the daemon's queue; the
//! transport answers Feishu (the frame's ack, the request's status) from that.
//!
//! Children:
//! - `ws`: the long connection: endpoint discovery, the WebSocket of `pbbp2` frames, pings,
//!   acks, reconnects through the core's driver with Feishu's timers as a floor.
//! - `webhook`: the event webhook's checks as pure functions: signature, AES-256-CBC
//!   decryption, verification token, URL verification or event. The route's handler that
//!   applies them in order is the channel's (`channel/hook.rs`).

pub mod webhook;
pub mod ws;
