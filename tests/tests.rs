//! Integration tests, built as one binary (one link, one process):
//!
//! - `support`: the test channel and the daemon + simulator harness;
//! - `manager`: the channel manager end to end (issue 4);
//! - `goal`: the `/goal` family (issue 5);
//! - `lang`: localization and `/lang` (issue 6);
//! - `compact`: `/compact` in chat (issue 8);
//! - `cli`: the binary: check-config, run, demo (issue 2).

mod cli;
mod compact;
mod goal;
mod lang;
mod manager;
mod support;
