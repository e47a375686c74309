//! `slack_payload`: what Slack sends, into inbound messages: a Socket Mode frame (sorted;
//! an envelope's Events API body or slash command normalized) or an Events API request
//! (the signature check, then the body sorted and normalized), through the crate's
//! `fuzzing` module.
//!
//! Input: a mode byte, then the frame or body. Mode 0: a Socket Mode frame. Mode 1: a
//! body signed with the right secret at the fixed clock, so the fuzzer reaches the body's
//! reading. Mode 2: timestamp, signature and body as three pieces (`\0\0` between them),
//! checked as they come. Invariants: no panic; an envelope always yields its id to
//! acknowledge; a correctly signed fresh request is never refused; a request with no
//! signature is never admitted; every admitted message passes `check_inbound`.
#![no_main]

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use im_bridge_channel::digest::hex;
use im_bridge_channel::{Issues, Secret};
use im_bridge_fuzz::{anyone, check_inbound, commands, pieces};
use im_bridge_slack::config::{SlackSettings, validate};
use im_bridge_slack::fuzzing::{socket_frame, webhook_request};
use im_bridge_slack::inbound::InboundContext;
use im_bridge_slack::transport::webhook::sign;
use libfuzzer_sys::fuzz_target;

/// 2025-06-01T00:00:00Z.
const NOW: u64 = 1_748_736_000;
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

fn settings() -> &'static SlackSettings {
    static SETTINGS: OnceLock<SlackSettings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let block = serde_json::json!({"bot_token": "xoxb-fuzz", "app_token": "xapp-fuzz"});
        validate(block, &mut Issues::new("channels.slack")).expect("valid settings")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(NOW);
    let secret = Secret::new(SECRET);
    for bot_user_id in [None, Some("U0BOT0001")] {
        let ctx = InboundContext {
            settings: settings(),
            bot_user_id,
            allowed_users: anyone(),
            commands: commands(),
        };
        let outcome = match mode % 3 {
            0 => {
                let (envelope, outcome) = socket_frame(rest, &ctx);
                if outcome.is_some() {
                    assert!(envelope.is_some(), "a message came without an envelope id");
                }
                outcome
            }
            1 => {
                let timestamp = NOW.to_string();
                let signature = format!("v0={}", hex(&sign(&secret, &timestamp, rest)));
                webhook_request(&secret, Some(&timestamp), Some(&signature), rest, now, &ctx)
                    .expect("a signed, fresh request is accepted")
            }
            _ => {
                let mut parts = pieces(rest);
                let timestamp = parts.next().map(String::from_utf8_lossy);
                let signature = parts.next().map(String::from_utf8_lossy);
                let body = parts.next().unwrap_or_default();
                let result = webhook_request(
                    &secret,
                    timestamp.as_deref(),
                    signature.as_deref(),
                    body,
                    now,
                    &ctx,
                );
                if signature.is_none() {
                    assert!(result.is_err(), "an unsigned request was accepted");
                }
                result.ok().flatten()
            }
        };
        if let Some(Ok(msg)) = outcome {
            check_inbound(&msg, "slack");
        }
    }
});
