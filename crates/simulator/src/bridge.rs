//! A run's event log, as DeerFlow's in-memory stream bridge keeps it
//! (`deerflow/runtime/stream_bridge/memory.py`): the executor publishes frames, every
//! consumer (`/runs/stream`, `…/join`, `…/runs/{run_id}/stream`, `/runs/wait`) subscribes,
//! replays what is retained, then follows live events until the run's tail.
//!
//! Each frame gets its id when published, `{unix ms}-{seq}` with `seq` counting the run's
//! events from 0, so `seq` is the event's absolute offset. A subscriber may name the last
//! event it saw (`Last-Event-ID`): a retained id resumes after it; an id older than the
//! retained window yields a `gap` frame and nothing else; any other id replays from the
//! earliest retained event, exactly as the bridge resolves it. A live subscriber that falls
//! behind the window also gets `gap` and stops.
//!
//! A script may make the readers reading at some point lose the events while the run plays
//! on (`Script::stream_loss`): their connections are cut, or they get `gap`, once they read
//! the events published before it; readers that subscribe later do not meet it.
//!
//! The tail says how the log ends: `end` (the Gateway's `publish_end`), or one of the
//! simulator's scripted faults (cut the connection, close without `end`), or the simulator
//! stopping. The run's record forgets the log some time after the run ended (see
//! `State::prune_streams`); a consumer that holds it keeps reading it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::script::StreamLoss;
use crate::sse;
use crate::wire;

/// Events a run keeps for replay, the Gateway's `stream_bridge.queue_maxsize` default; past
/// it the oldest event is dropped for each new one.
pub const STREAM_BUFFER_EVENTS: usize = 256;

/// How a run's log ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// `event: end` / `data: null` (no id), then the body ends.
    End,
    /// Scripted fault: the consumer's connection is cut.
    Abort,
    /// Scripted fault: the body ends cleanly without `end`.
    Close,
    /// The simulator stopped: the body ends without `end`.
    Stopped,
}

/// What a subscriber reads next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A whole frame, `id:` line and blank line included.
    Frame(Bytes),
    /// The `gap` frame; the subscription is over.
    Gap(Bytes),
    /// No event for one heartbeat interval.
    Heartbeat,
    /// The log's tail; the subscription is over.
    Tail(Tail),
}

#[derive(Debug)]
struct Entry {
    id: String,
    frame: Bytes,
}

#[derive(Debug)]
struct Log {
    events: VecDeque<Entry>,
    /// Absolute offset (`seq`) of `events[0]`.
    start_offset: u64,
    capacity: usize,
    tail: Option<Tail>,
    /// Bytes of the retained frames.
    bytes: usize,
    /// Losses scripted so far; a subscription made after one does not meet it.
    losses: u64,
    /// The latest scripted loss.
    loss: Option<Loss>,
}

/// A scripted loss of the readers subscribed before it.
#[derive(Debug, Clone, Copy)]
struct Loss {
    how: StreamLoss,
    /// `Log::losses` once it was scripted: subscriptions made before it meet it.
    number: u64,
    /// Absolute offset of the first event published after it: its readers read the events
    /// before it first.
    at: u64,
}

/// One run's log; shared by the executor and the subscribers.
#[derive(Debug)]
pub(crate) struct RunStream {
    run_id: String,
    log: Mutex<Log>,
    /// Bumped on every publish and on the tail.
    changed: watch::Sender<u64>,
}

impl RunStream {
    /// An empty log retaining at most `capacity` events (at least one).
    pub(crate) fn new(run_id: &str, capacity: usize) -> Self {
        Self {
            run_id: run_id.to_owned(),
            log: Mutex::new(Log {
                events: VecDeque::new(),
                start_offset: 0,
                capacity: capacity.max(1),
                tail: None,
                bytes: 0,
                losses: 0,
                loss: None,
            }),
            changed: watch::channel(0).0,
        }
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Appends a frame buffer (its `event:` and `data:` lines, see `sse::Event::frame`)
    /// under the next id. Ignored once the log has its tail.
    pub(crate) fn publish(&self, buf: Vec<u8>) {
        {
            let mut log = self.log();
            if log.tail.is_some() {
                return;
            }
            let seq = log.start_offset + log.events.len() as u64;
            let id = format!("{}-{seq}", wire::unix_millis());
            let frame = Bytes::from(sse::finish_frame(buf, Some(&id)));
            log.bytes += frame.len();
            log.events.push_back(Entry { id, frame });
            while log.events.len() > log.capacity {
                if let Some(old) = log.events.pop_front() {
                    log.bytes -= old.frame.len();
                    log.start_offset += 1;
                }
            }
        }
        self.bump();
    }

    /// Ends the log with `tail` (the first tail wins).
    pub(crate) fn finish(&self, tail: Tail) {
        {
            let mut log = self.log();
            if log.tail.is_some() {
                return;
            }
            log.tail = Some(tail);
        }
        self.bump();
    }

    /// Makes the readers subscribed now lose the events (`how`) once they read those
    /// published so far; the run's log goes on.
    pub(crate) fn lose_readers(&self, how: StreamLoss) {
        {
            let mut log = self.log();
            log.losses += 1;
            log.loss = Some(Loss {
                how,
                number: log.losses,
                at: log.start_offset + log.events.len() as u64,
            });
        }
        self.bump();
    }

    /// The log's tail, once it has one.
    pub(crate) fn tail(&self) -> Option<Tail> {
        self.log().tail
    }

    /// Bytes of the retained frames.
    pub(crate) fn retained_bytes(&self) -> usize {
        self.log().bytes
    }

    /// Waits for the tail (or the simulator stopping).
    pub(crate) async fn wait_tail(&self, stop: &CancellationToken) -> Tail {
        let mut changed = self.changed.subscribe();
        loop {
            changed.borrow_and_update();
            if let Some(tail) = self.tail() {
                return tail;
            }
            tokio::select! {
                result = changed.changed() => if result.is_err() { return Tail::Stopped },
                () = stop.cancelled() => return Tail::Stopped,
            }
        }
    }

    /// A subscription from the start of the retained events, or after `last_event_id` as
    /// the module doc says.
    pub(crate) fn subscribe(self: &Arc<Self>, last_event_id: Option<&str>) -> Subscription {
        let changed = self.changed.subscribe();
        let log = self.log();
        let (next, gap) = match resolve_start(&log, last_event_id) {
            Ok(offset) => (offset, false),
            Err(()) => (log.start_offset, true),
        };
        let losses = log.losses;
        drop(log);
        Subscription {
            stream: Arc::clone(self),
            changed,
            next,
            cursor: last_event_id.map(str::to_owned),
            pending_gap: gap,
            losses,
            over: false,
        }
    }

    fn gap_frame(&self, log: &Log, requested: Option<&str>) -> Bytes {
        let (first, last) = (log.events.front(), log.events.back());
        let data = json!({
            "code": "stream_replay_gap",
            "run_id": self.run_id,
            "requested_event_id": requested,
            "earliest_available_event_id": first.map(|e| e.id.as_str()),
            "latest_available_event_id": last.map(|e| e.id.as_str()),
            "recovery": "reload_durable_state",
        });
        let sse::Event(buf) =
            sse::Event::frame("gap", 256, |buf| serde_json::to_writer(buf, &data));
        Bytes::from(sse::finish_frame(buf, None))
    }
}

/// Where a subscription starts: an absolute offset, or `Err` for a gap.
fn resolve_start(log: &Log, last_event_id: Option<&str>) -> Result<u64, ()> {
    let Some(id) = last_event_id else {
        return Ok(log.start_offset);
    };
    if let Some(seq) = parse_seq(id) {
        if !log.events.is_empty() && seq < log.start_offset {
            return Err(());
        }
        let index = seq
            .checked_sub(log.start_offset)
            .and_then(|i| usize::try_from(i).ok());
        if let Some(entry) = index.and_then(|i| log.events.get(i))
            && entry.id == id
        {
            return Ok(seq + 1);
        }
    }
    Ok(log.start_offset)
}

/// The `seq` of an id shaped `{digits}-{digits}`.
fn parse_seq(id: &str) -> Option<u64> {
    let (ms, seq) = id.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(ms) || !digits(seq) {
        return None;
    }
    seq.parse().ok()
}

/// A reader of one [`RunStream`].
#[derive(Debug)]
pub(crate) struct Subscription {
    stream: Arc<RunStream>,
    changed: watch::Receiver<u64>,
    /// Absolute offset of the next event to read.
    next: u64,
    /// The last id read (or asked for), for a gap frame.
    cursor: Option<String>,
    pending_gap: bool,
    /// `Log::losses` when it subscribed: it meets only the losses scripted after.
    losses: u64,
    over: bool,
}

impl Subscription {
    /// The next item: a retained or live frame, a heartbeat after `heartbeat` of silence
    /// (`None`: never), the gap, or the tail. After a gap or the tail, `None`.
    pub(crate) async fn next(
        &mut self,
        heartbeat: Option<Duration>,
        stop: &CancellationToken,
    ) -> Option<Item> {
        if self.over {
            return None;
        }
        loop {
            self.changed.borrow_and_update();
            if let Some(item) = self.poll() {
                if matches!(item, Item::Gap(_) | Item::Tail(_)) {
                    self.over = true;
                }
                return Some(item);
            }
            let wait = async {
                match heartbeat {
                    Some(every) => tokio::time::timeout(every, self.changed.changed()).await,
                    None => Ok(self.changed.changed().await),
                }
            };
            tokio::select! {
                waited = wait => match waited {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => {
                        self.over = true;
                        return Some(Item::Tail(Tail::Stopped));
                    }
                    Err(_) => return Some(Item::Heartbeat),
                },
                () = stop.cancelled() => {
                    self.over = true;
                    return Some(Item::Tail(Tail::Stopped));
                }
            }
        }
    }

    /// What is ready now, without waiting.
    fn poll(&mut self) -> Option<Item> {
        let log = self.stream.log();
        if std::mem::take(&mut self.pending_gap) || self.next < log.start_offset {
            return Some(Item::Gap(
                self.stream.gap_frame(&log, self.cursor.as_deref()),
            ));
        }
        if let Some(loss) = log.loss
            && loss.number > self.losses
            && self.next >= loss.at
        {
            return Some(match loss.how {
                StreamLoss::Drop => Item::Tail(Tail::Abort),
                StreamLoss::Gap => Item::Gap(self.stream.gap_frame(&log, self.cursor.as_deref())),
            });
        }
        let index = usize::try_from(self.next - log.start_offset).ok();
        if let Some(entry) = index.and_then(|i| log.events.get(i)) {
            self.next += 1;
            self.cursor = Some(entry.id.clone());
            return Some(Item::Frame(entry.frame.clone()));
        }
        log.tail.map(Item::Tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str) -> Vec<u8> {
        sse::Event::frame_json(name, "null").0
    }

    fn text(item: &Item) -> String {
        match item {
            Item::Frame(b) | Item::Gap(b) => String::from_utf8(b.to_vec()).unwrap(),
            other => format!("{other:?}"),
        }
    }

    async fn drain(stream: &Arc<RunStream>, last: Option<&str>) -> Vec<Item> {
        let stop = CancellationToken::new();
        let mut sub = stream.subscribe(last);
        let mut items = Vec::new();
        while let Some(item) = sub.next(None, &stop).await {
            items.push(item);
        }
        items
    }

    fn id_of(item: &Item) -> String {
        let t = text(item);
        let line = t.lines().find(|l| l.starts_with("id: ")).unwrap();
        line["id: ".len()..].to_owned()
    }

    #[tokio::test]
    async fn ids_count_the_runs_events_and_replays_resume_after_a_known_id() {
        let s = Arc::new(RunStream::new("r", 8));
        for name in ["metadata", "values", "values"] {
            s.publish(frame(name));
        }
        s.finish(Tail::End);
        s.publish(frame("late"));
        let all = drain(&s, None).await;
        assert_eq!(all.len(), 4);
        assert!(id_of(&all[0]).ends_with("-0"));
        assert!(id_of(&all[2]).ends_with("-2"));
        assert_eq!(all[3], Item::Tail(Tail::End));
        let after = drain(&s, Some(&id_of(&all[1]))).await;
        assert_eq!(after.len(), 2);
        assert_eq!(text(&after[0]), text(&all[2]));
        // An id the log never had (or not shaped like one) replays everything.
        assert_eq!(drain(&s, Some("1-1")).await.len(), 4);
        assert_eq!(drain(&s, Some("nonsense")).await.len(), 4);
    }

    #[tokio::test]
    async fn an_id_older_than_the_window_is_a_gap() {
        let s = Arc::new(RunStream::new("r", 2));
        for _ in 0..4 {
            s.publish(frame("values"));
        }
        s.finish(Tail::End);
        let all = drain(&s, None).await;
        assert_eq!(all.len(), 3, "two retained events and end");
        assert!(id_of(&all[0]).ends_with("-2"));
        let gap = drain(&s, Some("5-1")).await;
        assert_eq!(gap.len(), 1);
        let Item::Gap(bytes) = &gap[0] else {
            panic!("{gap:?}")
        };
        let body = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(body.starts_with("event: gap\ndata: {"), "{body}");
        assert!(body.contains("\"requested_event_id\":\"5-1\""), "{body}");
        assert!(
            body.ends_with("}\n\n") && !body.contains("\nid: "),
            "{body}"
        );
    }

    #[tokio::test]
    async fn live_subscribers_see_new_events_and_heartbeats() {
        let s = Arc::new(RunStream::new("r", 8));
        let stop = CancellationToken::new();
        let mut sub = s.subscribe(None);
        let beat = sub.next(Some(Duration::from_millis(10)), &stop).await;
        assert_eq!(beat, Some(Item::Heartbeat));
        s.publish(frame("metadata"));
        let got = sub.next(None, &stop).await.unwrap();
        assert!(text(&got).starts_with("event: metadata\n"));
        stop.cancel();
        assert_eq!(sub.next(None, &stop).await, Some(Item::Tail(Tail::Stopped)));
        assert_eq!(sub.next(None, &stop).await, None);
    }

    #[tokio::test]
    async fn a_loss_ends_only_the_readers_reading_then_after_the_events_before_it() {
        for (how, last) in [(StreamLoss::Drop, "Tail(Abort)"), (StreamLoss::Gap, "gap")] {
            let s = Arc::new(RunStream::new("r", 8));
            let stop = CancellationToken::new();
            let mut reading = s.subscribe(None);
            s.publish(frame("metadata"));
            s.lose_readers(how);
            s.publish(frame("values"));
            s.finish(Tail::End);
            let first = reading.next(None, &stop).await.unwrap();
            assert!(text(&first).starts_with("event: metadata\n"), "{how:?}");
            let lost = reading.next(None, &stop).await.unwrap();
            assert!(text(&lost).contains(last), "{how:?}: {lost:?}");
            assert_eq!(reading.next(None, &stop).await, None);
            // A reader that comes later (a join) reads the whole run.
            let later = drain(&s, None).await;
            assert_eq!(later.len(), 3, "{how:?}");
            assert_eq!(later[2], Item::Tail(Tail::End));
        }
    }

    #[test]
    fn ids_parse_like_the_bridge() {
        assert_eq!(parse_seq("1796185555218-14"), Some(14));
        assert_eq!(parse_seq("-1"), None);
        assert_eq!(parse_seq("1-"), None);
        assert_eq!(parse_seq("a-1"), None);
    }
}
