//! `wechat_poll`: one iLink `getupdates` answer, read and every message normalized as the
//! poll does; and the same bytes as CDN ciphertext, a key in either encoding and a media
//! handle.
//!
//! Invariants: no panic; every admitted message passes `check_inbound`.
#![no_main]

use im_bridge_fuzz::{anyone, check_inbound, commands};
use im_bridge_wechat::fuzzing::{InboundContext, media, poll};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    media(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = InboundContext {
        allowed_users: anyone(),
        commands: commands(),
    };
    for msg in poll(text, &ctx).unwrap_or_default().into_iter().flatten() {
        check_inbound(&msg, "wechat");
    }
});
