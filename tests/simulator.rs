//! The Gateway simulator driven over real loopback HTTP with `reqwest`, as an independent
//! check of the wire format in `spec/gateway.md` (it never uses the im-bridge gateway
//! client). Each test starts its own simulator on `127.0.0.1:0`; no test sleeps to wait for
//! an outcome: waits are on observable events, under deadlines.
//!
//! - `support`: the harness, request bodies as the client sends them, an SSE parser.
//! - `runs`: SSE framing and order, delivery modes, hidden frames, failures, heartbeats.
//! - `run_control`: busy threads, refusals, wait, create, body validation, cancellation.
//! - `goals`: the goal resource, continuations, from-chat, compaction.
//! - `routes`: threads, auth, CSRF, models/memory/skills/preferences, global switches, the
//!   request log, shutdown.
//! - `streams`: an existing run's event streams (join, stream, `Last-Event-ID`, gaps) and
//!   cancellation, as the real Gateway serves them (issue 26).
//! - `owners`: the owner check on every thread route, files and memory per user, and the
//!   routes the DeerFlow snapshot lacks (issue 26).

mod goals;
mod owners;
mod routes;
mod run_control;
mod runs;
mod streams;
mod support;
