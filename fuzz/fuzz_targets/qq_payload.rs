//! `qq_payload`: what QQ sends, into inbound messages: a gateway op-code frame
//! (`{op, d, s, t, id}`: the bounded decode, Hello's interval, READY, an event's
//! normalization) or a webhook callback body (sorted after its signature check, an
//! event normalized), both through the crate's `fuzzing` module.
//!
//! Input: a mode byte, then the frame or body. The clock is fixed (2025-06-01) so an
//! input means the same on every run; the fuzzer finds timestamps inside the reply window
//! from the seeds. Invariants: no panic; every admitted message passes `check_inbound`;
//! Hello's interval stays within the bounds the gateway believes; a message's reply window
//! ends after it was sent.
#![no_main]

use std::time::{Duration, SystemTime};

use im_bridge_fuzz::{anyone, check_inbound, commands};
use im_bridge_qq::fuzzing::{GatewayFrame, gateway_frame, webhook_body};
use im_bridge_qq::inbound::InboundContext;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// 2025-06-01T00:00:00Z.
const NOW: u64 = 1_748_736_000;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    for bot_id in [None, Some("fuzzbot")] {
        let ctx = InboundContext {
            app_id: "102000000",
            bot_id,
            allowed_users: anyone(),
            commands: commands(),
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(NOW),
        };
        let message = if mode & 1 == 0 {
            match gateway_frame(rest, &ctx) {
                GatewayFrame::Hello(interval) => {
                    assert!(interval >= Duration::from_millis(100));
                    assert!(interval <= Duration::from_secs(300));
                    None
                }
                GatewayFrame::Event(event) => event.ok(),
                _ => None,
            }
        } else {
            webhook_body(rest, &ctx).and_then(Result::ok)
        };
        if let Some(msg) = message {
            check_inbound(&msg, "qq");
            let number = |key: &str| msg.metadata.get(key).and_then(Value::as_f64);
            if let (Some(sent), Some(end)) = (number("sent_at"), number("reply_window_end")) {
                assert!(sent < end, "the window ends at {end}, before {sent}");
            }
        }
    }
});
