//! `GET {langgraph_url}/threads/{id}/runs/{run_id}/messages` (DeerFlow's
//! `list_run_messages`): the messages one run wrote, from the Gateway's run event store,
//! whatever became of the thread since (a later summarization or compaction, another run).
//!
//! The bridge reads it only when a run that ended left no turn in the thread's state
//! (`Snapshot::of_run`). Each row's `content` is a message dump; rows of model calls made
//! by middleware or subagents (`metadata.caller` `middleware:…` / `subagent:…`, such as a
//! title or a summary) are not the run's answer and are left out. One page of the newest
//! [`PAGE`] rows is read: an answer is at its end.

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use crate::client::{GatewayClient, Owner, read_json};
use crate::error::{CallFamily, GatewayError};
use crate::{Message, ThreadId};

/// The rows read: the most the Gateway serves in one page.
pub const PAGE: usize = 200;

/// One row of the run's messages.
#[derive(Deserialize)]
struct Row {
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
        Ok(page
            .data
            .iter()
            .filter(|row| row.is_the_agents())
            .map(|row| Message::from_value(&row.content))
            .collect())
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
        let texts: Vec<String> = page
            .data
            .iter()
            .filter(|row| row.is_the_agents())
            .map(|row| Message::from_value(&row.content).text().to_owned())
            .collect();
        assert_eq!(texts, ["hi", "Hello.", "done"]);
    }
}
