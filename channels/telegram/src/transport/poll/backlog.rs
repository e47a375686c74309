//! The updates a poller received and Telegram still holds: everything from the next
//! `getUpdates` `offset` on, in update order, each settled only once admitted (or
//! skipped), so the offset never passes an update whose message is not in the inbound
//! queue yet.
//!
//! An album's first part is held as an open album that its later parts join (each later
//! part leaves a marker in its own place, settled with the album); the album is ready
//! [`ALBUM_WINDOW`] after its latest part. The backlog settles from the front only, so an
//! open album at the front holds back what came after it (for at most the window once its
//! parts stop coming) and the updates keep their order; meanwhile the poller asks again
//! from the same offset and [`Backlog::seen`] drops what it was given before.
//!
//! Bound: every entry is an update at or past the offset, and one `getUpdates` returns at
//! most 100 of those (`POLL_LIMIT`), so the backlog never holds more than that, open
//! albums included; an album holds at most [`MAX_ALBUM_PARTS`] parts.

use std::collections::VecDeque;

use im_bridge_channel::InboundMessage;
use tokio::time::Instant;

use super::super::{ALBUM_WINDOW, Accepted};
use crate::inbound::{AlbumKey, MAX_ALBUM_PARTS};

/// One update not yet acknowledged.
#[derive(Debug)]
enum Entry {
    /// Nothing to admit: skipped, or a part joined into an album before it.
    Settled,
    /// A message waiting its turn.
    Ready(InboundMessage),
    /// An album's first part, the later parts joined in, being gathered until `due`.
    Album {
        key: AlbumKey,
        msg: InboundMessage,
        parts: usize,
        due: Instant,
    },
}

/// What the front of the backlog settles: its update, and the message to admit, if any.
#[derive(Debug)]
pub(super) struct Settled {
    /// The update (an album's first part).
    pub(super) update_id: i64,
    /// What to admit; `None` for an update that needs nothing admitted.
    pub(super) msg: Option<InboundMessage>,
}

/// The updates received and not acknowledged, in order.
#[derive(Debug, Default)]
pub(super) struct Backlog {
    entries: VecDeque<(i64, Entry)>,
    /// The highest update id received.
    highest: Option<i64>,
}

impl Backlog {
    /// Whether update `update_id` is held already (Telegram gives it again while the
    /// offset stays below it).
    pub(super) fn seen(&self, update_id: i64) -> bool {
        self.entries.iter().any(|(id, _)| *id == update_id)
    }

    /// Takes in update `update_id` at `now`: its message (if any) waits its turn, or
    /// joins (by `join`) the latest open album of its key with room left, or opens one.
    pub(super) fn push(
        &mut self,
        update_id: i64,
        accepted: Option<Accepted>,
        now: Instant,
        join: impl FnOnce(&mut InboundMessage, InboundMessage),
    ) {
        self.highest = Some(self.highest.map_or(update_id, |h| h.max(update_id)));
        let entry = match accepted {
            None => Entry::Settled,
            Some(Accepted { msg, album: None }) => Entry::Ready(msg),
            Some(Accepted {
                msg,
                album: Some(key),
            }) => match self.open_album(&key) {
                Some((album, parts, due)) => {
                    join(album, msg);
                    *parts += 1;
                    *due = now + ALBUM_WINDOW;
                    Entry::Settled
                }
                None => Entry::Album {
                    key,
                    msg,
                    parts: 1,
                    due: now + ALBUM_WINDOW,
                },
            },
        };
        self.entries.push_back((update_id, entry));
    }

    /// The latest album of `key` with room for another part.
    fn open_album(
        &mut self,
        key: &AlbumKey,
    ) -> Option<(&mut InboundMessage, &mut usize, &mut Instant)> {
        let latest = self
            .entries
            .iter_mut()
            .rev()
            .find_map(|(_, entry)| match entry {
                Entry::Album {
                    key: k,
                    msg,
                    parts,
                    due,
                } if k == key => Some((msg, parts, due)),
                _ => None,
            })?;
        (*latest.1 < MAX_ALBUM_PARTS).then_some(latest)
    }

    /// Takes the front entry out if it is settled at `now` (an album once complete).
    pub(super) fn pop_ready(&mut self, now: Instant) -> Option<Settled> {
        let (_, front) = self.entries.front()?;
        if matches!(front, Entry::Album { due, .. } if *due > now) {
            return None;
        }
        let (update_id, entry) = self.entries.pop_front()?;
        let msg = match entry {
            Entry::Settled => None,
            Entry::Ready(msg) | Entry::Album { msg, .. } => Some(msg),
        };
        Some(Settled { update_id, msg })
    }

    /// The offset of the next `getUpdates`: the first update not settled, else past the
    /// highest received (`None` before any).
    pub(super) fn offset(&self) -> Option<i64> {
        match self.entries.front() {
            Some((id, _)) => Some(*id),
            None => self.highest.map(|h| h.saturating_add(1)),
        }
    }

    /// When the album at the front is complete, while one is being gathered there.
    pub(super) fn gathering_until(&self) -> Option<Instant> {
        match self.entries.front() {
            Some((_, Entry::Album { due, .. })) => Some(*due),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::inbound::album_key;
    use crate::model::Update;

    fn message(text: &str) -> InboundMessage {
        InboundMessage::new("telegram", "42", "42", text)
    }

    fn part(group: &str, text: &str) -> Option<Accepted> {
        let update: Update = serde_json::from_value(serde_json::json!({
            "update_id": 1,
            "message": {"message_id": 1, "date": 0, "chat": {"id": 42, "type": "private"},
                        "media_group_id": group}
        }))
        .unwrap();
        Some(Accepted {
            msg: message(text),
            album: album_key(&update),
        })
    }

    fn lone(text: &str) -> Option<Accepted> {
        Some(Accepted {
            msg: message(text),
            album: None,
        })
    }

    fn join(album: &mut InboundMessage, part: InboundMessage) {
        album.text.push_str(&part.text);
    }

    #[test]
    fn the_offset_stays_on_an_album_until_it_is_admitted() {
        let mut backlog = Backlog::default();
        let t0 = Instant::now();
        assert_eq!(backlog.offset(), None);
        backlog.push(10, part("g", "a"), t0, join);
        backlog.push(11, lone("after"), t0, join);
        backlog.push(12, None, t0, join);
        let t1 = t0 + Duration::from_millis(500);
        backlog.push(13, part("g", "b"), t1, join);
        assert!(backlog.seen(13) && !backlog.seen(14));
        // Gathering: nothing settles and the offset confirms nothing of it.
        assert!(backlog.pop_ready(t0 + ALBUM_WINDOW).is_none());
        assert_eq!(backlog.offset(), Some(10));
        assert_eq!(backlog.gathering_until(), Some(t1 + ALBUM_WINDOW));
        // Complete: the album, then what followed it, in order.
        let done = t1 + ALBUM_WINDOW;
        let settled: Vec<(i64, Option<String>)> = std::iter::from_fn(|| backlog.pop_ready(done))
            .map(|s| (s.update_id, s.msg.map(|m| m.text)))
            .collect();
        assert_eq!(
            settled,
            [
                (10, Some("ab".into())),
                (11, Some("after".into())),
                (12, None),
                (13, None)
            ]
        );
        assert_eq!(backlog.offset(), Some(14));
        assert_eq!(backlog.gathering_until(), None);
    }

    #[test]
    fn a_full_album_starts_another() {
        let mut backlog = Backlog::default();
        let now = Instant::now();
        for id in 0..=MAX_ALBUM_PARTS as i64 {
            backlog.push(id, part("g", "x"), now, join);
        }
        let albums: Vec<usize> = std::iter::from_fn(|| backlog.pop_ready(now + ALBUM_WINDOW))
            .filter_map(|s| s.msg)
            .map(|m| m.text.len())
            .collect();
        assert_eq!(albums, [MAX_ALBUM_PARTS, 1]);
    }
}
