//! Fake platform servers for end-to-end tests, one module per platform, named like the
//! adapter it serves (STYLE habit 5):
//!
//! - [`telegram`] — the Telegram Bot API: long polling, webhook delivery, messages, edits,
//!   uploads, scripted failures.
//!
//! And the checks every adapter's tests share:
//!
//! - [`telemetry`] — a metrics recorder that asserts the adapter telemetry contract
//!   (`docs/adapter-spec.md`).
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod telegram;
pub mod telemetry;
