//! Accumulating a streamed run into the text a chat shows (spec manager §7.5).
//!
//! - Only assistant-typed `messages` payloads are shown; human, system and tool frames
//!   (memory injections, goal-continuation prompts, tool output) never are.
//! - Text is kept per message id with the merge rules of §7.5: an empty chunk changes
//!   nothing; into an empty buffer the chunk goes as is; a chunk strictly longer than the
//!   buffer that starts with it replaces it (cumulative delivery); anything else is
//!   appended (delta delivery), even when it equals the buffer.
//! - The visible text is the buffer of the latest message id, so a new AI message restarts
//!   it; a `values` snapshot whose turn ends in a clarification shows the question.
//! - [`Throttle`] decides when a partial update is worth publishing: the first text at
//!   once, later ones after [`MIN_INTERVAL`] or [`MIN_NEW_CHARS`] new characters, never the
//!   same text twice.
//!
//! - A goal continuation (a hidden human prompt marked `deerflow_goal_continuation`, seen
//!   as a `messages` frame or in a `values` snapshot) starts a new *segment*: the caller
//!   finishes the current message and shows the continuation's output as a new one.
//!
//! Memory: buffers are kept for at most [`MAX_TRACKED_IDS`] message ids per run; at the
//! bound the oldest id's buffer is dropped (its text is no longer visible anyway). Together
//! they hold at most [`MAX_TEXT_BYTES`]: past it the older buffers are dropped, then what
//! a runaway stream adds to the latest one is.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::turn::{self, Turn};
use crate::gateway::{ChunkMetadata, Message, Snapshot};

/// Partial updates are published at most this often …
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// … unless at least this many new characters arrived.
pub const MIN_NEW_CHARS: usize = 60;
/// Message ids whose buffers a run keeps.
pub const MAX_TRACKED_IDS: usize = 64;
/// The most text a run's buffers hold together, in UTF-8 bytes: more than any chat is
/// sent of one answer (`bridge.max_reply_messages` cuts it long before for every
/// platform's usual limits), so only a runaway stream reaches it.
pub const MAX_TEXT_BYTES: usize = 16 << 20;
/// The key of chunks that carry no id at all.
const DEFAULT_ID: &str = "__default__";

/// Merges one chunk into a buffer (the §7.5 rule table).
pub fn merge_chunk(buffer: &mut String, chunk: &str) {
    if chunk.is_empty() {
        return;
    }
    if buffer.is_empty() || (chunk.len() > buffer.len() && chunk.starts_with(buffer.as_str())) {
        buffer.clear();
        buffer.push_str(chunk);
    } else {
        buffer.push_str(chunk);
    }
}

/// The state of one streamed run.
#[derive(Debug, Default)]
pub struct Accumulator {
    /// (message id, text), oldest first; the last one is the latest.
    buffers: VecDeque<(String, String)>,
    snapshot: Option<Snapshot>,
    clarification: Option<String>,
    failed: bool,
    /// Segments finished so far (= continuations already shown).
    segment: usize,
    /// Ids of continuation prompts seen as `messages` frames (at most
    /// [`MAX_TRACKED_IDS`]).
    continuation_ids: Vec<String>,
    /// Continuations counted in the latest snapshot.
    snapshot_continuations: usize,
    /// Whether text was dropped at [`MAX_TEXT_BYTES`] (told to the log once).
    capped: bool,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one `messages` payload. Returns whether the visible text may have changed.
    pub fn on_message(&mut self, message: &Message, metadata: &ChunkMetadata) -> bool {
        let Some(kind) = message.kind() else {
            return false;
        };
        if message.is_goal_continuation() {
            let id = message.id(metadata).unwrap_or(DEFAULT_ID);
            if !self.continuation_ids.iter().any(|c| c == id)
                && self.continuation_ids.len() < MAX_TRACKED_IDS
            {
                self.continuation_ids.push(id.to_owned());
            }
            return false;
        }
        if !turn::is_assistant_type(kind) {
            return false;
        }
        let chunk = message.text();
        let id = message.id(metadata);
        let index = match (id, self.buffers.back()) {
            (Some(id), _) => self.buffers.iter().position(|(k, _)| k == id),
            (None, Some(_)) => Some(self.buffers.len() - 1),
            (None, None) => None,
        };
        let index = match index {
            Some(i) => {
                // A chunk for an earlier id makes that id the latest again.
                if i + 1 != self.buffers.len()
                    && let Some(entry) = self.buffers.remove(i)
                {
                    self.buffers.push_back(entry);
                }
                self.buffers.len() - 1
            }
            None => {
                if self.buffers.len() == MAX_TRACKED_IDS {
                    self.buffers.pop_front();
                }
                self.buffers
                    .push_back((id.unwrap_or(DEFAULT_ID).to_owned(), String::new()));
                self.buffers.len() - 1
            }
        };
        if let Some((_, buffer)) = self.buffers.get_mut(index) {
            merge_chunk(buffer, chunk);
        }
        self.stay_bounded();
        self.clarification = None;
        !chunk.is_empty()
    }

    /// Keeps the buffers within [`MAX_TEXT_BYTES`]: the oldest go first, then the end of
    /// the latest.
    fn stay_bounded(&mut self) {
        let mut total: usize = self.buffers.iter().map(|(_, text)| text.len()).sum();
        if total <= MAX_TEXT_BYTES {
            return;
        }
        while total > MAX_TEXT_BYTES && self.buffers.len() > 1 {
            if let Some((_, dropped)) = self.buffers.pop_front() {
                total -= dropped.len();
            }
        }
        if let Some((_, latest)) = self.buffers.back_mut()
            && latest.len() > MAX_TEXT_BYTES
        {
            latest.truncate(latest.floor_char_boundary(MAX_TEXT_BYTES));
            if !self.capped {
                self.capped = true;
                tracing::warn!(
                    max_bytes = MAX_TEXT_BYTES,
                    "A run's answer grew past the most the bridge keeps; the rest of it is dropped."
                );
            }
        }
    }

    /// Feeds a `values` snapshot. Returns whether the visible text may have changed. One
    /// without a `messages` list keeps the history of the snapshot before
    /// ([`Snapshot::merged`]).
    pub fn on_values(&mut self, values: Snapshot) -> bool {
        let carried = values.has_messages();
        let values = Snapshot::merged(self.snapshot.take(), values);
        let current = turn::current_turn(&values);
        self.snapshot_continuations = turn::continuations(&values);
        self.snapshot = Some(values);
        if carried && current.pending_clarification && !current.text.is_empty() {
            self.clarification = Some(current.text);
            return true;
        }
        false
    }

    /// Records that the run reported an error (it keeps streaming until `end`).
    pub fn on_error(&mut self) {
        self.failed = true;
    }

    /// Whether an error was reported.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The text a chat should show now.
    pub fn visible_text(&self) -> &str {
        if let Some(q) = &self.clarification {
            return q;
        }
        self.buffers.back().map_or("", |(_, t)| t.as_str())
    }

    /// Whether a goal continuation started that the current segment has not yet ended for.
    pub fn continuation_pending(&self) -> bool {
        self.continuations_seen() > self.segment
    }

    /// How many goal continuations the events read so far showed.
    fn continuations_seen(&self) -> usize {
        self.continuation_ids.len().max(self.snapshot_continuations)
    }

    /// Ends the current segment at a continuation: returns its result and starts the next.
    pub fn next_segment(&mut self) -> Turn {
        let result = self.segment_result();
        self.segment += 1;
        self.buffers.clear();
        self.clarification = None;
        result
    }

    /// Continuations shown so far.
    pub fn segment(&self) -> usize {
        self.segment
    }

    /// `(continuation_count, max_continuations)` from the latest snapshot's goal.
    pub fn goal_progress(&self) -> Option<(u32, u32)> {
        self.snapshot.as_ref().and_then(Snapshot::goal_progress)
    }

    /// The final result of the last segment: the last snapshot's turn when it describes
    /// this segment (falling back to the streamed text when it has none), else the
    /// streamed text.
    pub fn finish(&self) -> Turn {
        self.segment_result()
    }

    /// The current segment as the latest snapshot shows it, text falling back to the stream.
    fn segment_result(&self) -> Turn {
        let mut result = self
            .snapshot
            .as_ref()
            .and_then(|values| turn::segments(values).into_iter().nth(self.segment))
            .unwrap_or_default();
        if result.text.trim().is_empty() {
            result.text = self.visible_text().to_owned();
        }
        result
    }
}

/// What a followed run has written so far (issue 33): fed by its join, read by the turn
/// when it hands the answer off before the source's reply window closes, and by a turn
/// that publishes each goal-continuation segment as it ends ([`SoFar::continued`]).
/// Bounded like the [`Accumulator`] it wraps.
#[derive(Debug, Default)]
pub struct SoFar {
    acc: std::sync::Mutex<Progress>,
    /// Woken when a goal continuation ended a segment.
    continued: tokio::sync::Notify,
}

/// What [`SoFar`] holds.
#[derive(Debug, Default)]
struct Progress {
    /// The segment the run is in.
    acc: Accumulator,
    /// The segments ended and not yet taken, oldest first: `(n, streamed)`. Bounded by
    /// the continuations a goal takes (at most 8); past [`MAX_ENDED`], the oldest go.
    ended: VecDeque<(usize, Turn)>,
    /// The continuations seen so far in the events read (after a reset or a restart,
    /// those of segments ended before come again).
    seen: usize,
    /// A `values` snapshot of the run came: the thread's state is the run's own.
    values_seen: bool,
}

/// The most ended segments [`SoFar`] keeps untaken.
const MAX_ENDED: usize = 16;

impl SoFar {
    /// What a run shows from segment `segment` on: the segments before it were published
    /// already (a restart follows the run).
    pub fn from_segment(segment: usize) -> Self {
        let so_far = Self::default();
        so_far.lock().acc.segment = segment;
        so_far
    }

    /// What a run shows that was streamed into `acc` until its stream ended without the
    /// run's end: the join that follows the run goes on from there.
    pub fn continuing(acc: Accumulator) -> Self {
        let so_far = Self::default();
        {
            let mut progress = so_far.lock();
            progress.seen = acc.continuations_seen();
            progress.values_seen = acc.snapshot.is_some();
            progress.acc = acc;
        }
        so_far
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.acc
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Feeds one `messages` payload of the run's events.
    pub fn on_message(&self, message: &Message, metadata: &ChunkMetadata) {
        let mut progress = self.lock();
        progress.acc.on_message(message, metadata);
        self.end_segments(&mut progress);
    }

    /// Feeds a `values` snapshot of the run's events: only the goal continuations it
    /// counts (the text comes from the messages).
    pub fn on_values(&self, values: &Snapshot) {
        let mut progress = self.lock();
        progress.values_seen = true;
        progress.acc.snapshot_continuations = turn::continuations(values);
        self.end_segments(&mut progress);
    }

    /// Ends the segment a continuation that started ended, at once: what the run writes
    /// next is the next segment's.
    fn end_segments(&self, progress: &mut Progress) {
        let seen = progress.acc.continuations_seen();
        if seen > progress.seen && seen <= progress.acc.segment {
            // The events are read again: a segment ended before is over once more, and
            // what follows is the next one's (not shown twice by a hand-off).
            progress.acc.buffers.clear();
        }
        progress.seen = progress.seen.max(seen);
        let mut ended = false;
        while progress.acc.continuation_pending() {
            let n = progress.acc.segment;
            let streamed = progress.acc.next_segment();
            if progress.ended.len() == MAX_ENDED {
                progress.ended.pop_front();
            }
            progress.ended.push_back((n, streamed));
            ended = true;
        }
        if ended {
            self.continued.notify_one();
        }
    }

    /// Forgets what was read (the events are read again from an earlier point), but not
    /// the segments ended: their continuations come again.
    pub fn reset(&self) {
        let mut progress = self.lock();
        let segment = progress.acc.segment;
        progress.acc = Accumulator::new();
        progress.acc.segment = segment;
        progress.seen = 0;
    }

    /// The text the run shows now (in the segment it is in).
    pub fn text(&self) -> String {
        self.lock().acc.visible_text().to_owned()
    }

    /// Whether a `values` snapshot of the run came (the run wrote its state).
    pub fn values_seen(&self) -> bool {
        self.lock().values_seen
    }

    /// The segment the run is in and what was streamed of it.
    pub fn current(&self) -> (usize, Turn) {
        let progress = self.lock();
        (progress.acc.segment(), progress.acc.finish())
    }

    /// Waits until a goal continuation ended a segment: `(n, streamed)`, its number (0
    /// the first) and what was streamed of it.
    pub async fn continued(&self) -> (usize, Turn) {
        loop {
            let continued = self.continued.notified();
            if let Some(ended) = self.lock().ended.pop_front() {
                return ended;
            }
            continued.await;
        }
    }
}

/// When to publish a partial update.
#[derive(Debug, Default)]
pub struct Throttle {
    last: Option<(Instant, usize)>,
    last_text: String,
}

impl Throttle {
    /// Whether `text` should be published now; records it when so.
    pub fn should_publish(&mut self, text: &str, now: Instant) -> bool {
        if text.is_empty() || text == self.last_text {
            return false;
        }
        // Counting chars is O(length) per chunk, so quadratic over a long answer; a text
        // has at most as many chars as bytes, so below this length it cannot have grown
        // enough and is not counted.
        let mut chars = None;
        let due = match self.last {
            None => true,
            Some((at, published_chars)) => {
                now.duration_since(at) >= MIN_INTERVAL
                    || (text.len() >= published_chars + MIN_NEW_CHARS
                        && chars
                            .get_or_insert_with(|| text.chars().count())
                            .saturating_sub(published_chars)
                            >= MIN_NEW_CHARS)
            }
        };
        if due {
            let chars = chars.unwrap_or_else(|| text.chars().count());
            self.last = Some((now, chars));
            self.last_text.clear();
            self.last_text.push_str(text);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The tests speak JSON; the accumulator reads its typed decoding.
    trait FeedJson {
        fn on_json(&mut self, message: &Value, metadata: &Value) -> bool;
        fn on_json_values(&mut self, values: Value) -> bool;
    }

    impl FeedJson for Accumulator {
        fn on_json(&mut self, message: &Value, metadata: &Value) -> bool {
            self.on_message(
                &Message::from_value(message),
                &ChunkMetadata::from_value(metadata),
            )
        }
        fn on_json_values(&mut self, values: Value) -> bool {
            self.on_values(Snapshot::from_value(&values))
        }
    }

    #[test]
    fn a_runaway_stream_is_kept_within_the_bound() {
        let mut acc = Accumulator::new();
        let metadata = json!({});
        let chunk =
            |id: &str, text: &str| json!({"type": "AIMessageChunk", "id": id, "content": text});
        // An older message's text goes first…
        acc.on_json(&chunk("m1", &"a".repeat(MAX_TEXT_BYTES / 2)), &metadata);
        let delta = "é".repeat(1 << 20);
        for _ in 0..6 {
            acc.on_json(&chunk("m2", &delta), &metadata);
        }
        assert_eq!(acc.buffers.len(), 1, "m1 dropped");
        assert!(acc.visible_text().starts_with('é'));
        // …then the latest keeps what fits, cut on a character.
        for _ in 0..12 {
            acc.on_json(&chunk("m2", &delta), &metadata);
        }
        let text = acc.visible_text();
        assert!(text.len() <= MAX_TEXT_BYTES && text.len() > MAX_TEXT_BYTES - 2);
        assert!(text.ends_with('é'));
    }

    #[test]
    fn merge_rule_table() {
        // (buffer, chunk, expected) — spec manager §7.5.
        let table = [
            ("", "", ""),
            ("abc", "", "abc"),
            ("", "abc", "abc"),
            ("Hel", "Hello", "Hello"),
            ("Hello", "Hello", "HelloHello"),
            ("Hello", "lo", "Hellolo"),
            ("Hello", " world", "Hello world"),
            ("Hello", "Help", "HelloHelp"),
            ("你好", "你好，世界", "你好，世界"),
        ];
        for (buffer, chunk, expected) in table {
            let mut b = buffer.to_owned();
            merge_chunk(&mut b, chunk);
            assert_eq!(b, expected, "buffer {buffer:?} + chunk {chunk:?}");
        }
    }

    fn ai(id: &str, text: &str) -> Value {
        json!({"type": "AIMessageChunk", "id": id, "content": text})
    }

    #[test]
    fn hidden_frames_never_become_visible() {
        let mut acc = Accumulator::new();
        let meta = json!({});
        assert!(!acc.on_json(
            &json!({"type": "human", "id": "h", "content": "<memory>secret</memory>"}),
            &meta
        ));
        assert!(!acc.on_json(
            &json!({"type": "tool", "id": "t", "content": "tool output"}),
            &meta
        ));
        assert!(!acc.on_json(
            &json!({"type": "system", "content": "system prompt"}),
            &meta
        ));
        assert!(!acc.on_json(&json!("bare string"), &meta));
        assert!(!acc.on_json(&json!({"type": "constructor", "id": ["x", "HumanMessage"], "kwargs": {"content": "hidden"}}), &meta));
        assert_eq!(acc.visible_text(), "");
        acc.on_json(&ai("a1", "Hi"), &meta);
        assert_eq!(acc.visible_text(), "Hi");
    }

    #[test]
    fn delta_and_cumulative_streams_and_a_new_id_restarts_text() {
        let mut acc = Accumulator::new();
        let meta = json!({});
        for chunk in ["Hel", "lo", " there"] {
            acc.on_json(&ai("a1", chunk), &meta);
        }
        assert_eq!(acc.visible_text(), "Hello there");
        for chunk in ["Sec", "Second", "Second answer"] {
            acc.on_json(&ai("a2", chunk), &meta);
        }
        assert_eq!(acc.visible_text(), "Second answer");
        // Chunks without ids continue the latest message; metadata ids are honoured.
        acc.on_json(&json!({"type": "ai", "content": "!"}), &meta);
        assert_eq!(acc.visible_text(), "Second answer!");
        acc.on_json(
            &json!({"type": "ai", "content": "third"}),
            &json!({"id": "a3"}),
        );
        assert_eq!(acc.visible_text(), "third");
    }

    #[test]
    fn tracked_ids_are_bounded() {
        let mut acc = Accumulator::new();
        for i in 0..(MAX_TRACKED_IDS * 3) {
            acc.on_json(&ai(&format!("id{i}"), "x"), &json!({}));
        }
        assert_eq!(acc.buffers.len(), MAX_TRACKED_IDS);
    }

    #[test]
    fn final_prefers_the_snapshot_and_shows_clarifications() {
        let mut acc = Accumulator::new();
        acc.on_json(&ai("a1", "partial"), &json!({}));
        acc.on_json_values(json!({"messages": [{"type": "human", "content": "q"}, {"type": "ai", "content": "The full answer."}]}));
        assert_eq!(acc.finish().text, "The full answer.");
        let mut acc = Accumulator::new();
        acc.on_json(&ai("a1", "streamed only"), &json!({}));
        acc.on_json_values(json!({"messages": [{"type": "human", "content": "q"}]}));
        assert_eq!(acc.finish().text, "streamed only");
        let mut acc = Accumulator::new();
        assert!(acc.on_json_values(json!({"messages": [{"type": "human", "content": "q"}, {"type": "tool", "name": "ask_clarification", "content": "Which one?"}]})));
        assert_eq!(acc.visible_text(), "Which one?");
        assert!(acc.finish().pending_clarification);
    }

    /// Audit finding 6: goal bookkeeping over DeerFlow's delta checkpoints publishes
    /// `values` without the history; the answer of the snapshot before stands.
    #[test]
    fn a_snapshot_without_the_history_keeps_the_one_before() {
        let mut acc = Accumulator::new();
        acc.on_json(&ai("a1", "partial"), &json!({}));
        acc.on_json_values(json!({"messages": [{"type": "human", "content": "q"}, {"type": "ai", "content": "The full answer."}], "goal": {"continuation_count": 0, "max_continuations": 8}}));
        assert!(!acc.on_json_values(
            json!({"goal": {"continuation_count": 0, "max_continuations": 8, "status": "met"}})
        ));
        assert!(!acc.on_json_values(
            json!({"messages": "<sentinel>", "goal": {"continuation_count": 1, "max_continuations": 8}})
        ));
        assert_eq!(acc.finish().text, "The full answer.");
        assert_eq!(acc.goal_progress(), Some((1, 8)));
        assert!(!acc.continuation_pending());
    }

    #[test]
    fn continuations_start_new_segments() {
        let cont = json!({"type": "human", "id": "c1", "content": "<goal_continuation/>", "additional_kwargs": {"hide_from_ui": true, "deerflow_goal_continuation": true}});
        let mut acc = Accumulator::new();
        acc.on_json(&ai("a1", "first answer"), &json!({}));
        assert!(!acc.continuation_pending());
        assert!(
            !acc.on_json(&cont, &json!({})),
            "the continuation prompt is never shown"
        );
        assert!(acc.continuation_pending());
        assert_eq!(acc.next_segment().text, "first answer");
        assert!(!acc.continuation_pending());
        // The same continuation, seen again in a snapshot, is not a second boundary.
        acc.on_json_values(json!({"messages": [{"type": "human", "content": "q"}, {"type": "ai", "content": "first answer"}, cont], "goal": {"continuation_count": 1, "max_continuations": 8}}));
        assert!(!acc.continuation_pending());
        assert_eq!(acc.goal_progress(), Some((1, 8)));
        acc.on_json(&ai("a2", "second"), &json!({}));
        assert_eq!(acc.visible_text(), "second");
        // The snapshot's turn ends in the first answer: the stream is the better source.
        assert_eq!(acc.finish().text, "second");
    }

    #[tokio::test]
    async fn so_far_ends_each_segment_as_its_continuation_starts() {
        let cont = |id: &str| json!({"type": "human", "id": id, "content": "<goal_continuation/>", "additional_kwargs": {"hide_from_ui": true, "deerflow_goal_continuation": true}});
        let feed = |so_far: &SoFar, message: &Value| {
            so_far.on_message(
                &Message::from_value(message),
                &ChunkMetadata::from_value(&json!({})),
            );
        };
        let so_far = SoFar::default();
        feed(&so_far, &ai("a1", "first answer"));
        // The next segment's text, read in the same poll, is not the first one's.
        feed(&so_far, &cont("c1"));
        feed(&so_far, &ai("a2", "second"));
        assert_eq!(so_far.text(), "second");
        let (n, first) = so_far.continued().await;
        assert_eq!((n, first.text.as_str()), (0, "first answer"));
        // Read again from the start (a gap): the ended segment is not ended twice, nor
        // shown as the run's text once its continuation came again.
        so_far.reset();
        feed(&so_far, &ai("a1", "first answer"));
        assert_eq!(so_far.text(), "first answer");
        feed(&so_far, &cont("c1"));
        assert_eq!(so_far.text(), "");
        feed(&so_far, &ai("a2", "second, again"));
        assert_eq!(so_far.text(), "second, again");
        assert!(so_far.lock().ended.is_empty());
        // A restart that follows the run from its second segment.
        let so_far = SoFar::from_segment(1);
        feed(&so_far, &ai("a1", "first answer"));
        feed(&so_far, &cont("c1"));
        feed(&so_far, &ai("a2", "second"));
        feed(&so_far, &cont("c2"));
        let (n, second) = so_far.continued().await;
        assert_eq!((n, second.text.as_str()), (1, "second"));
    }

    #[test]
    fn throttle_publishes_first_then_by_time_or_size() {
        let start = Instant::now();
        let mut t = Throttle::default();
        assert!(!t.should_publish("", start));
        assert!(t.should_publish("a", start));
        assert!(
            !t.should_publish("a", start + Duration::from_secs(5)),
            "identical text is never republished"
        );
        assert!(!t.should_publish("ab", start + Duration::from_millis(500)));
        assert!(t.should_publish("ab", start + Duration::from_millis(1000)));
        let long = format!("ab{}", "x".repeat(59));
        assert!(!t.should_publish(&long, start + Duration::from_millis(1100)));
        let longer = format!("ab{}", "x".repeat(60));
        assert!(t.should_publish(&longer, start + Duration::from_millis(1100)));
    }

    #[test]
    fn the_size_rule_counts_characters_not_bytes() {
        let start = Instant::now();
        let mut t = Throttle::default();
        assert!(t.should_publish("答", start));
        // 59 more three-byte characters: 178 bytes, but not yet 60 new characters.
        let soon = start + Duration::from_millis(100);
        assert!(!t.should_publish(&"答".repeat(60), soon));
        assert!(t.should_publish(&"答".repeat(61), soon));
        // A text that shrank is not "grown" (and does not underflow).
        assert!(!t.should_publish("答答", soon));
    }
}
