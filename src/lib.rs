//! The im-bridge daemon as a library: configuration, the inbound bus, the admin endpoints,
//! the transport supervisor, the daemon that wires them together, and the operator's tools
//! (`deliveries`, `drain`). The DeerFlow Gateway client and its simulator are crates of
//! their own (`crates/gateway`, `crates/simulator`), re-exported here as [`gateway`] and,
//! with the default `simulator` feature, `simulator`.
//!
//! `main.rs` is only the command-line edge; everything it runs lives here so end-to-end
//! tests can drive the real daemon in-process.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod admin;
pub mod budgets;
pub mod bus;
pub mod channels;
pub mod config;
pub mod daemon;
pub mod doctor;
pub mod i18n;
pub mod lease;
pub mod manager;
pub mod operator;
pub mod platforms;
pub mod policy;
pub mod retention;
pub mod state;
pub mod store;
pub mod supervisor;
pub mod telemetry;

/// The DeerFlow Gateway client: the `im-bridge-gateway` crate.
pub use im_bridge_gateway as gateway;
/// The DeerFlow Gateway simulator: the `im-bridge-simulator` crate (feature `simulator`).
#[cfg(any(test, feature = "simulator"))]
pub use im_bridge_simulator as simulator;
