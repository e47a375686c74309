//! How Discord's events arrive: over the gateway only (Discord has no webhook for
//! messages), run by serenity's shard.
//!
//! Children:
//! - `ws`: serenity's `ShardManager` with a raw event handler forwarding READY, RESUMED and
//!   users' messages, and its reconnect gate. serenity owns the connect → serve →
//!   reconnect loop (heartbeats, RESUME, re-IDENTIFY), so the gateway is not a
//!   [`LongConnection`](im_bridge_channel::LongConnection) driven by the core's
//!   `Reconnect::drive`: the gate paces serenity's own reconnects with the same
//!   [`Reconnect`](im_bridge_channel::Reconnect) policy instead (`ws/gate.rs`).

pub(crate) mod ws;
