//! Pre-flight checks for `im-bridge doctor`: what one check reports, and the pieces every
//! adapter's checks share.
//!
//! The daemon runs its own checks (Gateway, store, admin address) and asks each enabled
//! channel for its own through [`Configured::doctor`](crate::Configured::doctor): an adapter
//! knows its platform, the daemon never matches on platform names. A check is one line of
//! operator output: ok, FAIL with a fix hint, or skip with the reason.
//!
//! What a credential check finds is sorted into a [`Failure`] by the adapter's error type
//! ([`Diagnose`], which the kit's `channel_error!` implements: the error knows a refusal
//! from an unreachable host), and [`Credentials::check`] words the line and its hint the
//! same way for every platform. Texts never hold a secret: adapters
//! build them from their log-safe error `Display`s and, to be sure, [`Check::scrub`] every
//! secret value they hold out of the finished checks. URLs are printed through
//! [`display_url`], which drops credentials, query and fragment.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

pub use futures_util::future::BoxFuture;

use crate::http::HttpError;
use crate::secret::Secret;
use crate::state::{ChannelState, MemoryState};
use crate::token::{TokenCache, TokenSource};

/// An adapter's checks over its validated settings (the [`Adapter`](crate::Adapter)
/// field) and what the daemon knows of the channel ([`Context`]). They may call the
/// platform (one cheap authenticated call, a token request) and read the channel's state,
/// but change nothing and start no transport.
pub type DoctorFn<S> = for<'a> fn(&'a S, &'a Context) -> BoxFuture<'a, Vec<Check>>;

/// The [`DoctorFn`] of an adapter with nothing to check.
pub fn no_checks<'a, S>(_settings: &'a S, _ctx: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async { Vec::new() })
}

/// What `im-bridge doctor` hands a channel's checks besides its settings.
#[derive(Clone)]
#[non_exhaustive]
pub struct Context {
    /// The channel's persistent state as the daemon's store holds it (a login the adapter
    /// keeps there): for reading only. When the store cannot be opened every call fails
    /// with [`StateError::Store`](crate::StateError::Store).
    pub state: Arc<dyn ChannelState>,
}

impl Context {
    /// A context reading the channel's state from `state`.
    pub fn new(state: Arc<dyn ChannelState>) -> Self {
        Self { state }
    }
}

/// An empty state in memory (tests).
impl Default for Context {
    fn default() -> Self {
        Self::new(Arc::new(MemoryState::new()))
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// One pre-flight check and what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// What was checked, e.g. `gateway token` or `telegram webhook`.
    pub name: String,
    /// What it found.
    pub outcome: Outcome,
}

/// What a check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// All is well; `detail` says what was seen (a bot's name, an address).
    Ok {
        /// What was seen.
        detail: String,
    },
    /// Something is wrong.
    Fail {
        /// What is wrong (log-safe: no secret, no message text).
        problem: String,
        /// What the operator should do about it, naming the configuration key.
        hint: String,
    },
    /// Not checked, because an earlier check failed or it does not apply.
    Skip {
        /// Why not.
        reason: String,
    },
}

impl Check {
    /// A check that passed.
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            outcome: Outcome::Ok {
                detail: detail.into(),
            },
        }
    }

    /// A check that failed, with its fix hint.
    pub fn fail(
        name: impl Into<String>,
        problem: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            outcome: Outcome::Fail {
                problem: problem.into(),
                hint: hint.into(),
            },
        }
    }

    /// A check that was not made.
    pub fn skip(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            outcome: Outcome::Skip {
                reason: reason.into(),
            },
        }
    }

    /// Whether the check failed.
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Fail { .. })
    }

    /// The check with every non-empty value of `secrets` replaced by `<redacted>` in its
    /// texts: a last guard, since the texts come from error messages.
    pub fn scrub(mut self, secrets: &[&Secret]) -> Self {
        let texts: Vec<&mut String> = match &mut self.outcome {
            Outcome::Ok { detail } => vec![detail],
            Outcome::Fail { problem, hint } => vec![problem, hint],
            Outcome::Skip { reason } => vec![reason],
        };
        for text in std::iter::once(&mut self.name).chain(texts) {
            for secret in secrets.iter().filter(|s| !s.is_empty()) {
                if text.contains(secret.expose()) {
                    *text = text.replace(secret.expose(), "<redacted>");
                }
            }
        }
        self
    }
}

/// One line: `ok   name: detail`, `FAIL name: problem; fix: hint` or `skip name: reason`.
impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match &self.outcome {
            Outcome::Ok { detail } => write!(f, "ok   {name}: {detail}"),
            Outcome::Fail { problem, hint } => write!(f, "FAIL {name}: {problem}; fix: {hint}"),
            Outcome::Skip { reason } => write!(f, "skip {name}: {reason}"),
        }
    }
}

/// `url` as it may be printed: scheme, host, port and path, without user, password, query
/// or fragment (any of which may carry a credential). A text that is not a URL prints as
/// `(not a URL)`.
pub fn display_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            // Only fails for URLs that cannot have a user (then they have none).
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string().trim_end_matches('/').to_owned()
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// `error` and its sources, `: `-joined (`calling getMe failed: error sending request:
/// tcp connect error: Connection refused`): the top line alone often hides the cause.
/// Only for errors whose every `Display` is log-safe, as adapters' errors are.
pub fn reason(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        // Wrappers often repeat their cause's text; say it once.
        if !text.ends_with(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// Binds `addr` and lets it go at once: whether the daemon will be able to listen there.
/// `key` names the setting, for the hint.
pub fn address_free(name: impl Into<String>, addr: SocketAddr, key: &str) -> Check {
    match std::net::TcpListener::bind(addr) {
        Ok(listener) => {
            drop(listener);
            Check::ok(name, format!("{addr} is free"))
        }
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => Check::fail(
            name,
            format!("{addr} is in use"),
            format!("stop what listens there (another im-bridge?) or change {key}"),
        ),
        Err(error) => Check::fail(
            name,
            format!("cannot listen on {addr}: {error}"),
            format!("change {key} to an address of this host"),
        ),
    }
}

/// [`address_free`] for a channel's webhook: the check `<channel> webhook address`,
/// pointing at `channels.<channel>.webhook.listen`.
pub fn webhook_address(channel: &str, listen: SocketAddr) -> Check {
    let key = format!("channels.{channel}.webhook.listen");
    address_free(format!("{channel} webhook address"), listen, &key)
}

/// Every check [scrubbed](Check::scrub) of `secrets`.
pub fn scrubbed(checks: Vec<Check>, secrets: &[&Secret]) -> Vec<Check> {
    checks.into_iter().map(|c| c.scrub(secrets)).collect()
}

/// How a credential check failed, as the adapter sorts its error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer: connection refused, DNS, TLS, timeout.
    Unreachable,
    /// The platform answered and refused the credentials.
    Refused,
    /// The platform asked to slow down.
    Throttled,
    /// Any other answer: a server error, a 404, something that is not the platform's API.
    Unexpected,
}

impl Failure {
    /// A platform's refusal under HTTP `status`: a 404 or a 5xx says the URL is not the
    /// platform's API (or it is down), any other status that the credentials were refused.
    pub fn refusal(status: u16) -> Self {
        if status == 404 || status >= 500 {
            Self::Unexpected
        } else {
            Self::Refused
        }
    }
}

impl From<&HttpError> for Failure {
    /// How a credential check's call failed on the wire; a platform's own refusals are
    /// the adapter's to sort.
    fn from(error: &HttpError) -> Self {
        match error {
            HttpError::Transport { .. } => Self::Unreachable,
            HttpError::RetryAfter(_) => Self::Throttled,
            HttpError::Status { status, .. } => Self::refusal(*status),
            _ => Self::Unexpected,
        }
    }
}

/// How an adapter's error reads to `doctor`: the kind of [`Failure`] a credential check
/// met. The kit's `channel_error!` implements it for an error of the kit's shape.
pub trait Diagnose: std::error::Error {
    /// What kind of failure this is.
    fn failure(&self) -> Failure;
}

/// The configuration keys a credential check points at when it fails, written in full
/// (`channels.<platform>.<key>`) so that a hint can be pasted into a search of the
/// config file. An adapter declares its own once, beside its config.
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    /// The base URL's key, e.g. `channels.telegram.api_url`.
    pub url: &'static str,
    /// The credential keys, e.g. `channels.feishu.app_id and channels.feishu.app_secret`.
    pub secrets: &'static str,
}

/// What a platform's credential check is about, to word its line and hints.
#[derive(Clone, Copy, Debug)]
pub struct Credentials<'a> {
    /// The check's name (usually the channel's).
    pub name: &'a str,
    /// The base URL called.
    pub url: &'a str,
    /// Its configuration key, e.g. `channels.telegram.api_url`.
    pub url_key: &'a str,
    /// The credential keys, e.g. `channels.feishu.app_id and channels.feishu.app_secret`.
    pub secret_keys: &'a str,
}

impl<'a> Credentials<'a> {
    /// The credential check named `name` of a client calling `url`, its hints naming `keys`.
    pub fn new(name: &'a str, url: &'a str, keys: Keys) -> Self {
        Self {
            name,
            url,
            url_key: keys.url,
            secret_keys: keys.secrets,
        }
    }

    /// The check of one authenticated call's `answer`: `Ok(detail)` when the credentials
    /// were accepted, else the error as it [diagnoses](Diagnose) itself.
    pub fn answer<E: Diagnose>(&self, answer: Result<String, E>) -> Check {
        self.check(answer.map_err(|error| (error.failure(), reason(&error))))
    }

    /// The check for what the platform answered: `Ok(detail)` when the credentials were
    /// accepted, else how it failed and why (log-safe text).
    pub fn check(&self, answer: Result<String, (Failure, String)>) -> Check {
        let (failure, why) = match answer {
            Ok(detail) => return Check::ok(self.name, detail),
            Err(failed) => failed,
        };
        let url = display_url(self.url);
        let (problem, hint) = match failure {
            Failure::Unreachable => (
                format!("cannot reach {url}: {why}"),
                format!(
                    "check {} and that this host can reach it (DNS, proxy, firewall)",
                    self.url_key
                ),
            ),
            Failure::Refused => (
                format!("the credentials were refused: {why}"),
                format!("check {}", self.secret_keys),
            ),
            Failure::Throttled => (
                format!("rate limited: {why}"),
                "wait a minute, then run doctor again".to_owned(),
            ),
            Failure::Unexpected => (
                format!("unexpected answer from {url}: {why}"),
                format!("check that {} is the platform's API base URL", self.url_key),
            ),
        };
        Check::fail(self.name, problem, hint)
    }

    /// The check of a token request (Feishu's, DingTalk's, QQ's): asks `tokens` for a
    /// token and words the answer, `issued` when one came, else the error as it
    /// diagnoses itself. `tokens` is an error when the client holding them could not be
    /// built.
    pub async fn token<S>(
        &self,
        tokens: Result<&TokenCache<S>, &S::Error>,
        issued: impl Into<String>,
    ) -> Check
    where
        S: TokenSource,
        S::Error: Diagnose,
    {
        match tokens {
            Ok(tokens) => self.answer(tokens.get().await.map(|_| issued.into())),
            Err(error) => self.check(Err((Failure::Unexpected, reason(error)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_status_name_and_hint() {
        assert_eq!(
            Check::ok("store", "opens and takes writes").to_string(),
            "ok   store: opens and takes writes"
        );
        assert_eq!(
            Check::fail("gateway", "cannot reach it", "check channels.gateway_url").to_string(),
            "FAIL gateway: cannot reach it; fix: check channels.gateway_url"
        );
        assert_eq!(
            Check::skip("gateway token", "the Gateway did not answer").to_string(),
            "skip gateway token: the Gateway did not answer"
        );
        assert!(Check::fail("x", "y", "z").failed());
        assert!(!Check::skip("x", "y").failed());
    }

    #[test]
    fn scrub_removes_every_secret_from_every_text() {
        let secret = Secret::new("s3cr3t");
        let empty = Secret::new("");
        let check = Check::fail("s3cr3t name", "refused s3cr3t twice: s3cr3t", "set s3cr3t")
            .scrub(&[&empty, &secret]);
        let text = check.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert_eq!(text.matches("<redacted>").count(), 4, "{text}");
    }

    #[test]
    fn urls_lose_credentials_query_and_fragment() {
        assert_eq!(
            display_url("https://user:pw@api.example.com:8443/bot/path?token=x#frag"),
            "https://api.example.com:8443/bot/path"
        );
        assert_eq!(display_url("http://127.0.0.1:9/"), "http://127.0.0.1:9");
        assert_eq!(display_url("not a url"), "(not a URL)");
    }

    #[test]
    fn a_reason_names_the_causes_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl fmt::Display for Wrapper {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("calling x failed")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        assert_eq!(reason(&Wrapper(io)), "calling x failed: refused");
    }

    #[test]
    fn an_address_in_use_fails_and_a_free_one_passes() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let check = address_free("admin address", addr, "bridge.admin_listen");
        assert!(check.failed(), "{check}");
        assert!(check.to_string().contains("bridge.admin_listen"), "{check}");
        drop(taken);
        let check = address_free("admin address", addr, "bridge.admin_listen");
        assert!(!check.failed(), "{check}");
    }

    #[test]
    fn a_webhook_address_check_names_the_channel_and_its_listen_key() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let check = webhook_address("demo", taken.local_addr().unwrap());
        assert_eq!(check.name, "demo webhook address");
        assert!(
            check.to_string().contains("channels.demo.webhook.listen"),
            "{check}"
        );
    }

    /// An adapter error of the kit's shape, as `channel_error!` sees it.
    #[derive(Debug, thiserror::Error)]
    enum DemoError {
        #[error(transparent)]
        Http(#[from] HttpError),
        #[error("token refused")]
        TokenInvalid,
        #[error("refused: HTTP {status}")]
        Api { status: u16 },
        #[error("the card is too large")]
        CardTooLarge,
    }

    crate::channel_error!(DemoError; DemoError::TokenInvalid => Refused);

    #[test]
    fn an_error_of_the_kits_shape_diagnoses_itself() {
        let failure = |e: DemoError| e.failure();
        assert_eq!(failure(DemoError::TokenInvalid), Failure::Refused);
        assert_eq!(failure(DemoError::Api { status: 403 }), Failure::Refused);
        assert_eq!(failure(DemoError::Api { status: 502 }), Failure::Unexpected);
        assert_eq!(failure(DemoError::CardTooLarge), Failure::Unexpected);
        let throttled = DemoError::Http(HttpError::RetryAfter(std::time::Duration::from_secs(1)));
        assert_eq!(failure(throttled), Failure::Throttled);
        let keys = Keys {
            url: "channels.demo.api_url",
            secrets: "channels.demo.token",
        };
        let check = Credentials::new("demo", "https://api.example.com", keys)
            .answer::<DemoError>(Err(DemoError::TokenInvalid));
        assert!(
            check
                .to_string()
                .ends_with("fix: check channels.demo.token"),
            "{check}"
        );
        let ok = Credentials::new("demo", "https://api.example.com", keys)
            .answer::<DemoError>(Ok("bot 1".into()));
        assert_eq!(ok.to_string(), "ok   demo: bot 1");
    }

    #[test]
    fn credential_failures_name_the_key_to_fix() {
        let keys = Credentials {
            name: "demo",
            url: "https://u:p@api.example.com/",
            url_key: "channels.demo.api_url",
            secret_keys: "channels.demo.token",
        };
        let unreachable = keys.check(Err((Failure::Unreachable, "refused".into())));
        let text = unreachable.to_string();
        assert!(
            text.starts_with("FAIL demo: cannot reach https://api.example.com"),
            "{text}"
        );
        assert!(text.contains("check channels.demo.api_url"), "{text}");
        assert!(!text.contains("u:p"), "{text}");
        let refused = keys.check(Err((Failure::Refused, "HTTP 401".into())));
        assert!(
            refused
                .to_string()
                .ends_with("fix: check channels.demo.token")
        );
        let unexpected = keys.check(Err((Failure::Unexpected, "HTTP 404".into())));
        assert!(unexpected.to_string().contains("channels.demo.api_url"));
        assert!(keys.check(Err((Failure::Throttled, "429".into()))).failed());
        assert_eq!(Failure::refusal(400), Failure::Refused);
        assert_eq!(Failure::refusal(401), Failure::Refused);
        assert_eq!(Failure::refusal(404), Failure::Unexpected);
        assert_eq!(Failure::refusal(502), Failure::Unexpected);
        assert_eq!(keys.check(Ok("bot @x".into())), Check::ok("demo", "bot @x"));
    }
}
