//! Entry points for the `wechat_poll` fuzz target (feature `fuzzing`): a `getupdates`
//! answer read and every message in it normalized, as the poll does; the same bytes
//! scanned as an answer over the size bound is; and the CDN's decryption and key readers
//! on the same bytes.

pub use crate::inbound::InboundContext;

use im_bridge_channel::{InboundMessage, Skip};

use serde_json::Value;

use crate::api::batch::scan::Scan;
use crate::api::cdn;
use crate::model::{Message, Updates};

/// Reads `text` as a `getupdates` answer and normalizes each message: `None` when it is
/// not one, else what became of each message.
pub fn poll(text: &str, ctx: &InboundContext<'_>) -> Option<Vec<Result<InboundMessage, Skip>>> {
    let updates: Updates = serde_json::from_str(text).ok()?;
    let mut out = Vec::new();
    for raw in updates.msgs.unwrap_or_default() {
        out.push(match serde_json::from_value::<Message>(raw) {
            Ok(message) => crate::inbound::normalize(&message, ctx),
            Err(_) => Err(Skip::Malformed),
        });
    }
    Some(out)
}

/// Scans `data` as the rest of an answer over the size bound is scanned, fed in two pieces
/// cut at `cut` (past the end: one piece): the cursor and the messages kept. Within the
/// scan's bounds, for a JSON object these are its top-level `get_updates_buf` string and
/// its top-level `msgs` array's elements, as `serde_json` reads them.
pub fn scan(data: &[u8], cut: usize) -> (Option<String>, Vec<Value>) {
    let (first, rest) = data.split_at(cut.min(data.len()));
    let mut scan = Scan::default();
    scan.feed(first);
    scan.feed(rest);
    let found = scan.into_found();
    (found.cursor, found.msgs)
}

/// Decrypts `data` under a fixed key, and reads it as either key encoding.
pub fn media(data: &[u8]) {
    let key = [7u8; 16];
    let _ = cdn::decrypt(data, &key);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = cdn::base64_key(text);
        let _ = cdn::hex_key(text);
        let _ = crate::inbound::parse_handle(text);
    }
}
