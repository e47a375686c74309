//! The channel manager end to end (issue 4): the real daemon with a test channel and the
//! Gateway simulator over loopback, one theme a module:
//!
//! - `delivery`: how an answer reaches a channel: streamed edits, final-only channels,
//!   hidden frames, clarifications and files, the working placeholder.
//! - `conversations`: which thread a message runs on, redeliveries, `/new` and `/status`,
//!   and what a run carries.
//! - `following`: final-only answers followed through the joined event stream, a join that
//!   lost its connection, a run on another Gateway worker (issue 26).
//! - `identity`: one DeerFlow identity per conversation, and a thread made for another one
//!   replaced once (issue 26).
//! - `busy_thread`: a run meeting a thread another process's run holds (409) waits for it
//!   under `busy_policy: queue`, within bounds, or gets the busy reply.
//! - `failures`: busy threads, errors and dropped streams mid-run, a Gateway that is down.
//! - `outlived`: a streamed run that outlives its stream (a dropped connection, a `gap`) is
//!   followed to its answer.
//! - `commands`: command parsing, `/models`, `/memory`, skills as commands, `/bootstrap`.
//! - `intake`: queueing, a full queue, shutdown with work in flight, the input ending.
//! - `queueing`: a busy conversation's messages: arrival order, the queued notice, the
//!   busy reply for a full line and under `busy_policy: reject` (issue 13).
//! - `questions`: the agent's question in a group, answered after a restart or on another
//!   replica sharing PostgreSQL.
//! - `windows`: an answer that outlives its source's reply window on a channel that takes
//!   messages answering no source (issue 33; QQ's way, the next message, is `qq::handoff`).

mod busy_thread;
mod commands;
mod conversations;
mod delivery;
mod failures;
mod following;
mod identity;
mod intake;
mod outlived;
mod questions;
mod queueing;
mod windows;
