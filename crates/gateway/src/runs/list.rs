//! `GET {langgraph_url}/threads/{id}/runs` (DeerFlow's `list_runs`): the thread's runs,
//! newest first (the Gateway lists at most 100), each as a [`RunSummary`].
//!
//! Recovery uses it (issue 27) to find a run a crashed process started but had not
//! journaled yet, by the entry key the bridge put in the run's `metadata`. Only the three
//! fields recovery reads are decoded; the body is bounded like every JSON body
//! ([`read_json`]).

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use super::RunStatus;
use crate::ThreadId;
use crate::client::{Base, GatewayClient, Owner, read_json};
use crate::error::{CallFamily, GatewayError};
use crate::routes::OptionalRoute;

/// One run of a thread's list.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunSummary {
    /// The run's id.
    pub run_id: String,
    /// Where it stands.
    pub status: RunStatus,
    /// The run request's `metadata` (an empty object when it had none).
    #[serde(default)]
    pub metadata: Value,
}

impl GatewayClient {
    /// `GET {langgraph_url}/threads/{id}/runs`: the thread's runs, newest first. A Gateway
    /// without the route is [`GatewayError::RouteMissing`].
    pub async fn list_runs(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
    ) -> Result<Vec<RunSummary>, GatewayError> {
        let url = self.thread_url(Base::LangGraph, thread, "/runs")?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(self.config().request_timeout);
        let sent = self.send("list_runs", CallFamily::Plain, request).await;
        self.note_route(OptionalRoute::ListRuns, &sent);
        read_json(sent?, "list_runs").await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn issue_27_a_deerflow_run_list_decodes_to_summaries() {
        // Shaped like DeerFlow's `RunResponse` list (`_record_to_response`).
        let body = json!([
            {
                "run_id": "r2", "thread_id": "t", "assistant_id": "lead_agent",
                "status": "running", "metadata": {"im_bridge": {"entry": "e1"}},
                "kwargs": {}, "multitask_strategy": "reject",
                "created_at": "2026-01-01T00:00:01Z", "updated_at": "2026-01-01T00:00:01Z",
                "total_tokens": 0, "stop_reason": null
            },
            {"run_id": "r1", "status": "success", "metadata": {}},
        ]);
        let runs: Vec<RunSummary> = serde_json::from_value(body).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].run_id, "r2");
        assert_eq!(runs[0].status, RunStatus::Running);
        assert_eq!(runs[0].metadata["im_bridge"]["entry"], "e1");
        assert_eq!(runs[1].status, RunStatus::Success);
    }

    #[test]
    fn issue_27_missing_metadata_and_unknown_statuses_still_decode() {
        let runs: Vec<RunSummary> =
            serde_json::from_value(json!([{"run_id": "r", "status": "queued"}])).unwrap();
        assert_eq!(runs[0].status, RunStatus::Unknown);
        assert_eq!(runs[0].metadata, Value::Null);
        assert!(serde_json::from_value::<Vec<RunSummary>>(json!([{"status": "running"}])).is_err());
    }
}
