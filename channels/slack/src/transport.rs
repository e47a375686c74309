//! How events arrive: Socket Mode (`ws`, the default: `apps.connections.open`, the
//! WebSocket, an ack per envelope within 3 s, a new connection opened before a
//! `disconnect` closes the old one) or the Events API (`webhook`, a route on the shared
//! webhook host). Both hand the same bodies ([`crate::model::EventBody`],
//! [`crate::model::SlashCommand`]) to [`crate::inbound`].
//!
//! Children:
//! - `webhook`: the Events API request check (`X-Slack-Signature` v0 and the ±5 minute
//!   window) and the sorting of a signed body; the route's handler is the channel's
//!   (`channel/hook.rs`), which admits what it sorts.
//! - `ws`: Socket Mode as a kit `LongConnection`, with the hand-over on `disconnect`.

pub mod webhook;
pub(crate) mod ws;
