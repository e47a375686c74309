//! Wire types against recorded payloads (tests and `test-support`): every adapter's
//! `model.rs` is checked by reading each fixture under its `tests/fixtures/` into its type
//! and writing it back, so a field the adapter reads is never lost, renamed or invented.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Reads `fixture` (JSON text) into `T` and writes it back; panics unless the JSON written
/// equals the JSON read. Returns the typed value for further assertions.
///
/// # Panics
/// When the fixture is not JSON, does not fit `T`, or does not survive the round trip.
#[allow(clippy::expect_used, reason = "a test helper: a panic fails the test")]
pub fn round_trip<T: Serialize + DeserializeOwned + std::fmt::Debug>(fixture: &str) -> T {
    let original: Value = serde_json::from_str(fixture).expect("the fixture is JSON");
    let typed: T = match serde_json::from_value(original.clone()) {
        Ok(typed) => typed,
        Err(e) => panic!(
            "the fixture does not fit {}: {e}",
            std::any::type_name::<T>()
        ),
    };
    let back = serde_json::to_value(&typed).expect("the type serializes");
    assert_eq!(back, original, "{typed:#?}");
    typed
}

/// Validates the adapter block `block` with `validate` under `prefix`
/// (`channels.<name>`): the settings, and each issue found as `E <path>` (an error) or
/// `W <path>` (a warning), in order: what an adapter's config tests compare.
pub fn validated<S>(
    validate: fn(Value, &mut crate::Issues) -> Option<S>,
    prefix: &str,
    block: Value,
) -> (Option<S>, Vec<String>) {
    let mut issues = crate::Issues::new(prefix);
    let settings = validate(block, &mut issues);
    let found = issues
        .iter()
        .map(|i| format!("{}{}", if i.is_error() { "E " } else { "W " }, i.path))
        .collect();
    (settings, found)
}

/// The text of a recorded payload, `tests/fixtures/<name>` of the crate that calls it
/// (read at compile time): `round_trip::<Update>(fixture!("update_private_text.json"))`.
#[macro_export]
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/",
            $name
        ))
    };
}

/// The bytes of a recorded binary payload (a protobuf frame), `tests/fixtures/<name>` of
/// the crate that calls it (read at compile time).
#[macro_export]
macro_rules! fixture_bytes {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/",
            $name
        ))
    };
}

/// Serves `app` on `127.0.0.1`, on a port the system picks, for the rest of the test: a
/// platform endpoint for an adapter's unit tests. Returns its base URL,
/// `http://127.0.0.1:<port>`.
///
/// # Panics
/// When no loopback port can be bound.
#[allow(clippy::expect_used, reason = "a test helper: a panic fails the test")]
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Serialize, Deserialize)]
    struct Two {
        a: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        b: Option<u8>,
    }

    #[test]
    fn a_faithful_type_round_trips() {
        let two: Two = round_trip(r#"{"a": 1}"#);
        assert_eq!((two.a, two.b), (1, None));
    }

    #[test]
    #[should_panic(expected = "assert")]
    fn a_lost_field_fails() {
        let _: Two = round_trip(r#"{"a": 1, "c": 3}"#);
    }
}
