//! The request log: every request the simulator receives, in arrival order, for assertions.
//!
//! Requests are recorded on arrival (before auth, CSRF or faults, so refused requests are
//! there too) and get their response status filled in once the response head is ready.
//! The log is bounded: at most `SimulatorConfig::record_limit` entries (by default
//! [`MAX_RECORDED_REQUESTS`]); a limit of 0 turns recording off, so a load test pays
//! nothing for a log nobody reads.

use std::collections::{BTreeMap, VecDeque};

use axum::http::request::Parts;
use serde_json::Value;

/// The default `SimulatorConfig::record_limit`: at most this many requests are kept; at the
/// bound the oldest is dropped for each new one, so a long `im-bridge simulate` session uses
/// bounded memory. Sequence numbers keep counting.
pub const MAX_RECORDED_REQUESTS: usize = 10_000;

/// One received request.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Arrival order, from 0, over the simulator's lifetime.
    pub seq: u64,
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// The path, percent-encoded as sent, e.g. `/api/threads/t1/runs/stream`.
    pub path: String,
    /// The raw query string, if any.
    pub query: Option<String>,
    /// Headers by lower-case name; repeated headers are joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: RecordedBody,
    /// The response status, once the response head was produced (`None` while pending, or
    /// when the connection was dropped on purpose).
    pub status: Option<u16>,
}

/// A recorded body.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordedBody {
    /// No body bytes.
    Empty,
    /// A body that parsed as JSON.
    Json(Value),
    /// Anything else, decoded as UTF-8 with replacement characters.
    Text(String),
}

impl RecordedRequest {
    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The JSON body, if the body was JSON.
    pub fn json(&self) -> Option<&Value> {
        match &self.body {
            RecordedBody::Json(v) => Some(v),
            _ => None,
        }
    }

    /// Whether this is `method path` (method case-insensitive, path exact).
    pub fn is(&self, method: &str, path: &str) -> bool {
        self.method.eq_ignore_ascii_case(method) && self.path == path
    }

    /// The value of cookie `name` from the `cookie` header.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        cookie_value(self.header("cookie")?, name)
    }
}

/// Finds cookie `name` in a `Cookie` header value.
pub(crate) fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split([';', ','])
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| k.trim() == name)
        .map(|(_, v)| v.trim())
}

/// The bounded log.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    entries: VecDeque<RecordedRequest>,
    next_seq: u64,
}

impl Recorder {
    /// Records a request, keeping at most `limit` entries (0 = keep none, and skip the
    /// copying and parsing), and returns its sequence number.
    pub(crate) fn record(&mut self, parts: &Parts, body: &[u8], limit: usize) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if limit == 0 {
            self.entries.clear();
            return seq;
        }
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in &parts.headers {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers
                .entry(name.as_str().to_owned())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let body = if body.is_empty() {
            RecordedBody::Empty
        } else {
            match serde_json::from_slice(body) {
                Ok(v) => RecordedBody::Json(v),
                Err(_) => RecordedBody::Text(String::from_utf8_lossy(body).into_owned()),
            }
        };
        while self.entries.len() >= limit {
            self.entries.pop_front();
        }
        self.entries.push_back(RecordedRequest {
            seq,
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers,
            body,
            status: None,
        });
        seq
    }

    /// Fills in the response status of request `seq`, if it is still retained.
    pub(crate) fn set_status(&mut self, seq: u64, status: u16) {
        let Some(first) = self.entries.front().map(|e| e.seq) else {
            return;
        };
        let Some(index) = seq.checked_sub(first).and_then(|i| usize::try_from(i).ok()) else {
            return;
        };
        if let Some(entry) = self.entries.get_mut(index) {
            entry.status = Some(status);
        }
    }

    /// The retained requests, oldest first.
    pub(crate) fn all(&self) -> impl Iterator<Item = &RecordedRequest> {
        self.entries.iter()
    }

    /// Forgets every retained request (sequence numbers keep counting).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    fn parts(method: &str, uri: &str) -> Parts {
        Request::builder()
            .method(method)
            .uri(uri)
            .header("X-Thing", "a")
            .header("x-thing", "b")
            .header("Cookie", "a=1; csrf_token=tok")
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    #[test]
    fn records_headers_bodies_and_statuses() {
        let mut r = Recorder::default();
        let a = r.record(
            &parts("POST", "/api/threads?x=1"),
            br#"{"a":1}"#,
            MAX_RECORDED_REQUESTS,
        );
        let b = r.record(
            &parts("GET", "/api/models"),
            b"not json",
            MAX_RECORDED_REQUESTS,
        );
        r.set_status(a, 200);
        let all: Vec<_> = r.all().cloned().collect();
        assert_eq!(all[0].header("X-THING"), Some("a, b"));
        assert_eq!(all[0].query.as_deref(), Some("x=1"));
        assert_eq!(all[0].json(), Some(&serde_json::json!({"a": 1})));
        assert_eq!(all[0].status, Some(200));
        assert_eq!(all[0].cookie("csrf_token"), Some("tok"));
        assert_eq!(all[1].body, RecordedBody::Text("not json".to_owned()));
        assert_eq!(all[1].seq, b);
        assert!(all[1].is("get", "/api/models"));
    }

    #[test]
    fn the_log_is_bounded() {
        let mut r = Recorder::default();
        for _ in 0..MAX_RECORDED_REQUESTS + 5 {
            r.record(&parts("GET", "/"), b"", MAX_RECORDED_REQUESTS);
        }
        assert_eq!(r.all().count(), MAX_RECORDED_REQUESTS);
        assert_eq!(r.all().next().map(|e| e.seq), Some(5));
        r.set_status(3, 200); // dropped: ignored
        r.set_status(MAX_RECORDED_REQUESTS as u64 + 4, 201);
        assert_eq!(r.all().last().and_then(|e| e.status), Some(201));
    }

    #[test]
    fn a_smaller_limit_keeps_fewer_and_zero_keeps_none() {
        let mut r = Recorder::default();
        for _ in 0..5 {
            r.record(&parts("GET", "/"), b"", 2);
        }
        assert_eq!(r.all().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
        let seq = r.record(&parts("POST", "/"), br#"{"a":1}"#, 0);
        assert_eq!(seq, 5, "sequence numbers keep counting");
        assert_eq!(r.all().count(), 0);
        r.set_status(seq, 200); // not retained: ignored
    }
}
