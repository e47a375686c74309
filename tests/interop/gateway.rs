//! The real DeerFlow Gateway `scripts/interop` started, as the tests find it in the
//! environment, and the few direct calls a test makes to check what the bridge did there
//! (a thread's runs, a user's memory, the files under `DEER_FLOW_HOME`).
//!
//! The variables (all set by `scripts/interop`):
//! - `IM_BRIDGE_INTEROP_URL`: the Gateway's base URL (`http://127.0.0.1:<port>`);
//! - `IM_BRIDGE_INTEROP_MODE`: `auth` (internal token, per-user files) or `single`
//!   (`DEER_FLOW_AUTH_DISABLED=1`: everyone is DeerFlow's `default` user);
//! - `IM_BRIDGE_INTEROP_TOKEN`: the internal token, in `auth` mode only;
//! - `IM_BRIDGE_INTEROP_HOME`: the Gateway's `DEER_FLOW_HOME`.
//!
//! A run without them panics: these tests never pass without having met the Gateway.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// What a test that is run outside `scripts/interop` is told.
const HOW: &str = "the interop tests need the real DeerFlow Gateway: run scripts/interop";
/// The CSRF token sent on writes (any value: the Gateway compares the cookie to the header).
const CSRF: &str = "interop-csrf";

/// How the Gateway authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Auth on: the internal token, and each request acts for its owner header's user.
    Auth,
    /// `DEER_FLOW_AUTH_DISABLED=1`: every request acts for `default`.
    Single,
}

/// The Gateway under test.
#[derive(Clone, Debug)]
pub struct Gateway {
    /// Its base URL, without a trailing slash.
    pub url: String,
    /// The internal token (auth mode).
    pub token: Option<String>,
    /// How it authenticates.
    pub mode: Mode,
    /// Its `DEER_FLOW_HOME`.
    pub home: PathBuf,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Gateway {
    /// The Gateway named by the environment; panics with how to run the suite otherwise.
    pub fn from_env() -> Self {
        let url = var("IM_BRIDGE_INTEROP_URL")
            .unwrap_or_else(|| panic!("{HOW} (IM_BRIDGE_INTEROP_URL is not set)"));
        let mode = match var("IM_BRIDGE_INTEROP_MODE").as_deref() {
            Some("auth") => Mode::Auth,
            Some("single") => Mode::Single,
            other => panic!("{HOW} (IM_BRIDGE_INTEROP_MODE is {other:?}, not auth or single)"),
        };
        let token = var("IM_BRIDGE_INTEROP_TOKEN");
        assert_eq!(
            token.is_some(),
            mode == Mode::Auth,
            "{HOW} (IM_BRIDGE_INTEROP_TOKEN must be set in auth mode only)"
        );
        let home = var("IM_BRIDGE_INTEROP_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("{HOW} (IM_BRIDGE_INTEROP_HOME is not set)"));
        assert!(home.is_dir(), "{HOW} (no directory {})", home.display());
        Self {
            url: url.trim_end_matches('/').to_owned(),
            token,
            mode,
            home,
        }
    }

    /// Whether every conversation acts for DeerFlow's `default` user.
    pub fn single_user(&self) -> bool {
        self.mode == Mode::Single
    }

    /// The DeerFlow user a conversation acts for, by the bridge's identity rule: in a
    /// private chat `<channel>-user-<sender>`, in a group `<channel>-group-<chat>` (both
    /// sanitized as DeerFlow's `make_safe_user_id` does); `default` in single-user mode.
    pub fn owner(&self, channel: &str, kind: &str, id: &str) -> String {
        if self.single_user() {
            return "default".to_owned();
        }
        safe_user_id(&format!("{channel}-{kind}-{id}"))
    }

    /// A request to `path` as `owner`, with the token and the CSRF pair.
    fn request(&self, method: reqwest::Method, path: &str, owner: &str) -> reqwest::RequestBuilder {
        let mut request = reqwest::Client::new()
            .request(method, format!("{}{path}", self.url))
            .header("X-DeerFlow-Owner-User-Id", owner)
            .header("X-CSRF-Token", CSRF)
            .header("Cookie", format!("csrf_token={CSRF}"));
        if let Some(token) = &self.token {
            request = request.header("X-DeerFlow-Internal-Token", token);
        }
        request
    }

    async fn json(&self, request: reqwest::RequestBuilder, what: &str) -> Value {
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert!(status.is_success(), "{what}: {status} {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"))
    }

    /// `GET {path}` as `owner`: the JSON of a successful answer.
    pub async fn get(&self, owner: &str, path: &str) -> Value {
        self.json(self.request(reqwest::Method::GET, path, owner), path)
            .await
    }

    /// The runs of `thread` (`GET /api/threads/{id}/runs`), as `owner`.
    pub async fn runs(&self, owner: &str, thread: &str) -> Vec<Value> {
        let runs = self
            .get(owner, &format!("/api/threads/{thread}/runs"))
            .await;
        runs.as_array().cloned().unwrap_or_default()
    }

    /// Runs the agent on `thread` as another client would (DeerFlow's UI), as `owner`,
    /// asking `text` (`POST /api/threads/{id}/runs/wait`); its answer is in the thread.
    pub async fn run_as_another_client(&self, owner: &str, thread: &str, text: &str) {
        let path = format!("/api/threads/{thread}/runs/wait");
        let body = serde_json::json!({
            "assistant_id": "lead_agent",
            "input": {"messages": [{"role": "user", "content": text}]},
        });
        let request = self
            .request(reqwest::Method::POST, &path, owner)
            .json(&body);
        self.json(request, &path).await;
    }

    /// Whether `thread` exists for `owner` (`GET /api/threads/{id}` answers 200).
    pub async fn has_thread(&self, owner: &str, thread: &str) -> bool {
        let path = format!("/api/threads/{thread}");
        let response = self
            .request(reqwest::Method::GET, &path, owner)
            .send()
            .await
            .unwrap();
        response.status().is_success()
    }

    /// How many memory facts `owner` has (`GET /api/memory`).
    pub async fn memory_facts(&self, owner: &str) -> usize {
        let memory = self
            .json(
                self.request(reqwest::Method::GET, "/api/memory", owner),
                "GET /api/memory",
            )
            .await;
        memory["facts"].as_array().map_or(0, Vec::len)
    }

    /// Stores a memory fact for `owner` (`POST /api/memory/facts`).
    pub async fn add_fact(&self, owner: &str, content: &str) {
        let request = self
            .request(reqwest::Method::POST, "/api/memory/facts", owner)
            .json(&json!({"content": content, "category": "context", "confidence": 0.9}));
        self.json(request, "POST /api/memory/facts").await;
    }

    /// `users/<owner>/threads/<thread>/user-data` under the Gateway's home.
    pub fn user_data(&self, owner: &str, thread: &str) -> PathBuf {
        self.home
            .join("users")
            .join(owner)
            .join("threads")
            .join(thread)
            .join("user-data")
    }

    /// Every file named `name` anywhere under `users/`, as paths relative to the home.
    pub fn find_files(&self, name: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        walk(&self.home.join("users"), &mut |path| {
            if path.file_name().is_some_and(|n| n == name) {
                found.push(path.strip_prefix(&self.home).unwrap().to_owned());
            }
        });
        found.sort();
        found
    }
}

fn walk(dir: &Path, visit: &mut impl FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, visit);
        } else {
            visit(&path);
        }
    }
}

/// DeerFlow's `make_safe_user_id`: ids in `[A-Za-z0-9_-]` pass unchanged; others get each
/// other character replaced by `-` and the first 16 hex digits of their SHA-256 appended.
pub fn safe_user_id(raw: &str) -> String {
    use sha2::Digest;
    let safe = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if raw.chars().all(safe) {
        return raw.to_owned();
    }
    let sanitized: String = raw.chars().map(|c| if safe(c) { c } else { '-' }).collect();
    let digest = sha2::Sha256::digest(raw.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{sanitized}-{}", &hex[..16])
}
