//! The operator's tools (issue 33): what `im-bridge deliveries` and `im-bridge drain` do,
//! and what the admin endpoints serve for them.
//!
//! Answers that could not be delivered are kept in the in-flight journal (`src/manager/journal.rs`):
//! pending while the bridge still retries them, given up once `bridge.final_retry_hours`
//! passed. An operator lists them, retries them (a given-up one is tried again for another
//! retry window; a pending one at once) or drops them, on the store directly (SQLite with
//! the daemon stopped, or PostgreSQL, shared with running replicas) or through a running
//! daemon's authenticated admin endpoints. A drain stops a daemon for a deploy without
//! burning retries: it takes no new messages, finishes what it admitted within the grace
//! period, and leaves its pending deliveries to the next process.
//!
//! Children:
//! - [`deliveries`]: [`Deliveries`], the journal as the operator sees and acts on it;
//! - [`client`]: [`AdminClient`], the daemon's operator endpoints over HTTP;
//! - [`cli`]: the `deliveries` and `drain` subcommands.

pub mod cli;
pub mod client;
pub mod deliveries;

pub use client::{AdminClient, ClientError};
pub use deliveries::{Change, Deliveries, Delivery, DeliveryState, Page, Selection, Texts};
