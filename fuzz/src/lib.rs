//! What the fuzz targets share: the daemon's command names, and the checks every
//! normalized inbound message must pass whichever adapter made it.

use std::sync::OnceLock;

use im_bridge_channel::{AllowedUsers, CommandVocabulary, InboundMessage};

/// The command names the adapters classify against (the daemon's vocabulary, as far as
/// classification needs it), built once.
pub fn commands() -> &'static CommandVocabulary {
    static COMMANDS: OnceLock<CommandVocabulary> = OnceLock::new();
    COMMANDS.get_or_init(|| {
        CommandVocabulary::new([
            "help", "new", "stop", "status", "goal", "models", "memory", "lang",
        ])
    })
}

/// No allow-list: everyone may talk to the bot, so every sender reaches normalization.
pub fn anyone() -> &'static AllowedUsers {
    static ANYONE: AllowedUsers = AllowedUsers::Anyone;
    &ANYONE
}

/// A message an adapter admitted: it says something or carries a file (every adapter
/// skips an empty one), it is its adapter's, and its serde forms agree (serialized to a
/// JSON value and read back, it is the same message).
///
/// The round trip goes through a `Value`, not text: serde_json without its
/// `float_roundtrip` feature may read a float written as text one unit in the last place
/// off (`created_at`, QQ's `sent_at`), which says nothing about the message.
pub fn check_inbound(msg: &InboundMessage, channel: &str) {
    assert_eq!(msg.channel_name, channel);
    assert!(
        !msg.text.trim().is_empty() || !msg.files.is_empty(),
        "an empty message was admitted: {msg:?}"
    );
    let value = serde_json::to_value(msg).expect("an inbound message serializes");
    let back: InboundMessage = serde_json::from_value(value).expect("and reads back");
    assert_eq!(&back, msg, "the serde round trip changed the message");
    serde_json::to_string(msg).expect("and is JSON text");
}

/// Splits `data` into the pieces a multi-message target feeds one by one, separated by
/// two NUL bytes (`\0\0`), which no JSON or protobuf seed of ours contains by chance.
pub fn pieces(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.windows(2).position(|w| w == b"\0\0") {
            Some(at) => {
                rest = Some(&current[at + 2..]);
                Some(&current[..at])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}
