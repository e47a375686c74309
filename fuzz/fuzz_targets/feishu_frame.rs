//! `feishu_frame`: what Feishu sends, into inbound messages: the long connection's binary
//! WebSocket messages (protobuf `pbbp2.Frame`s), or an event webhook body.
//!
//! Input: a mode byte, then either a sequence of WebSocket messages separated by `\0\0`,
//! fed in order to one connection (`ws::receive` through the crate's `fuzzing` module:
//! frame decode, pongs' timers, reassembly of split payloads, acks, then the event's
//! decode and normalization), or one webhook body (decrypted when it is `{"encrypt": …}`,
//! sorted, decoded, normalized). Invariants: no panic; every admitted message passes
//! `check_inbound`; at most one ack per WebSocket message; the timers a pong sets stay
//! sane (a ping interval is never zero).
#![no_main]

use im_bridge_channel::Secret;
use im_bridge_feishu::fuzzing::webhook::{self, classify, open};
use im_bridge_feishu::fuzzing::{Envelope, InboundContext, long_connection, normalize};
use im_bridge_fuzz::{anyone, check_inbound, commands, pieces};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let ctx = InboundContext {
        allowed_users: anyone(),
        commands: commands(),
        bot_open_id: Some("ou_fuzzbot"),
    };
    if mode & 1 == 0 {
        let messages: Vec<&[u8]> = pieces(rest).collect();
        let received = long_connection(messages.iter().copied(), &ctx);
        assert!(received.acks <= messages.len());
        assert!(!received.config.ping_interval.is_zero());
        for msg in &received.messages {
            check_inbound(msg, "feishu");
        }
    } else {
        let key = Secret::new("fuzz-encrypt-key");
        for key in [None, Some(&key)] {
            let Ok(json) = open(rest, key) else {
                continue;
            };
            let Ok(webhook::Envelope::Event { event_json, .. }) = classify(&json) else {
                continue;
            };
            if let Ok(envelope) = serde_json::from_value::<Envelope>(event_json)
                && let Ok(msg) = normalize(&envelope, &ctx)
            {
                check_inbound(&msg, "feishu");
            }
        }
    }
});
