//! `dingtalk_frame`: one DingTalk stream-mode text frame, through the serve loop's
//! handling (`transport::ws::receive` through the crate's `fuzzing` module: bound, frame parse,
//! SYSTEM frames, topics, the ack) with the channel's decode and normalization of a robot
//! message.
//!
//! Input: the frame's text (a WebSocket text message is UTF-8; anything else never reaches
//! the parser). Invariants: no panic; every admitted message passes `check_inbound`; every
//! ack is JSON whose `headers.messageId` is the frame's own.
#![no_main]

use im_bridge_dingtalk::fuzzing::{InboundContext, stream_frame};
use im_bridge_fuzz::{anyone, check_inbound, commands};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = InboundContext {
        allowed_users: anyone(),
        commands: commands(),
        robot_code: "dingfuzzrobot",
    };
    let received = stream_frame(text, &ctx);
    if let Some(msg) = &received.message {
        check_inbound(msg, "dingtalk");
    }
    if let Some(ack) = &received.ack {
        let ack: Value = serde_json::from_str(ack).expect("an ack is JSON");
        let id = ack.pointer("/headers/messageId").and_then(Value::as_str);
        let sent = serde_json::from_str::<Value>(text).ok();
        let own = sent
            .as_ref()
            .and_then(|f| f.pointer("/headers/messageId"))
            .and_then(Value::as_str);
        if let Some(own) = own {
            assert_eq!(id, Some(own), "the ack names another message");
        }
    }
});
