//! The operator's endpoints (issue 33) over real loopback HTTP, on a real SQLite store,
//! driven through [`AdminClient`], the command line's own client: absent without a token,
//! refusing a wrong one, listing without texts unless asked, retrying (which wakes the
//! journal's upkeep) and dropping deliveries only, and a drain that makes `/readyz` say so.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use im_bridge_channel::Secret;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::super::{AdminState, GatewayProbe, bind, serve};
use super::Operator;
use crate::operator::{AdminClient, Change, ClientError, Deliveries, DeliveryState, Selection};
use crate::store::{JournalRecord, JournalState, PendingFinal, SqliteStore, Store};

const TOKEN: &str = "0123456789abcdef-operator";
const LONG: Duration = Duration::from_secs(3600);

struct Up;

impl GatewayProbe for Up {
    fn probe(&self) -> BoxFuture<'_, bool> {
        Box::pin(async { true })
    }
}

/// A store holding a delivery that gave up (`gone`), one still pending (`waits`) and a
/// turn under way (`busy`).
async fn seeded(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let message = im_bridge_channel::InboundMessage::new("fake", "4242", "u1", "secret question");
    let asked = JournalRecord::admitted(message);
    let mut answered = asked.clone();
    answered.state = JournalState::FinalPending;
    answered.finals.push(PendingFinal::new(1, "secret answer"));
    answered.attempts = 7;
    answered.note_error("transport error: calling sendMessage failed: 502");
    for id in ["gone", "waits", "busy"] {
        assert!(
            store
                .journal_admit(&[], LONG, id, &asked, "h", LONG)
                .await
                .unwrap()
                .is_some()
        );
    }
    for id in ["gone", "waits"] {
        assert!(store.journal_save(id, &answered, "h").await.unwrap());
    }
    assert!(store.journal_give_up("gone", &answered, "h").await.unwrap());
    store
}

struct Served {
    base: String,
    store: Arc<dyn Store>,
    upkeep: Arc<Notify>,
    drain: CancellationToken,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn start(token: Option<&str>) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded(&dir).await;
    let upkeep = Arc::new(Notify::new());
    let drain = CancellationToken::new();
    let mut state = AdminState::new(Vec::new(), Arc::new(Up)).with_draining(drain.clone());
    if let Some(token) = token {
        let deliveries = Deliveries::new(store.clone()).with_upkeep(upkeep.clone());
        state = state.with_operator(Operator::new(
            &Secret::new(token),
            deliveries,
            drain.clone(),
        ));
    }
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, state, stop.clone()));
    Served {
        base,
        store,
        upkeep,
        drain,
        stop,
        _dir: dir,
    }
}

fn client(served: &Served, token: &str) -> AdminClient {
    AdminClient::new(&served.base, Secret::new(token)).unwrap()
}

#[tokio::test]
async fn issue_33_without_a_token_the_operator_endpoints_do_not_exist() {
    let served = start(None).await;
    let http = reqwest::Client::new();
    for (method, path) in [
        (reqwest::Method::GET, "/admin/deliveries"),
        (reqwest::Method::POST, "/admin/deliveries/retry"),
        (reqwest::Method::POST, "/admin/drain"),
    ] {
        let answer = http
            .request(method, format!("{}{path}", served.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 404, "{path}");
    }
    let refused = client(&served, TOKEN).page(0, 10, false).await.unwrap_err();
    assert!(
        matches!(refused, ClientError::NotEnabled { .. }),
        "{refused}"
    );
    assert!(!served.drain.is_cancelled());
    served.stop.cancel();
}

#[tokio::test]
async fn issue_33_a_missing_or_wrong_token_is_refused() {
    let served = start(Some(TOKEN)).await;
    let http = reqwest::Client::new();
    let url = format!("{}/admin/deliveries", served.base);
    let bare = http.get(&url).send().await.unwrap();
    assert_eq!(bare.status(), 401);
    assert_eq!(bare.headers()["www-authenticate"], "Bearer");
    for wrong in [
        "0123456789abcdef-operatoR",
        "short",
        "",
        TOKEN.repeat(2).as_str(),
    ] {
        let answer = http.get(&url).bearer_auth(wrong).send().await.unwrap();
        assert_eq!(answer.status(), 401, "{wrong:?}");
    }
    let basic = http
        .get(&url)
        .basic_auth(TOKEN, None::<&str>)
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401, "only a bearer token counts");
    let refused = client(&served, "wrong-token-of-some-length").drain().await;
    assert!(matches!(refused, Err(ClientError::Unauthorized { .. })));
    assert!(
        !served.drain.is_cancelled(),
        "a refused drain changes nothing"
    );
    let page = client(&served, TOKEN).page(0, 10, false).await.unwrap();
    assert_eq!(page.deliveries.len(), 2);
    served.stop.cancel();
}

#[tokio::test]
async fn issue_33_deliveries_are_listed_retried_and_dropped() {
    let served = start(Some(TOKEN)).await;
    let client = client(&served, TOKEN);

    // Who, when and why, never what.
    let raw = reqwest::Client::new()
        .get(format!("{}/admin/deliveries", served.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!raw.contains("secret"), "{raw}");
    let page = client.page(0, 10, false).await.unwrap();
    assert_eq!(page.next, None);
    let listed: Vec<(&str, DeliveryState)> = page
        .deliveries
        .iter()
        .map(|d| (d.id.as_str(), d.state))
        .collect();
    assert_eq!(
        listed,
        [
            ("gone", DeliveryState::GaveUp),
            ("waits", DeliveryState::Pending)
        ],
        "the turn under way is no delivery"
    );
    let gone = &page.deliveries[0];
    assert_eq!(gone.conversation, "fake:4242");
    assert_eq!(gone.attempts, 7);
    assert_eq!(gone.finals, 1);
    assert!(gone.gave_up_at_ms.is_some());
    assert_eq!(
        gone.last_error.as_deref(),
        Some("transport error: calling sendMessage failed: 502")
    );
    assert!(gone.text.is_none());
    let texts = client.page(0, 10, true).await.unwrap();
    let text = texts.deliveries[0].text.clone().unwrap();
    assert_eq!(text.message, "secret question");
    assert_eq!(text.answers, ["secret answer"]);
    // Paged: one entry a page, the turn under way read but not shown.
    let first = client.page(0, 1, false).await.unwrap();
    assert_eq!(first.deliveries.len(), 1);
    let second = client.page(first.next.unwrap(), 1, false).await.unwrap();
    assert_eq!(second.deliveries[0].id, "waits");

    // A retry revives the given-up one and wakes the journal's upkeep.
    let woken = served.upkeep.notified();
    let retried = client
        .change(
            Change::Retry,
            &Selection::Ids(vec!["gone".into(), "busy".into()]),
        )
        .await
        .unwrap();
    assert_eq!(retried, 1, "only deliveries are retried");
    tokio::time::timeout(Duration::from_secs(5), woken)
        .await
        .expect("a retry wakes the upkeep");
    let page = client.page(0, 10, false).await.unwrap();
    assert!(
        page.deliveries
            .iter()
            .all(|d| d.state == DeliveryState::Pending)
    );

    // A selection must name something.
    let empty = reqwest::Client::new()
        .post(format!("{}/admin/deliveries/drop", served.base))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), 400);

    let unknown = reqwest::Client::new()
        .post(format!("{}/admin/deliveries/forget", served.base))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"all": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        client.change(Change::Drop, &Selection::All).await.unwrap(),
        2
    );
    assert!(
        client
            .page(0, 10, false)
            .await
            .unwrap()
            .deliveries
            .is_empty()
    );
    let left = served.store.journal_list(0, 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, "busy", "the turn under way stays");
    let metrics = crate::admin::metrics_handle().render();
    for name in [super::names::JOURNAL_RETRIED, super::names::JOURNAL_DROPPED] {
        assert!(metrics.contains(name), "{name}: {metrics}");
    }
    served.stop.cancel();
}

#[tokio::test]
async fn issue_33_a_drain_is_accepted_and_the_daemon_is_no_longer_ready() {
    let served = start(Some(TOKEN)).await;
    let ready = reqwest::get(format!("{}/readyz", served.base))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    client(&served, TOKEN).drain().await.unwrap();
    assert!(served.drain.is_cancelled());
    let ready = reqwest::get(format!("{}/readyz", served.base))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["not_ready"], serde_json::json!(["draining"]));
    served.stop.cancel();
}
