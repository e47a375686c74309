//! How DingTalk's robot messages arrive: stream mode, a WebSocket the bridge opens itself
//! (no public URL). The channel only admits each message to the daemon's queue; the
//! transport acks the frame from that.
//!
//! Children:
//! - `ws`: `connections/open`, the ticketed WebSocket of JSON frames (`ws/frame`) and
//!   their acks, SYSTEM `ping` and `disconnect`, the keepalive, reconnects through the
//!   core's driver.

pub mod ws;
