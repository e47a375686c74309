//! The operator's endpoints on the admin listener (issue 33), served only when
//! `bridge.admin_token` is set (otherwise they do not exist: 404):
//!
//! - `GET /admin/deliveries?after=N&limit=N&show_text=true`: one page of the deliveries
//!   ([`Page`]: who, when, how often, the last error; texts only with `show_text`);
//! - `POST /admin/deliveries/retry` and `POST /admin/deliveries/drop` ([`Change`]) with
//!   `{"ids": ["…"]}` or `{"all": true}`: `{"retried": N}`, `{"dropped": N}`; a retry wakes
//!   the journal's upkeep, so this daemon takes the retried deliveries up at once;
//! - `POST /admin/drain`: 202 `{"draining": true}`, then the daemon drains and stops.
//!
//! Every request needs `Authorization: Bearer <token>`; a missing or wrong token is 401
//! and logged without the token. The comparison takes the same time wherever the tokens
//! differ and whatever their lengths (both are hashed with a key first). Bodies are
//! bounded ([`BODY_MAX`]); a store failure is 503 and logged.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use im_bridge_channel::Secret;
use im_bridge_channel::digest::{constant_time_eq, hmac_sha256};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::operator::deliveries::IDS_MAX;
use crate::operator::{Change, Deliveries, Selection};
use crate::telemetry::names;

/// The largest request body, in bytes (a thousand ids fit).
pub const BODY_MAX: usize = 64 * 1024;

/// The key both tokens are hashed with before they are compared.
const COMPARE_KEY: &[u8] = b"im-bridge/admin-token";

/// What the operator's endpoints act on.
#[derive(Clone)]
pub struct Operator {
    /// The configured token, hashed.
    token: [u8; 32],
    deliveries: Deliveries,
    drain: CancellationToken,
}

impl Operator {
    /// Endpoints authenticated with `token`, acting on `deliveries`, draining the daemon
    /// by cancelling `drain`.
    pub fn new(token: &Secret, deliveries: Deliveries, drain: CancellationToken) -> Self {
        Self {
            token: hmac_sha256(COMPARE_KEY, token.expose().as_bytes()),
            deliveries,
            drain,
        }
    }

    fn authorized(&self, header: Option<&str>) -> bool {
        let given = header.and_then(|h| h.strip_prefix("Bearer ")).unwrap_or("");
        let given = hmac_sha256(COMPARE_KEY, given.trim().as_bytes());
        constant_time_eq(&given, &self.token)
    }
}

/// The operator's routes, behind the token check.
pub(super) fn routes(operator: Operator) -> Router {
    let operator = Arc::new(operator);
    Router::new()
        .route("/admin/deliveries", get(list))
        .route("/admin/deliveries/{change}", post(change))
        .route("/admin/drain", post(drain))
        .layer(DefaultBodyLimit::max(BODY_MAX))
        .layer(middleware::from_fn_with_state(
            operator.clone(),
            authenticate,
        ))
        .with_state(operator)
}

async fn authenticate(
    State(operator): State<Arc<Operator>>,
    request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if operator.authorized(header) {
        return next.run(request).await;
    }
    tracing::warn!(
        path = request.uri().path(),
        given = header.is_some(),
        "Refused an admin request without the right token."
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        Json(json!({"error": "unauthorized"})),
    )
        .into_response()
}

#[derive(Deserialize)]
struct ListQuery {
    #[serde(default)]
    after: i64,
    limit: Option<usize>,
    #[serde(default)]
    show_text: bool,
}

async fn list(State(operator): State<Arc<Operator>>, Query(query): Query<ListQuery>) -> Response {
    let limit = query.limit.unwrap_or(100);
    match operator
        .deliveries
        .page(query.after, limit, query.show_text)
        .await
    {
        Ok(page) => Json(page).into_response(),
        Err(error) => store_failed("list", &error),
    }
}

/// A retry's or a drop's body: `{"ids": [...]}` or `{"all": true}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Chosen {
    #[serde(default)]
    ids: Vec<String>,
    #[serde(default)]
    all: bool,
}

impl Chosen {
    fn selection(self) -> Option<Selection> {
        match (self.all, self.ids.len()) {
            (true, 0) => Some(Selection::All),
            (false, 1..=IDS_MAX) => Some(Selection::Ids(self.ids)),
            _ => None,
        }
    }
}

fn bad_selection() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": "bad_selection"})),
    )
        .into_response()
}

async fn change(
    State(operator): State<Arc<Operator>>,
    Path(name): Path<String>,
    Json(chosen): Json<Chosen>,
) -> Response {
    let Some(change) = Change::named(&name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let Some(selection) = chosen.selection() else {
        return bad_selection();
    };
    match operator.deliveries.change(change, &selection).await {
        Ok(count) => {
            let counter = match change {
                Change::Retry => names::JOURNAL_RETRIED,
                Change::Drop => names::JOURNAL_DROPPED,
            };
            metrics::counter!(counter).increment(count as u64);
            tracing::info!(
                change = change.as_str(),
                count,
                "An operator changed deliveries."
            );
            Json(json!({ change.done(): count })).into_response()
        }
        Err(error) => store_failed(change.as_str(), &error),
    }
}

async fn drain(State(operator): State<Arc<Operator>>) -> Response {
    tracing::info!("An operator asked to drain through the admin endpoint.");
    operator.drain.cancel();
    (StatusCode::ACCEPTED, Json(json!({"draining": true}))).into_response()
}

fn store_failed(action: &'static str, error: &crate::store::StoreError) -> Response {
    tracing::warn!(action, %error, "An operator's request failed in the store.");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": "store"})),
    )
        .into_response()
}

#[cfg(test)]
mod tests;
