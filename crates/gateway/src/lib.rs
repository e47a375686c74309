//! The DeerFlow Gateway client: one typed async function per Gateway call the channel layer
//! makes (threads, runs, goal, compaction, models, memory, skills, preferences), with
//! errors as a closed enum that never carries server- or model-written text.
//!
//! The wire contract is `spec/gateway.md`; this crate knows nothing about chat platforms
//! (it depends on no chat-side crate, so Cargo keeps it that way).
//! A [`GatewayClient`] is cheap to clone and shares its connections; every call takes
//! the binding's [`Owner`] (or `None`) and sends the identity and CSRF headers itself.
//!
//! Children:
//! - `client`: configuration, headers, status mapping entry point, thread calls;
//! - `direct`: the HTTP/1.1 client that reads run streams on the run's own task over a
//!   plain-HTTP base (everything else goes through reqwest);
//! - `runs`: run bodies, `/runs/stream` and `/runs/{id}/join` as a [`RunStream`] (both are
//!   event streams on DeerFlow), `/runs/wait`, `/runs`;
//! - `goal`: goal routes, `goal/from-chat`, compaction, goal views of state values;
//! - `info`: models, memory, skills, owner language;
//! - `uploads`: files for a thread's uploads directory, within its upload limits;
//! - `limits`: the Gateway's upload limits and the one entry kept of them;
//! - `routes`: the optional routes not every DeerFlow serves, and what is known of them;
//! - `probe`: asking the Gateway which of them it serves;
//! - [`event`]: decoding SSE frames into [`RunEvent`]s;
//! - `message`: the typed [`Message`] and [`Snapshot`] read from `messages` and `values`;
//! - [`sse`]: the incremental SSE parser (public for the `sse_parse` bench);
//! - `thread_id`: [`ThreadId`], which only the daemon knows;
//! - `token`: [`InternalToken`], the redacted `X-DeerFlow-Internal-Token`;
//! - `error`: [`GatewayError`] and the `(call, status, detail)` tables.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod artifacts;
mod client;
mod direct;
mod error;
pub mod event;
mod goal;
mod info;
mod limits;
mod message;
mod probe;
mod routes;
mod runs;
pub mod sse;
mod thread_id;
mod token;
mod uploads;

pub use artifacts::{ARTIFACT_TIMEOUT, ArtifactError, OUTPUTS_DIR, is_output_path};
pub use client::{GatewayClient, GatewayConfig, Owner, ThreadInfo};
pub use error::{GatewayError, TransportKind};
pub use event::RunEvent;
pub use goal::{
    CompactOutcome, CompactRequest, GoalEvaluation, GoalOutcome, GoalState, MAX_HINT_CHARS,
    ThreadState,
};
pub use info::SkillInfo;
pub use limits::{UPLOAD_LIMITS_TTL, UploadLimits};
pub use message::{ChunkMetadata, Message, PresentCall, Snapshot};
pub use routes::{OptionalRoute, Support};
pub use runs::{
    HumanMessage, OFFLOAD_FRAME_BYTES, RunMode, RunRequest, RunStatus, RunStream, RunSummary,
};
pub use thread_id::ThreadId;
pub use token::InternalToken;
pub use uploads::{UPLOAD_TIMEOUT, UploadFile, UploadedFile};

#[cfg(test)]
mod tests;
