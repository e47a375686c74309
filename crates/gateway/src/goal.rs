//! The goal routes (gateway.md §4.1, §4.5), manual compaction (§4.7), a thread's `/state`
//! (§2.4) and the typed views of goal state found in its values (§4.3).
//!
//! The typed structs deliberately leave out the evaluator's free text (`reason`,
//! `evidence_summary`): status replies show fixed localized phrases per code, so those
//! strings never need to leave this module. Unknown fields are ignored and missing ones
//! default, since the Gateway's goal shapes grow between versions.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{Base, GatewayClient, Owner, read_json};
use crate::error::{CallFamily, GatewayError};
use crate::routes::OptionalRoute;

use crate::ThreadId;

/// Longest `/goal from-chat` hint in characters; a longer one is refused locally.
pub const MAX_HINT_CHARS: usize = 4000;

/// A thread's active goal (`GoalState`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GoalState {
    /// The normalised objective (user- or model-written; shown as "Goal: …").
    pub objective: String,
    /// Always `active` while a goal exists.
    #[serde(default)]
    pub status: String,
    /// Automatic continuations used so far.
    #[serde(default)]
    pub continuation_count: u32,
    /// Automatic continuation budget (≤ 8).
    #[serde(default)]
    pub max_continuations: u32,
    /// Consecutive continuations without progress.
    #[serde(default)]
    pub no_progress_count: u32,
    /// The latest evaluation, when one ran.
    #[serde(default)]
    pub last_evaluation: Option<GoalEvaluation>,
}

/// The codes of a goal evaluation (free-text fields omitted on purpose).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GoalEvaluation {
    /// Whether the evaluator judged the goal met.
    #[serde(default)]
    pub satisfied: bool,
    /// Blocker code: `none`, `missing_evidence`, `needs_user_input`, `run_failed`,
    /// `external_wait`, `goal_not_met_yet`.
    #[serde(default)]
    pub blocker: Option<String>,
    /// Why auto-continuation stopped (`max_continuations_reached`, `blocked:<blocker>` …),
    /// present only when it did.
    #[serde(default)]
    pub stand_down_reason: Option<String>,
}

/// `goal_outcome` from state values (newer Gateways): written when a goal is met.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GoalOutcome {
    /// Always `achieved`.
    #[serde(default)]
    pub status: String,
    /// The objective that was met.
    #[serde(default)]
    pub objective: String,
    /// When it was met (ISO 8601).
    #[serde(default)]
    pub achieved_at: Option<String>,
    /// Continuations used.
    #[serde(default)]
    pub continuation_count: u32,
    /// The continuation budget it had.
    #[serde(default)]
    pub max_continuations: u32,
}

/// `GET …/state`: the thread's current state values.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ThreadState {
    /// The channel values (`messages`, `title`, `goal`, `goal_outcome`, …).
    #[serde(default)]
    pub values: Value,
}

impl ThreadState {
    /// `values.goal`, when a goal is active and well-formed.
    pub fn goal(&self) -> Option<GoalState> {
        typed(self.values.get("goal"))
    }

    /// `values.goal_outcome`, when the last goal was met (newer Gateways only).
    pub fn goal_outcome(&self) -> Option<GoalOutcome> {
        typed(self.values.get("goal_outcome"))
    }
}

fn typed<T: serde::de::DeserializeOwned>(value: Option<&Value>) -> Option<T> {
    match value {
        None | Some(Value::Null) => None,
        Some(value) => T::deserialize(value).ok(),
    }
}

#[derive(Deserialize)]
struct GoalEnvelope {
    #[serde(default)]
    goal: Option<GoalState>,
}

/// How much context `compact_thread` keeps verbatim.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompactRequest {
    /// Keep the last N messages (`keep: {"type": "messages", "value": N}`); `None` uses the
    /// server's setting.
    pub keep_messages: Option<u32>,
    /// The custom agent whose model summarizes (`agent_name`).
    pub agent_name: Option<String>,
    /// The model that summarizes (`model_name`): the one the conversation's runs name in
    /// `context.model_name`, so the summary is written by the model the chat uses. `None`:
    /// the agent's model, else the Gateway's default.
    pub model_name: Option<String>,
}

impl CompactRequest {
    /// The body as sent: `force: true`, then the optional parts.
    fn wire(&self) -> CompactBody<'_> {
        CompactBody {
            force: true,
            keep: self.keep_messages.map(|value| Keep {
                r#type: "messages",
                value,
            }),
            agent_name: self.agent_name.as_deref(),
            model_name: self.model_name.as_deref(),
        }
    }
}

#[derive(Serialize)]
struct CompactBody<'a> {
    force: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    keep: Option<Keep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_name: Option<&'a str>,
}

#[derive(Serialize)]
struct Keep {
    r#type: &'static str,
    value: u32,
}

/// The result of a compaction.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CompactOutcome {
    /// Whether anything was compacted.
    pub compacted: bool,
    /// When not compacted, a reason code such as `not_enough_messages` (a code, not prose;
    /// map known codes to localized phrases).
    #[serde(default)]
    pub reason: Option<String>,
    /// Messages folded into the summary.
    #[serde(default)]
    pub removed_message_count: u64,
    /// Messages kept verbatim.
    #[serde(default)]
    pub preserved_message_count: u64,
    /// The new checkpoint, on success.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
}

impl GatewayClient {
    /// `GET {langgraph_url}/threads/{id}/state` (§2.4): the current state values, read
    /// for their goal views.
    pub async fn get_thread_state(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
    ) -> Result<ThreadState, GatewayError> {
        let url = self.thread_url(Base::LangGraph, thread, "/state")?;
        self.get_json("get_thread_state", &url, owner).await
    }

    /// `GET {gateway_url}/api/threads/{id}/goal`: the active goal, or `None`.
    pub async fn get_goal(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
    ) -> Result<Option<GoalState>, GatewayError> {
        let url = self.thread_url(Base::Gateway, thread, "/goal")?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(self.config().request_timeout);
        let response = self.send("get_goal", CallFamily::Plain, request).await?;
        Ok(read_json::<GoalEnvelope>(response, "get_goal").await?.goal)
    }

    /// `PUT {gateway_url}/api/threads/{id}/goal` with `{"objective": …}` only: replaces the
    /// goal and returns it as saved (normalised). 409 (run in flight) is `Busy`.
    pub async fn put_goal(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        objective: &str,
    ) -> Result<GoalState, GatewayError> {
        let url = self.thread_url(Base::Gateway, thread, "/goal")?;
        let request = self
            .request(Method::PUT, &url, owner)?
            .timeout(self.config().request_timeout)
            .json(&serde_json::json!({ "objective": objective }));
        let response = self
            .send("put_goal", CallFamily::GoalWrite, request)
            .await?;
        read_json::<GoalEnvelope>(response, "put_goal")
            .await?
            .goal
            .ok_or(GatewayError::Decode { what: "put_goal" })
    }

    /// `DELETE {gateway_url}/api/threads/{id}/goal`. 409 (run in flight) is `Busy`.
    pub async fn delete_goal(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
    ) -> Result<(), GatewayError> {
        let url = self.thread_url(Base::Gateway, thread, "/goal")?;
        let request = self
            .request(Method::DELETE, &url, owner)?
            .timeout(self.config().request_timeout);
        self.send("delete_goal", CallFamily::GoalWrite, request)
            .await?;
        Ok(())
    }

    /// `POST {gateway_url}/api/threads/{id}/goal/from-chat` (§4.5): the server composes a goal
    /// from the conversation and saves it. A Gateway without the route (DeerFlow's snapshot
    /// has none) answers [`GatewayError::RouteMissing`], which the client also remembers
    /// ([`GatewayClient::route_support`]). The `hint` key is omitted when there is no
    /// non-blank hint; a hint over [`MAX_HINT_CHARS`] is refused locally. Bounded by
    /// `from_chat_timeout`; on `Timeout` the goal may or may not have been saved.
    pub async fn goal_from_chat(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        hint: Option<&str>,
    ) -> Result<GoalState, GatewayError> {
        #[derive(Serialize)]
        struct Body<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            hint: Option<&'a str>,
        }
        let hint = hint.map(str::trim).filter(|h| !h.is_empty());
        if hint.is_some_and(|h| h.chars().count() > MAX_HINT_CHARS) {
            return Err(GatewayError::InvalidArgument { what: "hint" });
        }
        let url = self.thread_url(Base::Gateway, thread, "/goal/from-chat")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(self.config().from_chat_timeout)
            .json(&Body { hint });
        let sent = self
            .send("goal_from_chat", CallFamily::FromChat, request)
            .await;
        self.note_route(OptionalRoute::GoalFromChat, &sent);
        read_json::<GoalEnvelope>(sent?, "goal_from_chat")
            .await?
            .goal
            .ok_or(GatewayError::Decode {
                what: "goal_from_chat",
            })
    }

    /// `POST {gateway_url}/api/threads/{id}/compact` (§4.7) with `force: true`. 409 is `Busy`,
    /// or `Disabled` when compaction is off on the server. Bounded by `from_chat_timeout`.
    pub async fn compact_thread(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        options: &CompactRequest,
    ) -> Result<CompactOutcome, GatewayError> {
        let url = self.thread_url(Base::Gateway, thread, "/compact")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(self.config().from_chat_timeout)
            .json(&options.wire());
        let response = self
            .send("compact_thread", CallFamily::Compact, request)
            .await?;
        read_json(response, "compact_thread").await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn state_exposes_goal_and_outcome() {
        let state: ThreadState = serde_json::from_value(json!({
            "values": {
                "goal": {"objective": "ship it", "status": "active", "continuation_count": 2,
                         "max_continuations": 8, "created_at": "…",
                         "last_evaluation": {"satisfied": false, "blocker": "needs_user_input",
                                             "reason": "free text", "stand_down_reason": "blocked:needs_user_input"}},
                "goal_outcome": {"status": "achieved", "objective": "old", "achieved_at": "t",
                                 "continuation_count": 1, "max_continuations": 8, "reason": "free text"}
            },
            "next": [], "checkpoint_id": "c"
        }))
        .unwrap();
        let goal = state.goal().unwrap();
        assert_eq!(goal.objective, "ship it");
        let evaluation = goal.last_evaluation.unwrap();
        assert_eq!(
            evaluation.stand_down_reason.as_deref(),
            Some("blocked:needs_user_input")
        );
        assert!(!format!("{evaluation:?}").contains("free text"));
        assert_eq!(state.goal_outcome().unwrap().objective, "old");
        let empty: ThreadState = serde_json::from_value(json!({"values": {"goal": null}})).unwrap();
        assert_eq!((empty.goal(), empty.goal_outcome()), (None, None));
    }

    #[test]
    fn compact_body_shapes() {
        let body = |req: &CompactRequest| serde_json::to_value(req.wire()).unwrap();
        assert_eq!(body(&CompactRequest::default()), json!({"force": true}));
        let full = CompactRequest {
            keep_messages: Some(6),
            agent_name: Some("coder".into()),
            model_name: Some("gpt-long-context".into()),
        };
        assert_eq!(
            body(&full),
            json!({"force": true, "keep": {"type": "messages", "value": 6}, "agent_name": "coder",
                   "model_name": "gpt-long-context"})
        );
    }
}
