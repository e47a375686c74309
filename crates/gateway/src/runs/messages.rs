//! `GET {langgraph_url}/threads/{id}/runs/{run_id}/messages` (DeerFlow's
//! `list_run_messages`): the messages one run wrote, from the Gateway's run event store,
//! whatever became of the thread since (a later summarization or compaction, another run).
//!
//! The bridge reads it only when a run that ended left no turn in the thread's state
//! (`Snapshot::of_run`). Each row's `content` is a message dump; rows of model calls made
//! by middleware or subagents (`metadata.caller` `middleware:…` / `subagent:…`, such as a
//! title or a summary) are not the run's answer and are left out. One page of the newest
//! [`PAGE`] rows is read: an answer is at its end.
//!
//! The record keeps no prompt of a goal's continuations (DeerFlow's run journal writes
//! only the run's first human message), but each continuation is a new invocation of the
//! agent inside the run, which writes a `run.start` event (`runtime/journal.py`) with a
//! place in the same sequence as the messages. So the `run.start` events are read too
//! (`GET …/runs/{run_id}/events?event_types=run.start`), and where a later one falls
//! between the rows a [`Message::goal_continuation`] stands in for its prompt: the answer
//! splits into its segments as the thread's state would split it, and a restart that
//! published some of them publishes only the rest. When the events cannot be read the run
//! reads as one segment.

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use crate::client::{GatewayClient, Owner, read_json};
use crate::error::{CallFamily, GatewayError};
use crate::{Message, ThreadId};

/// The rows read: the most the Gateway serves in one page.
pub const PAGE: usize = 200;
/// The `run.start` events read: one a continuation, far more than a goal's most.
const STARTS: usize = 100;

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
}

/// One event of the run's: only its place in the sequence is read.
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    seq: Option<i64>,
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

impl GatewayClient {
    /// The messages run `run_id` of `thread` wrote, oldest first (see the module docs). A
    /// Gateway without the route is [`GatewayError::NotFound`] (as any unknown route).
    pub async fn run_messages(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
    ) -> Result<Vec<Message>, GatewayError> {
        let url = self.run_url(thread, run_id, &format!("/messages?limit={PAGE}"))?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(self.config().request_timeout);
        let response = self
            .send("run_messages", CallFamily::Plain, request)
            .await?;
        let page: Page = read_json(response, "run_messages").await?;
        let starts = match self.run_starts(owner, thread, run_id).await {
            Ok(starts) => starts,
            Err(error) => {
                tracing::debug!(%error, "Reading a run's starts failed; its messages read as one segment.");
                Vec::new()
            }
        };
        Ok(read(&page.data, &starts))
    }

    /// Where in the thread's sequence run `run_id` (and each goal continuation in it)
    /// started: its `run.start` events, in order.
    async fn run_starts(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
    ) -> Result<Vec<i64>, GatewayError> {
        let rest = format!("/events?event_types=run.start&limit={STARTS}");
        let url = self.run_url(thread, run_id, &rest)?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(self.config().request_timeout);
        let response = self.send("run_events", CallFamily::Plain, request).await?;
        let events: Vec<Event> = read_json(response, "run_events").await?;
        let mut starts: Vec<i64> = events.iter().filter_map(|event| event.seq).collect();
        starts.sort_unstable();
        Ok(starts)
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
        let read = read(&rows, &[1, 4, 7, 8, 10]);
        let shape: Vec<String> = read
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
}
