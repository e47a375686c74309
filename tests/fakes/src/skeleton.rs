//! The one skeleton every fake is built on, so that a fake holds only its platform's rules
//! (issue 29, item 4): how a fake starts, records, scripts failures, speaks WebSocket and
//! lets a test wait is written once, here.
//!
//! A fake is a [`Fake<P>`](Fake) over its platform's state `P` (`FakeQq` is
//! `Fake<Qq>`): the state lives behind one lock in `Shared`, every request goes to the
//! platform's handler on an HTTP server on `127.0.0.1:0`, and whatever the fake records
//! wakes the waiters. What a platform implements is a trait per capability:
//!
//! - [`Platform`]: its state, whose HTTP calls the skeleton records (as [`Call`]s, or
//!   Telegram's own [`Recorded`] calls). Every fake then has `addr`, `calls`, `calls_to`,
//!   `wait_until`, `wait_for` and `wait_for_call`.
//! - [`WithSockets`]: it accepts WebSocket connections. It gets `connections`,
//!   `open_connections`, `wait_connected`, `bad_frames`, `close_connections`,
//!   `drop_connections_for` and `dropped_connections`, and runs each connection with
//!   `socket::serve`.
//! - [`OpGateway`]: it speaks an op-code gateway with sessions, heartbeats and resume
//!   (Discord, QQ). It gets the gateway's controls (op 7, op 9, close codes, dropped
//!   sockets, raw frames) and records (IDENTIFYs, RESUMEs, heartbeats, dispatches).
//!
//! Children:
//! - `server`: `Shared` (state, notify, stop token, address) and the HTTP server;
//! - `fake`: [`Fake`] and the capability traits, with the methods they give;
//! - `call`: [`Call`], what a REST fake records of an HTTP call;
//! - `http`: the REST edge's plumbing (the request head, bodies in every encoding,
//!   answers, scripted failures, access tokens);
//! - `socket`: the WebSocket upgrade, a connection's relay loop with its send queue and
//!   close controls, the connection table, the drop window;
//! - `gateway`: the sessions of an op-code gateway (sequence numbers, replay log, the
//!   session new events go to);
//! - `client` (tests only): a test's end of a fake's WebSocket, and its next JSON frame
//!   before a deadline.

mod call;
#[cfg(test)]
pub(crate) mod client;
mod fake;
pub(crate) mod gateway;
pub(crate) mod http;
mod server;
pub(crate) mod socket;

pub use call::Call;
pub use fake::{Fake, OpGateway, Platform, Recorded, WithSockets};
pub use gateway::Gateway;
pub use http::Trigger;
pub(crate) use server::Shared;
pub use socket::{Linked, Sockets};
