//! Asking the Gateway which optional routes it serves (`routes.rs` keeps the answers), and
//! the client's questions about them: [`GatewayClient::route_support`] for callers,
//! `note_route` for every real call of such a route.

use reqwest::Method;

use crate::client::{Base, GatewayClient};
use crate::error::{CallFamily, GatewayError};
use crate::routes::{OptionalRoute, Support};

/// A thread id no Gateway has, for the from-chat probe.
const PROBE_THREAD: &str = "im-bridge-route-probe";

impl GatewayClient {
    /// What the client knows about `route`.
    pub fn route_support(&self, route: OptionalRoute) -> Support {
        self.routes().get(route)
    }

    /// Records what a real call of `route` answered.
    pub(crate) fn note_route<T>(&self, route: OptionalRoute, outcome: &Result<T, GatewayError>) {
        if let Some(support) = Support::from_outcome(outcome) {
            self.routes().set(route, support);
        }
    }

    /// Asks the Gateway which optional routes it serves, records the answers and returns
    /// them (`Unknown` where the Gateway did not answer). Side-effect free: the from-chat
    /// probe's body has the wrong shape, so a Gateway with the route refuses it in
    /// validation (422) before any handler runs, and one without it answers the
    /// route-level 404.
    pub async fn probe_optional_routes(&self) -> Vec<(OptionalRoute, Support)> {
        let (from_chat, preferences, list_runs) = tokio::join!(
            self.probe_from_chat(),
            self.probe_preferences(),
            self.probe_list_runs()
        );
        let mut found = Vec::with_capacity(OptionalRoute::ALL.len());
        for (route, outcome) in [
            (OptionalRoute::GoalFromChat, from_chat),
            (OptionalRoute::UserPreferences, preferences),
            (OptionalRoute::ListRuns, list_runs),
        ] {
            let support = Support::from_outcome(&outcome).unwrap_or(Support::Unknown);
            if support != Support::Unknown {
                self.routes().set(route, support);
            }
            found.push((route, support));
        }
        found
    }

    async fn probe_from_chat(&self) -> Result<(), GatewayError> {
        let thread = crate::ThreadId::new(PROBE_THREAD);
        let url = self.thread_url(Base::Gateway, &thread, "/goal/from-chat")?;
        let request = self
            .request(Method::POST, &url, None)?
            .timeout(self.config().request_timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body("[]");
        self.send("probe_goal_from_chat", CallFamily::Plain, request)
            .await
            .map(drop)
    }

    /// The runs of a thread no Gateway has: an empty list or a 404 naming the thread from a
    /// Gateway that serves the route, the route-level 404 from one that does not.
    async fn probe_list_runs(&self) -> Result<(), GatewayError> {
        let thread = crate::ThreadId::new(PROBE_THREAD);
        let url = self.thread_url(Base::LangGraph, &thread, "/runs")?;
        self.probe_get("probe_list_runs", &url).await
    }

    async fn probe_preferences(&self) -> Result<(), GatewayError> {
        let url = self.url(Base::Gateway, "/api/user-preferences");
        self.probe_get("probe_user_preferences", &url).await
    }

    /// A plain `GET` of `url` for a probe; only whether and how it failed matters.
    async fn probe_get(&self, call: &'static str, url: &str) -> Result<(), GatewayError> {
        let request = self
            .request(Method::GET, url, None)?
            .timeout(self.config().request_timeout);
        self.send(call, CallFamily::Plain, request).await.map(drop)
    }
}
