//! The webhook's open albums: parts gathered by album until [`ALBUM_WINDOW`] has passed
//! since the latest one, then given out as one message.
//!
//! Bounds: at most [`MAX_OPEN_ALBUMS`] albums open at once, each of at most
//! [`MAX_ALBUM_PARTS`] parts (Telegram's own limit). A part that finds no room (every
//! slot taken, or its album full) is not held: [`Albums::hold`] gives it back, to be
//! admitted alone at once, so memory never grows with traffic.
//!
//! Pure bookkeeping over a clock the caller passes in, so it is tested without waiting.

use std::collections::HashMap;

use im_bridge_channel::InboundMessage;
use tokio::time::Instant;

use super::ALBUM_WINDOW;
use crate::inbound::{AlbumKey, MAX_ALBUM_PARTS};

/// Albums gathered at once; past it a part goes alone. Far above what one bot's users
/// send within a second.
pub(super) const MAX_OPEN_ALBUMS: usize = 256;

/// One album being gathered.
#[derive(Debug)]
struct Open {
    /// The first part's message, the later parts joined in.
    msg: InboundMessage,
    parts: usize,
    /// When it is complete: [`ALBUM_WINDOW`] after its latest part.
    due: Instant,
}

/// The open albums, by album.
#[derive(Debug, Default)]
pub(super) struct Albums {
    open: HashMap<AlbumKey, Open>,
}

impl Albums {
    /// Holds `part` of album `key` at `now`: joined (by `join`) into its open album, or
    /// opening it. `Some(part)` when it cannot be held and is to be admitted alone.
    pub(super) fn hold(
        &mut self,
        key: AlbumKey,
        part: InboundMessage,
        now: Instant,
        join: impl FnOnce(&mut InboundMessage, InboundMessage),
    ) -> Option<InboundMessage> {
        if let Some(open) = self.open.get_mut(&key) {
            if open.parts >= MAX_ALBUM_PARTS {
                return Some(part);
            }
            join(&mut open.msg, part);
            open.parts += 1;
            open.due = now + ALBUM_WINDOW;
            return None;
        }
        if self.open.len() >= MAX_OPEN_ALBUMS {
            return Some(part);
        }
        let open = Open {
            msg: part,
            parts: 1,
            due: now + ALBUM_WINDOW,
        };
        self.open.insert(key, open);
        None
    }

    /// Takes out every album complete at `now`.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<InboundMessage> {
        let due: Vec<AlbumKey> = self
            .open
            .iter()
            .filter(|(_, open)| open.due <= now)
            .map(|(key, _)| key.clone())
            .collect();
        due.iter()
            .filter_map(|key| self.open.remove(key))
            .map(|open| open.msg)
            .collect()
    }

    /// When the next album is complete.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.open.values().map(|open| open.due).min()
    }

    /// Takes out every album, complete or not (the transport is stopping).
    pub(super) fn drain(&mut self) -> Vec<InboundMessage> {
        self.open.drain().map(|(_, open)| open.msg).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use im_bridge_channel::CommandVocabulary;

    use super::*;
    use crate::inbound::{album_key, join};
    use crate::model::Update;

    fn key(group: &str) -> AlbumKey {
        let update: Update = serde_json::from_value(serde_json::json!({
            "update_id": 1,
            "message": {"message_id": 1, "date": 0, "chat": {"id": 42, "type": "private"},
                        "media_group_id": group}
        }))
        .unwrap();
        album_key(&update).unwrap()
    }

    fn part(text: &str) -> InboundMessage {
        InboundMessage::new("telegram", "42", "42", text)
    }

    #[test]
    fn an_album_is_due_a_window_after_its_latest_part() {
        let commands = CommandVocabulary::new(["new"]);
        let join = |a: &mut InboundMessage, p| join(a, p, &commands);
        let mut albums = Albums::default();
        let t0 = Instant::now();
        assert!(albums.hold(key("a"), part("caption"), t0, join).is_none());
        let t1 = t0 + Duration::from_millis(600);
        assert!(albums.hold(key("a"), part(""), t1, join).is_none());
        assert!(
            albums.take_due(t0 + ALBUM_WINDOW).is_empty(),
            "still gathering"
        );
        assert_eq!(albums.next_due(), Some(t1 + ALBUM_WINDOW));
        let done = albums.take_due(t1 + ALBUM_WINDOW);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].text, "caption");
        assert_eq!(albums.next_due(), None);
    }

    #[test]
    fn albums_and_their_parts_are_bounded() {
        let commands = CommandVocabulary::new(["new"]);
        let join = |a: &mut InboundMessage, p| join(a, p, &commands);
        let mut albums = Albums::default();
        let now = Instant::now();
        for _ in 0..MAX_ALBUM_PARTS {
            assert!(albums.hold(key("full"), part(""), now, join).is_none());
        }
        assert!(albums.hold(key("full"), part("11th"), now, join).is_some());
        for n in 1..MAX_OPEN_ALBUMS {
            assert!(
                albums
                    .hold(key(&n.to_string()), part(""), now, join)
                    .is_none()
            );
        }
        assert!(
            albums
                .hold(key("one too many"), part(""), now, join)
                .is_some()
        );
        assert_eq!(albums.drain().len(), MAX_OPEN_ALBUMS);
    }
}
