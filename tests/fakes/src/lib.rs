//! Fake platform servers for end-to-end tests, one module per platform, named like the
//! adapter it serves (STYLE habit 5):
//!
//! - [`telegram`] — the Telegram Bot API: long polling, webhook delivery, messages, edits,
//!   uploads, scripted failures.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod telegram;
