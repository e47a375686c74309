//! The in-flight journal's record (issue 19): what recovery needs to finish an admitted chat
//! message after the process that admitted it died.
//!
//! Each admitted chat message has one entry from admission until its final landed. The
//! store keeps entries opaque: a serialized [`JournalRecord`] plus who holds the entry and
//! until when ([`Store::journal_claim`](super::Store::journal_claim)). The manager owns the
//! record's meaning (`src/manager/journal.rs`); the store writes one field itself, which
//! only the admitting transaction knows: the keys of a joined message it did not record
//! ([`JournalRecord::not_recorded`]).
//!
//! An entry whose finals could not be delivered within `bridge.final_retry_hours` is given
//! up ([`Store::journal_give_up`](super::Store::journal_give_up)): no process holds or
//! claims it any more, and it waits for an operator (issue 33: `im-bridge deliveries`) to
//! retry or drop it, for at most [`GAVE_UP_KEPT`].

use im_bridge_channel::{DeliveryHints, InboundMessage, MessageId, RedeliveryKey};
use serde::{Deserialize, Serialize};

use super::DedupeKey;

/// Most entries a store keeps. Entries live while their message is queued, running or its
/// final waits to land, so traffic bounds them far below this; at the bound the oldest
/// entries are dropped at admission (and logged by the manager as lost).
pub const JOURNAL_CAP: usize = 10_000;

/// How long an entry that gave up is kept for an operator to retry or drop it; then it is
/// forgotten ([`Store::journal_sweep`](super::Store::journal_sweep)), so a message's text
/// does not outlive it in the store indefinitely.
pub const GAVE_UP_KEPT: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// Where an admitted message stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalState {
    /// Admitted; no run was accepted yet.
    #[default]
    Admitted,
    /// The Gateway accepted its run (`run_id` is known).
    Running,
    /// The run ended; finals that did not land wait in `finals`.
    FinalPending,
    /// Its finals wait for the chat's next message (issue 33): their source takes no more
    /// replies (its reply window closed) and the platform sends nothing unprompted, so
    /// they go out as the first replies to whatever the chat says next
    /// ([`Store::journal_take_held`](super::Store::journal_take_held)).
    Held,
}

/// One journal entry's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalRecord {
    /// The admitted message, as its adapter delivered it.
    pub message: InboundMessage,
    /// When the manager took the message, in microseconds since the Unix epoch, strictly
    /// increasing within a process ([`arrival_stamp`]): its place in its conversation's
    /// line, which recovery keeps (admission runs on a task per message, so the store's
    /// order is not always the line's). 0 in records written before it was kept.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub arrived: i64,
    /// Where it stands.
    #[serde(default)]
    pub state: JournalState,
    /// The Gateway thread its run uses, once resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The Gateway's run id, once the run was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The platform message showing the streamed reply, once one was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_message_id: Option<String>,
    /// Finals published and not landed yet (written ahead of each delivery).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finals: Vec<PendingFinal>,
    /// Delivery attempts of `finals` so far: the first delivery and each retry.
    #[serde(default)]
    pub attempts: u32,
    /// Why the last attempt failed: the channel's log-safe error (an operation and a code,
    /// never message text or a token), clipped to [`LAST_ERROR_MAX`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// What the turn showed when it handed its answer off before the source's reply window
    /// closed (issue 33): the final that ends the run then carries only the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handed_off: Option<String>,
    /// The later message of the same chat whose replies carry `finals` once a held entry
    /// was taken up (issue 33); `None`: they answer `message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier: Option<InboundMessage>,
    /// How many goal-continuation segments of the run (`run_id`) had their finals published
    /// while it went on: each one landed or waits in `finals`, so a restart that follows
    /// the run publishes only the segments after them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub segments_sent: u32,
    /// The objective the Gateway composed and saved as the goal of `thread_id` for this
    /// message (`/goal from-chat`), recorded as soon as it answered: a restart starts (or
    /// follows) the run on it instead of having the Gateway compose another. A record
    /// written before this field reads as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_objective: Option<String>,
    /// The message's redelivery keys (its own or its parts') that had a live dedupe record
    /// when it was admitted, so this admission did not record them: another admission did
    /// and owns them (a message joined from a part handled before and a new one), and a
    /// release of this entry's turn never frees them. Written by the store in the
    /// admitting transaction ([`Store::journal_admit`](super::Store::journal_admit)), so a
    /// restart knows too. Empty when the admission recorded every key, which is always so
    /// for a message of one platform message, and in records written before it was kept:
    /// those release every key, as the builds that wrote them did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_recorded: Vec<RedeliveryKey>,
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// A stamp for a message the manager takes now: microseconds since the Unix epoch, but
/// always above the last stamp this process gave, so messages taken within one
/// microsecond, or across a step back of the clock, keep their order.
pub fn arrival_stamp() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The longest [`JournalRecord::last_error`] kept, in characters.
pub const LAST_ERROR_MAX: usize = 300;

/// A final reply that did not land yet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingFinal {
    /// Tells the finals of one entry apart (1, 2, … in publishing order).
    #[serde(default)]
    pub id: u32,
    /// The text, as published.
    pub text: String,
    /// The reply's outbound metadata (the inbound message's, for its adapter).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// What the manager told the delivery engine about it (its notes, the message it
    /// finishes). A row written before the hints were typed carries them in `metadata`
    /// (moved into the hints as the row is read).
    #[serde(default, skip_serializing_if = "DeliveryHints::is_empty")]
    pub hints: DeliveryHints,
    /// The localized line a delivery by a later process opens with (it comes late).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<String>,
    /// The platform message this final replaces (the streamed reply it finishes), once
    /// known: delivered again, it edits that message to this same text, which changes
    /// nothing if the first delivery landed, instead of sending the answer twice (issue 27).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finishes: Option<String>,
    /// Sent as a message that answers no source (the rest of an answer on a platform that
    /// allows one); refused, it waits for the chat's next message instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsourced: bool,
    /// Waits for the chat's next message: the message it answered takes no more replies.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// A part of the answer published while its run went on (a goal-continuation
    /// segment's final, or what a hand-off showed): the turn had not ended, so a restart
    /// delivers it and then follows the run for the rest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub part: bool,
    /// The part a hand-off showed ([`JournalRecord::handed_off`]): refused for good, it
    /// was never shown, and the rest is the whole answer again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hand_off: bool,
}

impl PendingFinal {
    /// Final `id` with `text`, a reply to its entry's message: no hint, not delivered yet
    /// by anyone, neither held nor a part of the answer.
    pub fn new(id: u32, text: impl Into<String>) -> Self {
        Self {
            id,
            text: text.into(),
            metadata: Default::default(),
            hints: Default::default(),
            late: None,
            finishes: None,
            unsourced: false,
            held: false,
            part: false,
            hand_off: false,
        }
    }
}

impl JournalRecord {
    /// A new record of `message`, admitted.
    pub fn admitted(message: InboundMessage) -> Self {
        Self {
            message,
            arrived: 0,
            state: JournalState::Admitted,
            thread_id: None,
            run_id: None,
            stream_message_id: None,
            finals: Vec::new(),
            attempts: 0,
            last_error: None,
            handed_off: None,
            carrier: None,
            segments_sent: 0,
            goal_objective: None,
            not_recorded: Vec::new(),
        }
    }

    /// Notes which of the message's dedupe keys `keys` its admission did not record: those
    /// at the positions `live` (what [`Store::journal_admit`](super::Store::journal_admit)
    /// returns), in [`JournalRecord::not_recorded`].
    pub fn note_not_recorded(&mut self, keys: &[DedupeKey], live: &[usize]) {
        let live = live.iter().filter_map(|&at| keys.get(at));
        self.not_recorded = live
            .map(|key| RedeliveryKey::new(key.workspace.as_str(), key.message_id.as_str()))
            .collect();
    }

    /// Whether this entry's admission recorded `key`, one of its message's dedupe keys
    /// ([`JournalRecord::not_recorded`]): only those are its turn's to release.
    pub fn recorded(&self, key: &DedupeKey) -> bool {
        !self
            .not_recorded
            .iter()
            .any(|other| other.scope == key.workspace && other.id == key.message_id)
    }

    /// Whether finals wait to be delivered: the run ended (or a crash came after its answer
    /// was written ahead) and not every final landed. Parts alone mean the run went on
    /// ([`PendingFinal::part`]): the turn is still under way.
    pub fn has_pending_finals(&self) -> bool {
        self.state == JournalState::FinalPending || self.finals.iter().any(|f| !f.part)
    }

    /// At the end of its retry window: when what is left may still come with the chat's
    /// next message (its channel has reply windows, `windowed`, its turn ended, and it was
    /// held before or a later message carried it, issue 33), holds all of it for that,
    /// `true`; otherwise (`false`) it is to be given up.
    pub fn hold_instead_of_giving_up(&mut self, windowed: bool) -> bool {
        let carried = self.carrier.is_some() || self.finals.iter().any(|f| f.held);
        if !windowed || self.state != JournalState::FinalPending || !carried {
            return false;
        }
        self.finals.iter_mut().for_each(|f| f.held = true);
        self.state = JournalState::Held;
        true
    }

    /// Notes why a delivery failed, clipped to [`LAST_ERROR_MAX`] characters.
    pub fn note_error(&mut self, error: &str) {
        self.last_error = Some(error.chars().take(LAST_ERROR_MAX).collect());
    }

    /// The chat (channel, chat id) whose next message this entry waits for, when it is
    /// [`JournalState::Held`]: what the store indexes it by.
    pub fn held_chat(&self) -> Option<(&str, &str)> {
        (self.state == JournalState::Held).then(|| {
            (
                self.message.channel_name.as_str(),
                self.message.chat_id.as_str(),
            )
        })
    }
}

/// A journal entry as a claim returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Journaled {
    /// The entry's id.
    pub id: String,
    /// When it was admitted, unix milliseconds.
    pub created_ms: i64,
    /// When its final retry window began, unix milliseconds: `created_ms`, or when an
    /// operator last retried it after it gave up ([`Store::journal_retry`](super::Store::journal_retry)).
    pub retry_from_ms: i64,
    /// Its record.
    pub record: JournalRecord,
}

/// A journal entry as the operator's listing sees it ([`Store::journal_list`](super::Store::journal_list)).
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// Its place in admission order: a page after it starts after this.
    pub seq: i64,
    /// The entry's id.
    pub id: String,
    /// When it was admitted, unix milliseconds.
    pub created_ms: i64,
    /// When it gave up, unix milliseconds; `None` while it is still worked on.
    pub gave_up_ms: Option<i64>,
    /// Its record.
    pub record: JournalRecord,
}

impl Listed {
    /// Whether the operator's tools act on it: it gave up, or finals wait to be delivered.
    /// An entry whose turn is still under way is not a delivery yet.
    pub fn is_delivery(&self) -> bool {
        self.gave_up_ms.is_some() || self.record.has_pending_finals()
    }
}

/// What one [`Store::journal_sweep`](super::Store::journal_sweep) found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// The sweeper's entries an operator asked to retry now (their flag is cleared).
    pub due: Vec<String>,
    /// Entries that gave up and are kept, after forgetting the old ones.
    pub gave_up: u64,
    /// Entries that gave up longer ago than the sweep's horizon, deleted now.
    pub forgotten: u64,
}

/// What an operator may do with a stored entry that is a delivery ([`Listed::is_delivery`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operable {
    /// It gave up: a retry revives it; a drop removes it.
    GaveUp,
    /// Its finals are still retried: a retry makes them due now; a drop removes it.
    Pending,
    /// Its finals wait for the chat's next message ([`JournalState::Held`]): a retry would
    /// meet the same closed window, so only a drop acts on it.
    Held,
}

/// What an operator may do with a stored entry (its `record`, and whether it gave up);
/// `None` for one whose turn is still under way (or whose record this build cannot read).
pub(crate) fn operable(record: &str, gave_up: bool) -> Option<Operable> {
    if gave_up {
        return Some(Operable::GaveUp);
    }
    let record = decode(record)?;
    match record.state {
        JournalState::Held => Some(Operable::Held),
        _ if record.has_pending_finals() => Some(Operable::Pending),
        _ => None,
    }
}

/// A record as stored: JSON. Never fails for a record (every field serializes).
pub(crate) fn encode(record: &JournalRecord) -> String {
    serde_json::to_string(record).unwrap_or_default()
}

/// A record on its way into [`Store::journal_admit`](super::Store::journal_admit)'s
/// transaction: encoded at once for a message of at most one dedupe key (which an
/// admission records or refuses whole, so the record is what it is), kept to be encoded
/// once the transaction knows which keys it recorded for a message joined from several.
pub(crate) enum Admitting {
    /// Encoded: the message has at most one key.
    Encoded(String),
    /// The record of a joined message, [`JournalRecord::not_recorded`] still to be noted.
    Joined(Box<JournalRecord>),
}

impl Admitting {
    /// `record`, admitted with `keys`.
    pub(crate) fn new(record: &JournalRecord, keys: &[DedupeKey]) -> Self {
        if keys.len() > 1 {
            Self::Joined(Box::new(record.clone()))
        } else {
            Self::Encoded(encode(record))
        }
    }

    /// The record to write, once the admission found the keys at `live` of `keys` live.
    pub(crate) fn encode(self, keys: &[DedupeKey], live: &[usize]) -> String {
        match self {
            Self::Encoded(text) => text,
            Self::Joined(mut record) => {
                record.note_not_recorded(keys, live);
                encode(&record)
            }
        }
    }
}

/// A stored record, or `None` for one this build cannot read (logged by the caller). A
/// record an earlier build wrote is upgraded as it is read ([`PendingFinal::upgrade`]).
pub(crate) fn decode(text: &str) -> Option<JournalRecord> {
    let mut record: JournalRecord = serde_json::from_str(text).ok()?;
    record.finals.iter_mut().for_each(PendingFinal::upgrade);
    Some(record)
}

impl PendingFinal {
    /// Moves the delivery hints a row written before they were typed carries as metadata
    /// keys into [`PendingFinal::hints`], so a final written ahead by the previous version
    /// keeps its notes and the message it finishes; drops the key nothing read
    /// (`pending_clarification`).
    fn upgrade(&mut self) {
        let mut take = |key: &str| match self.metadata.remove(key) {
            Some(serde_json::Value::String(text)) => Some(text),
            _ => None,
        };
        let truncated_note = take("truncated_note");
        let resumes = take("im_bridge_resume_message");
        let held_note = take("im_bridge_held_note");
        take("pending_clarification");
        let hints = &mut self.hints;
        hints.truncated_note = hints.truncated_note.take().or(truncated_note);
        hints.resumes = hints.resumes.take().or(resumes.map(MessageId::new));
        hints.held_note = hints.held_note.take().or(held_note);
    }
}

/// Logs entries a claim or a take dropped because this build cannot read their record.
pub(crate) fn warn_unreadable(entries: usize) {
    if entries > 0 {
        tracing::warn!(entries, "Dropped journal entries this build cannot read.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_stamps_only_go_up_and_an_old_row_has_none() {
        let stamps: Vec<i64> = (0..1000).map(|_| arrival_stamp()).collect();
        assert!(stamps.windows(2).all(|w| w[0] < w[1]));
        let old = r#"{"message":{"channel_name":"qq","chat_id":"c","user_id":"u","text":"t",
            "created_at":1700000000.0}}"#;
        let mut record = decode(old).expect("an old row reads");
        assert_eq!(record.arrived, 0);
        record.arrived = stamps[0];
        let again = decode(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(again.arrived, stamps[0]);
    }

    #[test]
    fn a_row_written_before_the_typed_hints_keeps_its_notes_and_its_message() {
        // `created_at` given: a default of "now" need not survive serde_json's float parsing
        // to the last bit, and the round trip below compares whole records.
        let old = r#"{"message":{"channel_name":"qq","chat_id":"group:g","user_id":"u",
            "text":"question","created_at":1700000000.25},"state":"final_pending","finals":[{"id":1,"text":"answer",
            "metadata":{"event_id":"e1","truncated_note":"(cut)",
            "im_bridge_resume_message":"m7","im_bridge_held_note":"(held)",
            "pending_clarification":true},"finishes":"m7"},{"id":2,"text":"more"}]}"#;
        let record = decode(old).expect("an old row reads");
        let [first, second] = &record.finals[..] else {
            panic!("two finals: {:?}", record.finals);
        };
        assert_eq!(first.hints.truncated_note.as_deref(), Some("(cut)"));
        assert_eq!(first.hints.resumes, Some(MessageId::new("m7")));
        assert_eq!(first.hints.held_note.as_deref(), Some("(held)"));
        // The adapter's own metadata stays; the old keys and the dead one are gone.
        assert_eq!(
            first.metadata.keys().collect::<Vec<_>>(),
            ["event_id"],
            "{:?}",
            first.metadata
        );
        assert!(second.hints.is_empty());
        // Written again, it is in the new shape and reads back the same.
        let again = encode(&record);
        assert!(!again.contains("im_bridge_"), "{again}");
        assert_eq!(decode(&again), Some(record));
    }

    #[test]
    fn parts_alone_leave_the_turn_under_way_and_an_earlier_builds_finals_do_not() {
        let running = r#"{"message":{"channel_name":"telegram","chat_id":"1","user_id":"1",
            "text":"question","created_at":1700000000.0},"state":"running","run_id":"r",
            "segments_sent":1,"finals":[{"id":1,"text":"first segment","part":true}]}"#;
        let mut record = decode(running).expect("reads");
        assert_eq!(record.segments_sent, 1);
        assert!(!record.has_pending_finals(), "the run goes on: {record:?}");
        // The answer's final joined the part: the turn answered.
        let mut last = record.finals[0].clone();
        (last.id, last.part) = (2, false);
        record.finals.push(last);
        assert!(record.has_pending_finals());
        // A record written before parts existed: its finals are the answer, as they were.
        let earlier = running.replace(r#","part":true"#, "");
        assert!(decode(&earlier).expect("reads").has_pending_finals());
        // Nothing of either is written while unset.
        let fresh = encode(&JournalRecord::admitted(record.message.clone()));
        assert!(
            !fresh.contains("segments_sent")
                && !fresh.contains("part")
                && !fresh.contains("goal_objective"),
            "{fresh}"
        );
        // A record written before the composed goal was journaled has none.
        assert_eq!(decode(running).expect("reads").goal_objective, None);
    }
}
