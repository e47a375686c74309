//! Issue 26: im-bridge against the REAL DeerFlow Gateway (`../shared/deerflow/backend` with
//! its deterministic fake model), not our simulator. The real `im-bridge` binary serves the
//! platform fakes of `tests/fakes`; a test asserts on what the user sees in the fake chat
//! and, where the story is "exactly one run" or "this user's files", on the Gateway itself.
//!
//! Every test is ignored: `scripts/interop` builds the backend's environment, starts the
//! model and the Gateway (auth on, then single-user), and runs
//! `cargo test --test tests interop:: -- --ignored` with the Gateway in `IM_BRIDGE_INTEROP_*`
//! (see `gateway`). Run outside it, a test panics saying so.
//!
//! Children:
//! - `gateway`: the Gateway from the environment, its identity rule, direct checks;
//! - `bridge`: the daemon binary with the fakes a test names, kill -9, its store;
//! - `answers`: one answer on each platform (streamed, final-only, card);
//! - `commands`: `/new`, `/status`, `/models`, `/memory`, the `/goal` family, `/compact`,
//!   `/stop`, and two messages queued back to back;
//! - `files`: a photo and a document in, a presented file out, two private chats isolated,
//!   a group's files kept under the group's identity;
//! - `crash`: kill -9 mid-answer then restart, and a second replica on Postgres.

mod answers;
pub(crate) mod bridge;
mod commands;
mod crash;
mod files;
pub(crate) mod gateway;
