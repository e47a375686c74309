//! `markdown`: the agent's Markdown through the renderer (every dialect, the core's and
//! each adapter's, through the `Dialect` trait; final and preview) and through the
//! splitter and the preview cut (every `LengthUnit`).
//!
//! Input: a byte choosing the dialect, one choosing the unit, one choosing the limit
//! (0..=249 as is, above that Telegram's 4096), then the text (invalid UTF-8 replaced,
//! as the Gateway client never hands over anything but text). Invariants: exactly the
//! ones the crate's property tests assert, through its `fuzzing` module: every rendered
//! message well-formed as its dialect's `check` tells (Telegram HTML as strictly as
//! Telegram), showing exactly its `plain`, within the limit as measured unless it is a
//! single code point, never blank, and together the whole text but for whitespace at the
//! cuts; every split chunk within the limit, its body the next bytes of the input, the
//! chunks rejoining to the input once the code fence lines they add are taken out; a
//! preview cut a prefix within the limit.
#![no_main]

use im_bridge_channel::LengthUnit;
use im_bridge_channel::fuzzing::{check_chunks, check_final, check_preview, check_truncate};
use im_bridge_channel::render::{Dialect, Plain, PlainText};
use im_bridge_channel::split::{split_chunks, truncate};
use im_bridge_dingtalk::DingTalkMarkdown;
use im_bridge_feishu::FeishuCard;
use im_bridge_slack::SlackMrkdwn;
use im_bridge_telegram::TelegramHtml;
use im_bridge_wecom::WeComMarkdown;
use libfuzzer_sys::fuzz_target;

/// In the order the seeds' first byte was written for.
const DIALECTS: [&dyn Dialect; 7] = [
    &Plain,
    &PlainText,
    &TelegramHtml,
    &FeishuCard,
    &DingTalkMarkdown,
    &SlackMrkdwn,
    &WeComMarkdown,
];
const UNITS: [LengthUnit; 3] = [LengthUnit::Utf16, LengthUnit::Bytes, LengthUnit::Chars];

fuzz_target!(|data: &[u8]| {
    let [dialect, unit, limit, text @ ..] = data else {
        return;
    };
    let dialect = DIALECTS[usize::from(*dialect) % DIALECTS.len()];
    let unit = UNITS[usize::from(*unit) % UNITS.len()];
    let limit = match *limit {
        l @ 0..250 => usize::from(l),
        _ => 4096,
    };
    let text = String::from_utf8_lossy(text);

    check_final(&text, dialect, unit, limit);
    check_preview(&text, dialect, unit, limit);
    let chunks = split_chunks(&text, unit, limit);
    check_chunks(&text, unit, limit, &chunks);
    check_truncate(&text, unit, limit, &truncate(&text, unit, limit));
});
