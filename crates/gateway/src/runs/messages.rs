//! `GET {langgraph_url}/threads/{id}/runs/{run_id}/messages` (DeerFlow's
//! `list_run_messages`): the messages one run wrote, from the Gateway's run event store,
//! whatever became of the thread since (a later summarization or compaction, another run).
//!
//! The bridge reads it only when a run that ended left no turn in the thread's state
//! (`Snapshot::of_run`). Each row's `content` is a message dump; rows of model calls made
//! by middleware or subagents (`metadata.caller` `middleware:…` / `subagent:…`, such as a
//! title or a summary) are not the run's answer and are left out.
//!
//! The record keeps no prompt of a goal's continuations (DeerFlow's run journal writes
//! only the run's first human message), but each continuation is a new invocation of the
//! agent inside the run, which writes a `run.start` event (`runtime/journal.py`) with a
//! place in the same sequence as the messages. So the `run.start` events are read too
//! (`GET …/runs/{run_id}/events?event_types=run.start`), and where a later one falls
//! between the rows a [`Message::goal_continuation`] stands in for its prompt: the answer
//! splits into its segments as the thread's state would split it, and a restart that
//! published some of them publishes only the rest. When the events cannot be read the
//! rows are taken at once, as one segment (there is no receipt to wait for); when they
//! were read before, the failure is taken for a passing one and the receipt awaited as
//! before, the segments as the last read told them.
//!
//! DeerFlow marks a run succeeded before it writes the last of the run's record (its
//! journal writes in batches, the last after the run's end and a scan of its workspace),
//! then a `run.delivery` receipt. So the events are read first, the receipt with them:
//! with the receipt, every message row is there too (but for a last write that failed,
//! which DeerFlow logs and receipts all the same). Without it the record is read again,
//! for about six seconds, before it is taken as it is: nothing in the rows themselves
//! tells that an invocation ended (a middleware may send the agent back to its model after
//! an answer, or after a question it may not ask), and a whole continuation may still be
//! unwritten, its `run.start` too. A Gateway that writes no receipt (DeerFlow before its
//! run delivery receipts) pays those seconds on each such read. A run of many tool calls
//! writes more than one page of rows: older pages are read while there are more (at most
//! [`MAX_PAGES`], the newest kept: an answer is at the end), whether or not the run's start
//! is known, so a file the agent presented early in a long run is not missed. A record read
//! again while it settles is read on from its newest row (`after_seq`), not from the start:
//! no row older than one read can show up later in DeerFlow's event stores (`db.py`
//! numbers a thread's rows under a lock held until they are committed, `memory.py` writes
//! without yielding, `jsonl.py` appends under its write lock; a batch written again after
//! a failure is numbered anew). A record whose newest row has no `seq`, that grew by more
//! than [`MAX_PAGES`] pages since, or a page with rows not after the cursor, is read from
//! the newest page back again.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::client::{GatewayClient, Owner};
use crate::error::GatewayError;
use crate::{Message, ThreadId};

/// The rows read: the most the Gateway serves in one page.
pub const PAGE: usize = 200;
/// The events read: a `run.start` per invocation (a goal has at most 8 continuations) and
/// the receipt.
const EVENTS: usize = 100;
/// Pages of rows read at the most.
pub const MAX_PAGES: usize = 5;
/// The waits before a record without its receipt is read again: 5.9 s in all.
const SETTLING: [Duration; 7] = [
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_millis(1000),
    Duration::from_millis(1500),
    Duration::from_millis(2500),
];

/// One row of the run's messages.
#[derive(Deserialize)]
struct Row {
    /// The row's place in the thread's event sequence (messages and events alike).
    #[serde(default)]
    seq: Option<i64>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    metadata: Value,
}

impl Row {
    /// Whether the row is a message of the run's own agent (not of a middleware's or a
    /// subagent's model call).
    fn is_the_agents(&self) -> bool {
        let caller = self.metadata.get("caller").and_then(Value::as_str);
        self.category.as_deref() == Some("message")
            && !caller.is_some_and(|c| c.starts_with("middleware:") || c.starts_with("subagent:"))
    }
}

#[derive(Deserialize)]
struct Page {
    data: Vec<Row>,
    #[serde(default)]
    has_more: bool,
}

/// One event of the run's: its type and place in the sequence are read.
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    seq: Option<i64>,
    #[serde(default)]
    event_type: String,
}

/// What the run's events tell of its record.
#[derive(Debug, Default, PartialEq, Eq)]
struct Events {
    /// Where the run and each goal continuation in it started (`run.start`), in order.
    starts: Vec<i64>,
    /// Whether the run's receipt (`run.delivery`) is written: the record is whole.
    delivered: bool,
}

impl Events {
    fn of(events: &[Event]) -> Self {
        let mut starts: Vec<i64> = events
            .iter()
            .filter(|event| event.event_type == "run.start")
            .filter_map(|event| event.seq)
            .collect();
        starts.sort_unstable();
        let delivered = events.iter().any(|e| e.event_type == "run.delivery");
        Self { starts, delivered }
    }
}

/// The agent's messages of `rows` (oldest first), with a continuation's stand-in before
/// the rows that come after each of `starts` but the first (the run's own start).
fn read(rows: &[Row], starts: &[i64]) -> Vec<Message> {
    let mut continuations = starts.iter().skip(1).copied().peekable();
    let mut out = Vec::with_capacity(rows.len() + starts.len());
    for row in rows {
        if let Some(seq) = row.seq {
            while continuations.next_if(|start| *start < seq).is_some() {
                out.push(Message::goal_continuation());
            }
        }
        if row.is_the_agents() {
            out.push(Message::from_value(&row.content));
        }
    }
    // A continuation that began after the last row read wrote nothing yet: an empty
    // segment of its own, as in the thread's state.
    out.extend(continuations.map(|_| Message::goal_continuation()));
    out
}

/// Says that a run's record is longer than read (never a row's text).
fn warn_cut(rows: usize) {
    tracing::warn!(
        rows,
        "A run's record is longer than the bridge reads; its oldest rows are left out."
    );
}

impl GatewayClient {
    /// The messages run `run_id` of `thread` wrote, oldest first (see the module docs). A
    /// Gateway without the route is [`GatewayError::RouteMissing`] (FastAPI's bare 404).
    pub async fn run_messages(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
    ) -> Result<Vec<Message>, GatewayError> {
        let mut settling = SETTLING.iter();
        let mut rows: Option<Vec<Row>> = None;
        // The run's starts, once its events were read.
        let mut starts: Option<Vec<i64>> = None;
        loop {
            // The events first: once the receipt is written, so is every message row.
            let events = self.run_events(owner, thread, run_id).await;
            let read_so_far = rows.take();
            let record = match read_so_far {
                None => self.run_rows(owner, thread, run_id).await?,
                Some(read_so_far) => self.newer_rows(owner, thread, run_id, read_so_far).await?,
            };
            match (events, &starts) {
                (Ok(events), _) => {
                    if events.delivered {
                        return Ok(read(&record, &events.starts));
                    }
                    starts = Some(events.starts);
                }
                (Err(error), None) => {
                    // No receipt to wait for either.
                    tracing::warn!(%error, "Reading a run's events failed; its messages read as one segment.");
                    return Ok(read(&record, &[]));
                }
                // Read before, so the route is there: no receipt yet, for now.
                (Err(error), Some(_)) => {
                    tracing::warn!(%error, "Reading a run's events again failed; waiting for its receipt as before.");
                }
            }
            let starts = starts.as_deref().unwrap_or_default();
            let Some(wait) = settling.next() else {
                tracing::warn!(
                    "A run's record has no receipt yet; read as it is, perhaps cut short."
                );
                return Ok(read(&record, starts));
            };
            rows = Some(record);
            tokio::time::sleep(*wait).await;
        }
    }

    /// The rows of run `run_id`'s messages, oldest first: the newest page, and older ones
    /// while there are more (at most [`MAX_PAGES`] in all).
    async fn run_rows(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
    ) -> Result<Vec<Row>, GatewayError> {
        let mut rows: Vec<Row> = Vec::new();
        let mut before: Option<i64> = None;
        for pages in 1..=MAX_PAGES {
            let rest = match before {
                None => format!("/messages?limit={PAGE}"),
                Some(seq) => format!("/messages?limit={PAGE}&before_seq={seq}"),
            };
            let url = self.run_url(thread, run_id, &rest)?;
            let mut page: Page = self.get_json("run_messages", &url, owner).await?;
            let oldest = page.data.first().and_then(|row| row.seq);
            page.data.append(&mut rows);
            rows = page.data;
            match (page.has_more, oldest) {
                // `before_seq` is at least 1.
                (true, Some(oldest)) if oldest > 1 => before = Some(oldest),
                _ => break,
            }
            if pages == MAX_PAGES {
                warn_cut(rows.len());
            }
        }
        Ok(rows)
    }

    /// `rows` read before and those written after them, oldest first, the newest
    /// [`MAX_PAGES`] pages' worth at the most. Read on from the newest row read; from the
    /// newest page back (as [`Self::run_rows`]) when nothing with a place was read yet, more
    /// than [`MAX_PAGES`] pages came since, or a page answered rows not after the cursor.
    async fn newer_rows(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
        mut rows: Vec<Row>,
    ) -> Result<Vec<Row>, GatewayError> {
        let Some(mut after) = rows.last().and_then(|row| row.seq).filter(|seq| *seq >= 1) else {
            return self.run_rows(owner, thread, run_id).await;
        };
        let mut cut_any = false;
        for _ in 0..MAX_PAGES {
            let rest = format!("/messages?limit={PAGE}&after_seq={after}");
            let url = self.run_url(thread, run_id, &rest)?;
            let page: Page = self.get_json("run_messages", &url, owner).await?;
            if page
                .data
                .iter()
                .any(|row| row.seq.is_none_or(|seq| seq <= after))
            {
                // Not read on from `after` (a Gateway or proxy that drops the cursor).
                return self.run_rows(owner, thread, run_id).await;
            }
            let newest = page.data.last().and_then(|row| row.seq);
            rows.extend(page.data);
            // The newest pages' worth kept as it comes, not once read on to the end.
            let cut = rows.len().saturating_sub(MAX_PAGES * PAGE);
            if cut > 0 {
                rows.drain(..cut);
                cut_any = true;
            }
            match newest {
                Some(newest) if page.has_more && newest > after => after = newest,
                _ => {
                    if cut_any {
                        warn_cut(rows.len());
                    }
                    return Ok(rows);
                }
            }
        }
        // Written faster than read on: its newest pages, as on a first read.
        self.run_rows(owner, thread, run_id).await
    }

    /// What run `run_id`'s events tell of its record: its `run.start` events and its
    /// receipt.
    async fn run_events(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
    ) -> Result<Events, GatewayError> {
        let rest = format!("/events?event_types=run.start,run.delivery&limit={EVENTS}");
        let url = self.run_url(thread, run_id, &rest)?;
        let events: Vec<Event> = self.get_json("run_events", &url, owner).await?;
        Ok(Events::of(&events))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_agents_messages_are_read() {
        // Shaped like DeerFlow's run event rows (`runtime/journal.py`).
        let page: Page = serde_json::from_value(json!({"data": [
            {"seq": 1, "event_type": "llm.human.input", "category": "message",
             "content": {"type": "human", "content": "hi"}, "metadata": {"caller": "lead_agent"}},
            {"seq": 2, "event_type": "llm.ai.response", "category": "message",
             "content": {"type": "ai", "content": "Hello."}, "metadata": {"caller": "lead_agent"}},
            {"seq": 3, "event_type": "llm.tool.result", "category": "message",
             "content": {"type": "tool", "content": "done", "tool_call_id": "c"}},
            {"seq": 4, "event_type": "llm.ai.response", "category": "message",
             "content": {"type": "ai", "content": "A title"}, "metadata": {"caller": "middleware:title"}},
            {"seq": 5, "event_type": "run.end", "category": "lifecycle", "content": {}},
        ], "has_more": false}))
        .unwrap();
        let texts: Vec<String> = read(&page.data, &[])
            .iter()
            .map(|message| message.text().to_owned())
            .collect();
        assert_eq!(texts, ["hi", "Hello.", "done"]);
    }

    #[test]
    fn each_later_start_stands_for_a_continuation_where_it_falls() {
        // A run whose goal went on twice: starts at 1, 4 and 7; the second continuation
        // wrote nothing yet, and a third began after the last row read.
        let rows: Vec<Row> = serde_json::from_value(json!([
            {"seq": 2, "category": "message", "content": {"type": "human", "content": "hi"}},
            {"seq": 3, "category": "message", "content": {"type": "ai", "content": "one"}},
            {"seq": 5, "category": "message", "content": {"type": "ai", "content": "two"}},
            {"seq": 6, "category": "message", "content": {"type": "tool", "content": "t", "tool_call_id": "c"}},
            {"seq": 9, "category": "message", "content": {"type": "ai", "content": "four"}},
        ]))
        .unwrap();
        let shown = read(&rows, &[1, 4, 7, 8, 10]);
        let shape: Vec<String> = shown
            .iter()
            .map(|m| {
                if m.is_goal_continuation() {
                    "|".to_owned()
                } else {
                    m.text().to_owned()
                }
            })
            .collect();
        assert_eq!(shape, ["hi", "one", "|", "two", "t", "|", "|", "four", "|"]);
    }

    #[test]
    fn the_receipt_and_the_starts_are_told_apart() {
        let events: Vec<Event> = serde_json::from_value(json!([
            {"seq": 9, "event_type": "run.start", "category": "trace", "content": {}},
            {"seq": 1, "event_type": "run.start", "category": "trace", "content": {}},
            {"seq": 12, "event_type": "run.delivery", "category": "outputs", "content": {}},
        ]))
        .unwrap();
        let events = Events::of(&events);
        assert_eq!(events.starts, [1, 9]);
        assert!(events.delivered);
        assert!(!Events::of(&[]).delivered);
    }
}
