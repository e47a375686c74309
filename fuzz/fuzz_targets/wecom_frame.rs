//! `wecom_frame`: one WeCom long-connection text frame, read and handled as the transport
//! will (a message callback normalized, an event sorted), and the media decryption on the
//! same bytes.
//!
//! Invariants: no panic; every admitted message passes `check_inbound`.
#![no_main]

use im_bridge_fuzz::{anyone, check_inbound, commands};
use im_bridge_wecom::fuzzing::{InboundContext, decrypt, frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decrypt(data, "kx3nD0pZqS8vB2wYt6mL9cR4fH1jE7uA5gN0oP2iQ3s=");
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = InboundContext {
        allowed_users: anyone(),
        commands: commands(),
    };
    if let Some(Ok(msg)) = frame(text, &ctx).and_then(|r| r.message) {
        check_inbound(&msg, "wecom");
    }
});
