//! Shared model and machinery for im-bridge channel adapters.
//!
//! Dependency arrows point one way: adapters depend on this crate, the daemon depends on
//! this crate and the adapters, and this crate depends on neither.
#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
mod capabilities;
mod channel;
pub mod commands;
mod delivery;
mod error;
mod ids;
mod inbound;
mod menu;
mod message;
mod secret;
pub mod telemetry;

pub use access::AllowedUsers;
pub use capabilities::{Capabilities, LengthUnit, ReplyWindow, UpdateMode};
pub use channel::{Channel, ChannelExit, SendTarget, SentMessage};
pub use delivery::{
    ChannelExt, Delivery, EditClock, FinishOrSend, LimitLength, MAX_PAUSE_WAIT, MAX_STREAMS,
    RetryFinals, RetryPolicy, Throttle, split,
};
pub use error::{ChannelError, RetryAfterHint};
pub use ids::{ChatId, MessageId, ThreadId, UserId};
pub use inbound::{
    AdmitError, InboundQueue, InboundSink, REFUSALS_CAPACITY, REFUSED_METRIC, Reservation,
    inbound_queue,
};
pub use menu::{CommandMenu, MenuEntry};
pub use message::{
    ChatKind, FileKind, FileSource, InboundFile, InboundMessage, MsgType, OutboundMessage,
    ResolvedAttachment, safe_file_name,
};
pub use secret::Secret;
pub use telemetry::{Stage, Telemetry};
