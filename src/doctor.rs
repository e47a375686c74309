//! `im-bridge doctor`: live pre-flight checks an operator runs once, before the first start
//! or after changing the configuration. One line per check (ok, FAIL with a fix hint, skip),
//! and [`Report::passed`] for the exit status.
//!
//! What is checked, concurrently, each bounded in time:
//! - the Gateway answers at `channels.gateway_url` (`GET /api/models`) and accepts the
//!   internal token (that call needs it when the Gateway's auth is on), and
//!   `channels.langgraph_url` answers (`GET /threads/<nil id>`: any answer of a threads
//!   route will do, not FastAPI's route-level 404);
//! - which optional routes the Gateway serves (`gateway routes`: `goal/from-chat`,
//!   `user-preferences`; a missing one is listed, not failed);
//! - the store opens (created and migrated if it is new, as a start would do) and takes a
//!   write (a lease named [`DOCTOR_LEASE`], taken and given back), then is closed, so a
//!   daemon started right after finds it free;
//! - the admin address is free (bound and let go);
//! - each enabled channel's own checks ([`Configured::doctor`](im_bridge_channel::Configured)):
//!   its credentials against its platform, its webhook state and listen address, and what
//!   it keeps in the store (its state, read with `IM_BRIDGE_SECRET_KEY`: a login's token).
//!   They run while the store is open, which is closed after them. The daemon never names
//!   a platform here: the adapter knows its own.
//!
//! Nothing here changes state anywhere but in the store (its creation, the lease row). Texts never carry a
//! secret: errors are log-safe by contract, URLs are printed without credentials, and
//! every line is scrubbed of the internal token and the store URL's password before it is
//! returned.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::Secret;
use im_bridge_channel::doctor::{Check, Context, address_free, display_url};

use crate::config::{ChannelSettings, GatewaySettings, Settings, StoreLocation};
use crate::gateway::{
    GatewayClient, GatewayConfig, GatewayError, OptionalRoute, Support, ThreadId,
};
use crate::state::ChannelStates;
use crate::store::{Store, StoreError};

/// The lease the store check writes and releases.
pub const DOCTOR_LEASE: &str = "doctor";
/// How long one channel's checks may take before they count as failed.
pub const CHANNEL_TIMEOUT: Duration = Duration::from_secs(20);
/// Timeout of each Gateway call (a Gateway that takes longer to list its models is not
/// healthy).
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long opening the store and the write may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(20);
/// A thread id no Gateway has: looking it up proves the LangGraph routes answer.
const PROBE_THREAD: &str = "00000000-0000-0000-0000-000000000000";

/// Every check, in a stable order: Gateway, store, admin address, then the channels.
#[derive(Clone, Debug)]
pub struct Report {
    /// The checks.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether no check failed (skips do not count).
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(Check::failed)
    }
}

/// One line per check, then a summary line.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            writeln!(f, "{check}")?;
        }
        let failed = self.checks.iter().filter(|c| c.failed()).count();
        match failed {
            0 => writeln!(f, "All {} checks passed.", self.checks.len()),
            n => writeln!(f, "{n} of {} checks failed.", self.checks.len()),
        }
    }
}

/// Runs every check against what `settings` name.
pub async fn run(settings: &Settings) -> Report {
    let (gateway, (store, channels)) = tokio::join!(
        gateway_checks(&settings.gateway),
        store_and_channels(settings),
    );
    let admin = address_free(
        "admin address",
        settings.admin_listen,
        "bridge.admin_listen",
    );
    let secrets = secrets(settings);
    let secrets: Vec<&Secret> = secrets.iter().collect();
    let checks = gateway
        .into_iter()
        .chain([store, admin])
        .chain(channels.into_iter().flatten())
        .map(|check| check.scrub(&secrets))
        .collect();
    Report { checks }
}

/// The secrets the daemon itself holds: the internal token, the store URL and its password.
fn secrets(settings: &Settings) -> Vec<Secret> {
    let mut secrets: Vec<Secret> = settings.gateway.internal_token.iter().cloned().collect();
    if let StoreLocation::Postgres(url) = &settings.store {
        secrets.push(url.clone());
        if let Some(password) = url::Url::parse(url.expose())
            .ok()
            .and_then(|u| u.password().map(str::to_owned))
        {
            let decoded = percent_encoding::percent_decode_str(&password)
                .decode_utf8_lossy()
                .into_owned();
            secrets.extend([Secret::new(password), Secret::new(decoded)]);
        }
    }
    secrets
}

/// `gateway` (it answers), `gateway token` (it lets us in) and `langgraph` (its routes
/// answer).
async fn gateway_checks(settings: &GatewaySettings) -> Vec<Check> {
    let config = GatewayConfig {
        request_timeout: GATEWAY_TIMEOUT,
        connect_timeout: GATEWAY_TIMEOUT,
        ..settings.client_config()
    };
    let client = match GatewayClient::new(config) {
        Ok(client) => client,
        Err(error) => {
            return vec![
                Check::fail(
                    "gateway",
                    format!("cannot build the client: {error}"),
                    "check bridge.internal_token: it must be printable ASCII",
                ),
                Check::skip("gateway token", "no client"),
                Check::skip("langgraph", "no client"),
                Check::skip("gateway routes", "no client"),
            ];
        }
    };
    let url = display_url(&settings.gateway_url);
    let has_token = settings.internal_token.is_some();
    let probe = ThreadId::new(PROBE_THREAD);
    let (models, thread, routes) = tokio::join!(
        client.list_models(None),
        client.get_thread(None, &probe),
        client.probe_optional_routes(),
    );
    let token_accepted = models.is_ok();
    let (gateway, token) = match models {
        Ok(models) => (
            Check::ok(
                "gateway",
                format!("answers at {url} ({} models)", models.len()),
            ),
            Check::ok(
                "gateway token",
                if has_token {
                    "accepted"
                } else {
                    "none set, and the Gateway asked for none (its auth is off)"
                },
            ),
        ),
        Err(GatewayError::Unauthorized | GatewayError::Forbidden) => (
            Check::ok("gateway", format!("answers at {url}")),
            token_refused("gateway token", has_token),
        ),
        Err(error) => (
            gateway_failure(
                "gateway",
                &url,
                "channels.gateway_url",
                "DEER_FLOW_CHANNELS_GATEWAY_URL",
                &error,
            ),
            Check::skip("gateway token", "the Gateway did not answer as it should"),
        ),
    };
    let langgraph_url = display_url(&settings.langgraph_url);
    let langgraph = match thread {
        Ok(_) | Err(GatewayError::NotFound | GatewayError::Invalid { .. }) => {
            Check::ok("langgraph", format!("answers at {langgraph_url}"))
        }
        // Accepted by the Gateway's routes but not by these: they are another server's.
        Err(GatewayError::Unauthorized | GatewayError::Forbidden) if token_accepted => {
            token_refused("langgraph", has_token)
        }
        // The token check already says so.
        Err(GatewayError::Unauthorized | GatewayError::Forbidden) => {
            Check::ok("langgraph", format!("answers at {langgraph_url}"))
        }
        Err(error) => gateway_failure(
            "langgraph",
            &langgraph_url,
            "channels.langgraph_url",
            "DEER_FLOW_CHANNELS_LANGGRAPH_URL",
            &error,
        ),
    };
    let routes = if token_accepted {
        optional_routes(&routes)
    } else {
        Check::skip("gateway routes", "the Gateway did not answer as it should")
    };
    vec![gateway, token, langgraph, routes]
}

/// Which optional routes the Gateway serves (issue 26). A missing one is no failure: the
/// bridge says so to the user when a command needs it.
fn optional_routes(found: &[(OptionalRoute, Support)]) -> Check {
    let listed: Vec<String> = found
        .iter()
        .map(|(route, support)| {
            let state = match support {
                Support::Present => "served",
                Support::Missing => "not served (this DeerFlow version lacks it)",
                Support::Unknown => "unknown (no answer)",
            };
            format!("{}: {state}", route.path())
        })
        .collect();
    Check::ok("gateway routes", listed.join("; "))
}

/// The Gateway answered 401/403 to the check `name`.
fn token_refused(name: &str, has_token: bool) -> Check {
    let hint = "set bridge.internal_token (or DEER_FLOW_INTERNAL_AUTH_TOKEN) to the Gateway's DEER_FLOW_INTERNAL_AUTH_TOKEN";
    let problem = if has_token {
        "the Gateway refused the internal token"
    } else {
        "the Gateway asks for an internal token and none is set"
    };
    Check::fail(name, problem, hint)
}

/// A Gateway call that failed for another reason than the token: `key` and `env` name
/// the URL setting.
fn gateway_failure(name: &str, url: &str, key: &str, env: &str, error: &GatewayError) -> Check {
    let why = error.to_string();
    let why = why.trim_end_matches('.');
    let check_url =
        format!("check {key} (or {env}) and that the Gateway runs and this host can reach it");
    match error {
        GatewayError::Transport { .. } | GatewayError::Timeout => {
            Check::fail(name, format!("no answer from {url}: {why}"), check_url)
        }
        GatewayError::NotFound
        | GatewayError::RouteMissing
        | GatewayError::Decode { .. }
        | GatewayError::Invalid { .. } => Check::fail(
            name,
            format!("{url} does not answer as a DeerFlow Gateway: {why}"),
            format!("check {key}: the Gateway's base URL, e.g. http://gateway:8001"),
        ),
        GatewayError::Server { .. } => Check::fail(
            name,
            format!("{url} failed: {why}"),
            "check the Gateway's logs and health",
        ),
        _ => Check::fail(name, format!("{url}: {why}"), check_url),
    }
}

/// The store's check, then each channel's own with its state read from that store (the
/// secrets' key from the environment, as the daemon reads them); the store is closed
/// after the channels' checks, so a daemon started right after finds it free.
async fn store_and_channels(settings: &Settings) -> (Check, Vec<Vec<Check>>) {
    let location = &settings.store;
    let opened = tokio::time::timeout(STORE_TIMEOUT, store_write(location)).await;
    let states = ChannelStates::new(settings.secret_key.clone());
    let (store, check) = match opened {
        Ok(Ok(store)) => {
            let describe = store.describe();
            states.attach(store.clone());
            (
                Some(store),
                Check::ok("store", format!("{describe} opens and takes writes")),
            )
        }
        Ok(Err(error)) => (None, store_failure(location, &error)),
        Err(_) => (
            None,
            Check::fail(
                "store",
                format!("no answer within {} s", STORE_TIMEOUT.as_secs()),
                "check bridge.store and that its disk or database server responds",
            ),
        ),
    };
    let channels = futures_util::future::join_all(settings.channels.iter().map(|channel| {
        let ctx = Context::new(states.for_channel(&channel.name));
        async move { channel_checks(channel, &ctx).await }
    }))
    .await;
    let check = match store {
        Some(store) => match store.close().await {
            Ok(()) => check,
            Err(error) => store_failure(location, &error),
        },
        None => check,
    };
    (check, channels)
}

/// Opens the store, and writes and releases the doctor lease: the open store.
async fn store_write(location: &StoreLocation) -> Result<Arc<dyn Store>, StoreError> {
    let store = location.open().await?;
    let holder = format!("doctor-{}", crate::lease::holder_id());
    let written = async {
        store
            .acquire_lease(DOCTOR_LEASE, &holder, Duration::from_secs(60))
            .await?;
        store.release_lease(DOCTOR_LEASE, &holder).await
    }
    .await;
    match written {
        Ok(()) => Ok(store),
        Err(error) => {
            let _ = store.close().await;
            Err(error)
        }
    }
}

fn store_failure(location: &StoreLocation, error: &StoreError) -> Check {
    let problem = error.to_string().trim_end_matches('.').to_owned();
    let hint = match (location, error) {
        (_, StoreError::Locked { .. }) => {
            "doctor checks before a start: stop the running im-bridge first".to_owned()
        }
        (_, StoreError::TooNew { .. } | StoreError::TooNewSchema { .. }) => {
            "upgrade im-bridge, or point bridge.store at another store".to_owned()
        }
        (StoreLocation::Sqlite(path), _) => format!(
            "check that {} exists and this user may write it (permissions, systemd StateDirectory, the container's volume), or change bridge.store",
            parent(path)
        ),
        (StoreLocation::Postgres(_), StoreError::Connect { .. }) => {
            "check bridge.store (host, port, user, password, database) and that PostgreSQL accepts this host".to_owned()
        }
        (StoreLocation::Postgres(_), _) => {
            "check the database user's rights (CREATE, INSERT, DELETE) and the server's health"
                .to_owned()
        }
    };
    Check::fail("store", problem, hint)
}

/// The directory a store file lives in, for the hint.
fn parent(path: &Path) -> String {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => dir.display().to_string(),
        None => ".".to_owned(),
    }
}

/// One channel's own checks, bounded by [`CHANNEL_TIMEOUT`].
async fn channel_checks(channel: &ChannelSettings, ctx: &Context) -> Vec<Check> {
    match tokio::time::timeout(CHANNEL_TIMEOUT, channel.platform.doctor(ctx)).await {
        Ok(checks) if checks.is_empty() => {
            vec![Check::skip(
                &channel.name,
                "nothing to check for this channel",
            )]
        }
        Ok(checks) => checks,
        Err(_) => vec![Check::fail(
            &channel.name,
            format!("no answer within {} s", CHANNEL_TIMEOUT.as_secs()),
            format!(
                "check the URLs in channels.{} and this host's outbound network",
                channel.name
            ),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_passes_unless_a_check_failed() {
        let mut report = Report {
            checks: vec![Check::ok("a", "fine"), Check::skip("b", "not needed")],
        };
        assert!(report.passed());
        assert!(report.to_string().ends_with("All 2 checks passed.\n"));
        report.checks.push(Check::fail("c", "broken", "fix it"));
        assert!(!report.passed());
        assert!(report.to_string().ends_with("1 of 3 checks failed.\n"));
    }

    #[test]
    fn a_store_hint_names_the_directory() {
        let location = StoreLocation::Sqlite("/var/lib/im-bridge/bridge.db".into());
        let error = StoreError::Open {
            path: "/var/lib/im-bridge/bridge.db".into(),
            reason: "unable to open database file".into(),
        };
        let text = store_failure(&location, &error).to_string();
        assert!(
            text.contains("check that /var/lib/im-bridge exists"),
            "{text}"
        );
        assert!(text.contains("StateDirectory"), "{text}");
        assert_eq!(parent(Path::new("bridge.db")), ".");
    }

    #[test]
    fn the_store_password_is_a_secret_encoded_or_not() {
        let yaml =
            "channels:\n  console: {enabled: true}\nbridge:\n  store: postgres://im:p%40ss@db/im\n";
        let env = std::collections::HashMap::<String, String>::new();
        let (settings, _) = crate::config::load_str(yaml, &env).unwrap();
        let secrets: Vec<String> = secrets(&settings)
            .iter()
            .map(|s| s.expose().to_owned())
            .collect();
        assert!(secrets.contains(&"p%40ss".to_owned()), "{secrets:?}");
        assert!(secrets.contains(&"p@ss".to_owned()), "{secrets:?}");
    }
}
