//! The Postgres backend against the test PostgreSQL server (`im_bridge_fakes::postgres`:
//! `IM_BRIDGE_TEST_POSTGRES`, or a throwaway cluster from the machine's binaries; without
//! PostgreSQL these tests are skipped with a printed line, or fail under
//! `IM_BRIDGE_TEST_STRICT`): each test gets a schema of its own, dropped afterwards, so
//! tests run in parallel and leave nothing behind.

use std::sync::Arc;

use tokio_postgres::NoTls;

use super::*;
use crate::store::conformance::conformance;

/// A fresh schema on the test server; dropped when the value is.
struct Scratch {
    base: Config,
    schema: String,
}

impl Scratch {
    /// `None` on a machine without PostgreSQL: skip the test.
    async fn new() -> Option<Self> {
        let url = im_bridge_fakes::postgres::url()?;
        let base: Config = url
            .parse()
            .expect("the test server's URL is a postgres:// URL");
        let schema = format!("im_bridge_test_{:016x}", rand::random::<u64>());
        let (client, connection) = base.connect(NoTls).await.unwrap_or_else(|error| {
            panic!("the test PostgreSQL server at {}: {error}", describe(&base))
        });
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        Some(Self { base, schema })
    }

    /// A connection configuration whose tables live in this schema.
    fn config(&self) -> Config {
        let mut config = self.base.clone();
        config.options(format!("-c search_path={}", self.schema));
        config
    }

    async fn store(&self, options: PostgresOptions) -> PostgresStore {
        PostgresStore::connect_with(self.config(), options)
            .await
            .unwrap()
    }

    async fn drop_schema(self) {
        let (client, connection) = self.base.connect(NoTls).await.unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .await
            .unwrap();
    }
}

fn small() -> PostgresOptions {
    PostgresOptions {
        dedupe_cap: 16,
        message_cap: 16,
        max_connections: 4,
        call_timeout: Duration::from_secs(10),
        question_cap: 16,
    }
}

#[tokio::test]
async fn passes_the_store_conformance_suite() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    let store = scratch.store(small()).await;
    conformance(Arc::new(store), 16).await;
    scratch.drop_schema().await;
}

#[tokio::test]
async fn replicas_sharing_the_database_admit_a_delivery_once() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    // Two replicas start together: the migration runs once, under its lock.
    let (a, b) = tokio::join!(scratch.store(small()), scratch.store(small()));
    let key = DedupeKey {
        channel: "telegram".into(),
        workspace: "42".into(),
        chat_id: ChatId::new("42"),
        message_id: "7".into(),
    };
    let ttl = Duration::from_secs(600);
    // The same redelivery reaches both at once: exactly one runs it.
    let (first, second) = tokio::join!(a.dedupe_admit(&key, ttl), b.dedupe_admit(&key, ttl));
    assert_eq!(
        [first.unwrap(), second.unwrap()]
            .iter()
            .filter(|admitted| **admitted)
            .count(),
        1
    );
    // A binding written by one is read by the other.
    let conv = ConversationKey::new("telegram", ChatId::new("42"), None);
    a.set_binding(&conv, &ThreadId::new("t-1"), "u1")
        .await
        .unwrap();
    let seen = b.get_binding(&conv).await.unwrap().unwrap();
    assert_eq!(seen.thread_id.as_str(), "t-1");
    // A released key can be admitted again by either.
    b.dedupe_release(&key).await.unwrap();
    assert!(a.dedupe_admit(&key, ttl).await.unwrap());
    a.close().await.unwrap();
    b.close().await.unwrap();
    scratch.drop_schema().await;
}

#[tokio::test]
async fn a_schema_from_the_first_release_is_migrated_and_keeps_its_data() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    // What the first release created, with its bindings.
    let (client, connection) = scratch.config().connect(NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(schema::MIGRATIONS[0]).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE im_bridge_schema (version BIGINT NOT NULL);
             INSERT INTO im_bridge_schema (version) VALUES (1);
             INSERT INTO im_bridge_bindings VALUES {}",
            crate::store::conformance::VERSION_1_BINDINGS
        ))
        .await
        .unwrap();
    let store = scratch.store(small()).await;
    crate::store::conformance::migrated_from_version_1(&store).await;
    store.close().await.unwrap();
    scratch.drop_schema().await;
}

#[tokio::test]
async fn issue_13_a_replica_of_the_previous_release_can_still_write_bindings() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    let store = scratch.store(small()).await;
    // A version-2 replica's insert, which knows no touch time.
    let (client, connection) = scratch.config().connect(NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(
            "INSERT INTO im_bridge_bindings
                 (channel, chat_id, topic, thread_id, user_id, created_at, updated_at)
             VALUES ('telegram', '42', '7', 't-old-build', 'u1', 1.0, 1.0)",
        )
        .await
        .unwrap();
    // Touched at the insert (the server's clock), so a long cutoff keeps it.
    let pruned = store
        .prune_conversations(Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(pruned, Pruned::default());
    let key = ConversationKey::new("telegram", ChatId::new("42"), Some("7".into()));
    assert!(store.get_binding(&key).await.unwrap().is_some());
    store.close().await.unwrap();
    scratch.drop_schema().await;
}

#[tokio::test]
async fn issue_27_expiries_are_the_database_clock_plus_the_ttl() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    let store = scratch.store(small()).await;
    let ttl = Duration::from_secs(600);
    let key = DedupeKey {
        channel: "telegram".into(),
        workspace: "42".into(),
        chat_id: ChatId::new("42"),
        message_id: "7".into(),
    };
    let record = JournalRecord::admitted(im_bridge_channel::InboundMessage::new(
        "telegram", "42", "u1", "hello",
    ));
    assert!(store.acquire_lease("transport:t", "a", ttl).await.unwrap());
    assert!(
        store
            .journal_admit(std::slice::from_ref(&key), ttl, "e1", &record, "a", ttl)
            .await
            .unwrap()
            .is_some()
    );
    // What each expiry is ahead of the database's clock, in milliseconds.
    let (client, connection) = scratch.config().connect(NoTls).await.unwrap();
    tokio::spawn(connection);
    let sql = format!(
        "SELECT (SELECT expires_at FROM im_bridge_leases) - {now},
                (SELECT expires_at FROM im_bridge_dedupe) - {now},
                (SELECT lease_until FROM im_bridge_journal) - {now}",
        now = now_ms!()
    );
    let row = client.query_one(&sql, &[]).await.unwrap();
    for (i, what) in ["lease", "dedupe record", "journal lease"]
        .iter()
        .enumerate()
    {
        let ahead: i64 = row.get(i);
        assert!(
            (590_000..=600_000).contains(&ahead),
            "the {what} expires {ahead} ms after the database's now, not 600 s"
        );
    }
    // A TTL longer than any clock is cut, never an overflow.
    assert!(
        store
            .acquire_lease("transport:t", "a", Duration::MAX)
            .await
            .unwrap()
    );
    assert!(
        !store
            .acquire_lease("transport:t", "b", Duration::ZERO)
            .await
            .unwrap()
    );
    store.journal_renew("a", Duration::MAX).await.unwrap();
    store.close().await.unwrap();
    scratch.drop_schema().await;
}

#[tokio::test]
async fn a_schema_newer_than_this_build_is_refused() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    scratch.store(small()).await.close().await.unwrap();
    let (client, connection) = scratch.config().connect(NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute("UPDATE im_bridge_schema SET version = version + 1")
        .await
        .unwrap();
    let error = PostgresStore::connect_with(scratch.config(), small())
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::TooNewSchema { found, supported, .. } if found == supported + 1),
        "{error}"
    );
    scratch.drop_schema().await;
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error_without_the_password() {
    // Port 1 on loopback: nothing listens there.
    let url = Secret::new("postgres://bridge:HUNTER2@127.0.0.1:1/bridge?connect_timeout=2");
    let error = PostgresStore::connect(&url).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, StoreError::Connect { .. }), "{text}");
    assert!(
        text.contains("postgres://bridge@127.0.0.1:1/bridge"),
        "{text}"
    );
    assert!(!text.contains("HUNTER2"), "{text}");
    let bad = Secret::new("postgres://bridge:HUNTER2@127.0.0.1:notaport/x");
    let text = PostgresStore::connect(&bad).await.unwrap_err().to_string();
    assert!(!text.contains("HUNTER2"), "{text}");
}

/// Issue 27: start-up said only "db error", twice. Now the reason names the part that
/// failed: the role, the database, or the network.
#[tokio::test]
async fn issue_27_a_refused_role_or_a_missing_database_is_named() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    let mut no_role = scratch.config();
    no_role.user("im_bridge_no_such_role_27");
    let mut no_db = scratch.config();
    no_db.dbname("im_bridge_no_such_database_27");
    for (config, expected) in [
        (no_role, "refused this role"),
        (no_db, "the database does not exist"),
    ] {
        let error = PostgresStore::connect_with(config, PostgresOptions::default())
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(text.contains(expected), "{text}");
        assert!(!text.contains("db error"), "{text}");
    }
    let unreachable = Secret::new("postgres://bridge@127.0.0.1:1/bridge?connect_timeout=2");
    let text = PostgresStore::connect(&unreachable)
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("Connection refused"), "{text}");
}

#[tokio::test]
async fn a_server_that_never_answers_fails_the_call_in_time() {
    // Accepts connections and never says a word.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let url = format!("postgres://bridge@127.0.0.1:{port}/bridge");
    let options = PostgresOptions {
        call_timeout: Duration::from_millis(300),
        ..small()
    };
    let started = std::time::Instant::now();
    let error = PostgresStore::connect_with(url.parse().unwrap(), options)
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::TimedOut { op: "migrate" }),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    held.abort();
}

#[test]
fn a_password_with_an_unescaped_at_sign_never_shows() {
    let url = Secret::new("postgres://bridge:p@ss-SECRET@db.internal:5432/x");
    let config = parse_url(&url).unwrap();
    let shown = describe(&config);
    assert!(!shown.contains("SECRET"), "{shown}");
    assert!(shown.contains("<unreadable host>"), "{shown}");
}

#[tokio::test]
async fn sslmode_require_is_refused_at_startup() {
    let url = Secret::new("postgres://postgres@127.0.0.1:5432/test?sslmode=require");
    let error = PostgresStore::connect(&url).await.unwrap_err();
    assert!(error.to_string().contains("sslmode=require"), "{error}");
}

#[tokio::test]
async fn calls_after_close_fail_as_closed() {
    let Some(scratch) = Scratch::new().await else {
        return;
    };
    let store = scratch.store(small()).await;
    store.close().await.unwrap();
    let error = store
        .get_chat_locale("telegram", &ChatId::new("1"))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Closed), "{error}");
    scratch.drop_schema().await;
}
