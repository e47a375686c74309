//! `telegram_update`: a Telegram update as the adapter receives it, through both
//! transports' decoding, into an inbound message.
//!
//! Input: a webhook body (one `Update`), which is also read as a `getUpdates` result (an
//! array whose entries are decoded one by one, as polling does). Each update is
//! normalized with and without the bot's username known (before and after `getMe`), with
//! an allow-list and without. Invariants: no panic; every admitted message passes
//! `check_inbound`; and an `/cmd@ThisBot` command never reaches the daemon with its
//! `@ThisBot` suffix.
#![no_main]

use im_bridge_channel::AllowedUsers;
use im_bridge_fuzz::{anyone, check_inbound, commands};
use im_bridge_telegram::inbound::{InboundContext, Normalized, normalize};
use im_bridge_telegram::model::Update;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const BOT: &str = "DeerBridgeBot";

fuzz_target!(|data: &[u8]| {
    // The webhook: the body is one update.
    if let Ok(update) = serde_json::from_slice::<Update>(data) {
        every_context(&update);
    }
    // Polling: the result is an array, each entry decoded on its own.
    if let Ok(Value::Array(updates)) = serde_json::from_slice::<Value>(data) {
        for raw in updates {
            if raw.get("update_id").and_then(Value::as_i64).is_none() {
                continue;
            }
            if let Ok(update) = serde_json::from_value::<Update>(raw) {
                every_context(&update);
            }
        }
    }
});

fn every_context(update: &Update) {
    let listed = AllowedUsers::from_entries(Some(vec![Some("42".to_owned())]));
    for bot_username in [None, Some(BOT)] {
        for allowed_users in [anyone(), &listed] {
            let ctx = InboundContext {
                bot_username,
                allowed_users,
                commands: commands(),
            };
            if let Normalized::Message(msg) = normalize(update, &ctx) {
                check_inbound(&msg, "telegram");
                if bot_username.is_some() {
                    let first = msg.text.split(char::is_whitespace).next().unwrap_or("");
                    assert!(
                        !(first.starts_with('/')
                            && first.to_lowercase().ends_with("@deerbridgebot")),
                        "{:?} kept the bot's name",
                        msg.text
                    );
                }
            }
        }
    }
}
