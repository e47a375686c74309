//! The Discord adapter (issue 18, spec platforms.md §7).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The channel's name: the provider key in configuration and bindings.
pub const NAME: &str = "discord";
