//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off in every
//! build of the daemon). Not an API.

use im_bridge_channel::{InboundMessage, Skip};

pub use crate::inbound::InboundContext;
use crate::inbound::{EventAction, event, normalize_frame};
use crate::model::{Frame, Kind};

/// What the adapter made of one text frame.
#[derive(Debug)]
pub struct Received {
    /// The message it carried, when it normalized to one.
    pub message: Option<Result<InboundMessage, Skip>>,
    /// Whether it was an event saying the connection was replaced.
    pub replaced: bool,
}

/// Reads `text` as a frame and handles it as the transport will: a message callback
/// normalized, an event sorted, anything else skipped. `None` when it is no frame.
pub fn frame(text: &str, ctx: &InboundContext<'_>) -> Option<Received> {
    let frame: Frame = serde_json::from_str(text).ok()?;
    Some(match frame.kind() {
        Kind::Message => Received {
            message: Some(normalize_frame(&frame, ctx)),
            replaced: false,
        },
        Kind::Event => Received {
            message: None,
            replaced: event(&frame) == EventAction::Replaced,
        },
        Kind::Answer | Kind::Unknown => Received {
            message: None,
            replaced: false,
        },
    })
}

/// Decrypts `data` with `aeskey` as a callback's media is (never panics).
pub fn decrypt(data: &[u8], aeskey: &str) -> Option<Vec<u8>> {
    crate::inbound::media::decrypt(data, aeskey).ok()
}
