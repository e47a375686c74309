//! Console channel.
#![doc = include_str!("../README.md")]
