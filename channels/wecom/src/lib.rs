//! The WeCom (企业微信) adapter (issue 31): the intelligent bot (智能机器人) over its long
//! connection.
//!
//! Built in pieces, each tested on its own (the README says more). This first part holds
//! the pure ones; the transport, the channel, its registry entry and `doctor` come next.
//!
//! - `config`: the `channels.wecom` block (public: the daemon's tests build settings).
//! - `model`: every frame of the long connection, each type round-tripped against
//!   `tests/fixtures/`.
//! - `error`: WeCom's `errcode`s sorted once onto the kit's errors.
//! - `inbound`: message callbacks to normalized messages; its child `media` decrypts the
//!   files a callback points at.
//! - `markup`: the markdown the agent's Markdown is rendered in ([`WeComMarkdown`]).
//! - `fuzzing` (feature `fuzzing`): entry points for the fuzz targets.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
// The transport and the channel (next) use them; until then only the tests do.
#[allow(dead_code)]
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[allow(dead_code)]
mod inbound;
mod markup;
#[allow(dead_code)]
mod model;

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "wecom";

pub use markup::WeComMarkdown;
