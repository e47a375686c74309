//! `wechat_poll`: one iLink `getupdates` answer, read and every message normalized as the
//! poll does; the same bytes scanned as an answer over the size bound is, in two pieces
//! cut where a hash of them says; and the same bytes as CDN ciphertext, a key in either
//! encoding and a media handle.
//!
//! Invariants: no panic; every admitted message passes `check_inbound`; for a JSON object,
//! the scan finds the cursor and the messages `serde_json` finds (its top-level
//! `get_updates_buf` string and `msgs` elements; the inputs are within the scan's bounds).
#![no_main]

use im_bridge_fuzz::{anyone, check_inbound, commands};
use im_bridge_wechat::fuzzing::{InboundContext, media, poll, scan};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    media(data);
    let hash = data
        .iter()
        .fold(0usize, |h, &b| h.wrapping_mul(31) ^ usize::from(b));
    let cut = hash % (data.len() + 1);
    let (cursor, msgs) = scan(data, cut);
    if let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(data) {
        let expected = answer.get("msgs").and_then(Value::as_array);
        assert_eq!(msgs, expected.map_or(&[][..], Vec::as_slice), "msgs");
        let expected = answer.get("get_updates_buf").and_then(Value::as_str);
        assert_eq!(cursor.as_deref(), expected, "cursor");
    }
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
