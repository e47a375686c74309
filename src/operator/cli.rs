//! The `deliveries` and `drain` subcommands (issue 33); `main.rs` loads the configuration
//! and hands it here. Output is for the operator: a table (or JSON) on standard output,
//! what went wrong on standard error, exit status 1 on a failure.
//!
//! Where `deliveries` works: with `--admin URL`, through that daemon's operator endpoints;
//! otherwise on the configured store. PostgreSQL is shared with running replicas, so the
//! store is used directly and a running replica takes a retried delivery up at its next
//! journal upkeep (within 5 s). An SQLite store is the daemon's alone while it runs (its
//! lock file): then the command goes through the daemon's admin endpoints at
//! `bridge.admin_listen` (needs `bridge.admin_token`), and otherwise, the daemon stopped,
//! works on the file and the next start takes a retried delivery up.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};

use super::{
    AdminClient, Change, ClientError, Deliveries, Delivery, Page, Selection, deliveries::PAGE_MAX,
};
use crate::config::{Settings, StoreLocation};
use crate::store::{Store, StoreError};

/// The longest `drain --timeout`: a week.
const MAX_DRAIN_WAIT_SECS: u64 = 7 * 24 * 3600;

/// `im-bridge deliveries`.
#[derive(Args, Debug)]
pub struct DeliveriesArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
    /// The configuration file.
    #[arg(
        long,
        short,
        default_value = "config.yaml",
        env = "DEER_FLOW_CONFIG_PATH",
        global = true
    )]
    pub config: PathBuf,
    /// Go through the running daemon's admin endpoints at this address (http://HOST:PORT)
    /// instead of the store.
    #[arg(long, value_name = "URL", global = true)]
    pub admin: Option<String>,
}

/// What `im-bridge deliveries` does.
#[derive(Subcommand, Debug)]
pub enum Action {
    /// List the answers that wait to be delivered or whose retries gave up: id, state,
    /// age, attempts, conversation and last error (no message text unless --show-text).
    List {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Show each message and its undelivered answers too.
        #[arg(long)]
        show_text: bool,
    },
    /// Make deliveries due now: one that gave up is retried for another
    /// bridge.final_retry_hours, a pending one is tried at once.
    Retry(Target),
    /// Remove deliveries from the journal: their answers are never delivered.
    Drop(Target),
}

/// Which deliveries `retry` and `drop` act on.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// The delivery's id, as `list` shows it.
    pub id: Option<String>,
    /// Every delivery in the journal.
    #[arg(long)]
    pub all: bool,
}

impl Target {
    fn selection(&self) -> Selection {
        match &self.id {
            Some(id) if !self.all => Selection::Ids(vec![id.clone()]),
            _ => Selection::All,
        }
    }
}

/// `im-bridge drain`.
#[derive(Args, Debug)]
pub struct DrainArgs {
    /// The configuration file.
    #[arg(
        long,
        short,
        default_value = "config.yaml",
        env = "DEER_FLOW_CONFIG_PATH"
    )]
    pub config: PathBuf,
    /// The daemon's admin endpoints (http://HOST:PORT) [default: bridge.admin_listen].
    #[arg(long, value_name = "URL")]
    pub admin: Option<String>,
    /// Return once the daemon started draining, without waiting for it to stop.
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for the daemon to stop, at most a week [default: twice the
    /// shutdown grace period plus 30 s].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(..=MAX_DRAIN_WAIT_SECS))]
    pub timeout: Option<u64>,
}

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Daemon(#[from] ClientError),
    #[error(
        "the store is in use by a running daemon; stop it, or set bridge.admin_token so this command goes through the daemon's admin endpoints"
    )]
    InUse,
    #[error("there is no store file at {0}")]
    NoStore(PathBuf),
    #[error(
        "bridge.admin_token is not set, so the daemon serves no operator endpoints; send it SIGUSR1 to drain it (kill -USR1 PID, systemctl kill -s USR1 im-bridge)"
    )]
    NoToken,
    #[error("the daemon still answers after {0} s")]
    StillRunning(u64),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Where `deliveries` acts.
enum Route {
    /// On the store.
    Store(Arc<dyn Store>),
    /// Through a daemon's operator endpoints.
    Daemon(AdminClient),
}

impl Route {
    async fn page(&self, after: i64, show_text: bool) -> Result<Page, CliError> {
        Ok(match self {
            Self::Store(store) => {
                Deliveries::new(store.clone())
                    .page(after, PAGE_MAX, show_text)
                    .await?
            }
            Self::Daemon(client) => client.page(after, PAGE_MAX, show_text).await?,
        })
    }

    async fn change(&self, change: Change, selection: &Selection) -> Result<usize, CliError> {
        Ok(match self {
            Self::Store(store) => {
                Deliveries::new(store.clone())
                    .change(change, selection)
                    .await?
            }
            Self::Daemon(client) => client.change(change, selection).await?,
        })
    }
}

/// Runs `im-bridge deliveries` with the loaded `settings`.
pub async fn deliveries(args: &DeliveriesArgs, settings: &Settings) -> ExitCode {
    let outcome = async {
        let route = route(args, settings).await?;
        let done = run(&args.action, &route, settings).await;
        if let Route::Store(store) = &route
            && let Err(error) = store.close().await
        {
            tracing::warn!(%error, "Closing the store failed.");
        }
        done
    };
    report(outcome.await)
}

/// Runs `im-bridge drain` with the loaded `settings`.
pub async fn drain(args: &DrainArgs, settings: &Settings) -> ExitCode {
    report(drain_daemon(args, settings).await)
}

fn report(outcome: Result<ExitCode, CliError>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "im-bridge: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn route(args: &DeliveriesArgs, settings: &Settings) -> Result<Route, CliError> {
    if let Some(base) = &args.admin {
        return Ok(Route::Daemon(daemon_client(base, settings)?));
    }
    if let StoreLocation::Sqlite(path) = &settings.store
        && !path.exists()
    {
        return Err(CliError::NoStore(path.clone()));
    }
    match settings.store.open().await {
        Ok(store) => Ok(Route::Store(store)),
        Err(StoreError::Locked { .. }) if settings.admin_token.is_some() => {
            let base = admin_base(settings);
            Ok(Route::Daemon(daemon_client(&base, settings)?))
        }
        Err(StoreError::Locked { .. }) => Err(CliError::InUse),
        Err(error) => Err(error.into()),
    }
}

/// The daemon's admin endpoints as `bridge.admin_listen` names them (an address that
/// listens on every interface is asked on loopback).
fn admin_base(settings: &Settings) -> String {
    let mut addr = settings.admin_listen;
    if addr.ip().is_unspecified() {
        let loopback = match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        };
        addr.set_ip(loopback);
    }
    format!("http://{addr}")
}

fn daemon_client(base: &str, settings: &Settings) -> Result<AdminClient, CliError> {
    let token = settings.admin_token.clone().ok_or(CliError::NoToken)?;
    Ok(AdminClient::new(base, token)?)
}

async fn run(action: &Action, route: &Route, settings: &Settings) -> Result<ExitCode, CliError> {
    let mut out = std::io::stdout();
    let (change, target) = match action {
        Action::List { json, show_text } => {
            let mut all = Vec::new();
            let mut after = 0;
            loop {
                let page = route.page(after, *show_text).await?;
                all.extend(page.deliveries);
                match page.next {
                    Some(next) => after = next,
                    None => break,
                }
            }
            if *json {
                serde_json::to_writer_pretty(&mut out, &all).map_err(std::io::Error::from)?;
                writeln!(out)?;
            } else {
                table(&mut out, &all, *show_text)?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        Action::Retry(target) => (Change::Retry, target),
        Action::Drop(target) => (Change::Drop, target),
    };
    let count = route.change(change, &target.selection()).await?;
    let noun = if count == 1 { "delivery" } else { "deliveries" };
    if change == Change::Retry {
        writeln!(out, "Retried {count} {noun}.")?;
        match (count, route, &settings.store) {
            (0, _, _) => {}
            (_, Route::Daemon(_), _) => writeln!(out, "The daemon tries again now.")?,
            (_, Route::Store(_), StoreLocation::Postgres(_)) => writeln!(
                out,
                "A running replica tries again within seconds, or else the next one to start."
            )?,
            (_, Route::Store(_), StoreLocation::Sqlite(_)) => {
                writeln!(out, "The next start of im-bridge tries again.")?
            }
        }
    } else {
        writeln!(out, "Dropped {count} {noun}.")?;
    }
    if count == 0
        && let Some(id) = &target.id
    {
        let mut err = std::io::stderr();
        match change {
            Change::Retry => writeln!(
                err,
                "im-bridge: no delivery {id} to retry: it is not in the journal, its answer is still under way, or it waits for its chat's next message."
            )?,
            Change::Drop => writeln!(
                err,
                "im-bridge: no delivery {id} to drop: it is not in the journal, or its answer is still under way."
            )?,
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the listing as a table: id, state, age, attempts, conversation, last error; with
/// `show_text`, each message and its answers below its row.
fn table(out: &mut impl Write, deliveries: &[Delivery], show_text: bool) -> std::io::Result<()> {
    if deliveries.is_empty() {
        return writeln!(out, "No delivery is pending or gave up.");
    }
    let header = [
        "ID",
        "STATE",
        "AGE",
        "ATTEMPTS",
        "CONVERSATION",
        "LAST ERROR",
    ];
    let rows: Vec<[String; 6]> = deliveries
        .iter()
        .map(|d| {
            [
                d.id.clone(),
                d.state.as_str().to_owned(),
                age(d.age_seconds),
                d.attempts.to_string(),
                d.conversation.clone(),
                d.last_error.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |out: &mut dyn Write, cells: [&str; 6]| -> std::io::Result<()> {
        for (i, cell) in cells.iter().enumerate().take(5) {
            write!(out, "{cell:<width$}  ", width = widths[i])?;
        }
        writeln!(out, "{}", cells[5])
    };
    line(out, header)?;
    for (row, delivery) in rows.iter().zip(deliveries) {
        line(out, [&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]])?;
        if let (true, Some(text)) = (show_text, &delivery.text) {
            writeln!(out, "    message: {}", indent(&text.message))?;
            for answer in &text.answers {
                writeln!(out, "    answer:  {}", indent(answer))?;
            }
        }
    }
    Ok(())
}

/// A text's later lines indented under its first.
fn indent(text: &str) -> String {
    text.replace('\n', "\n             ")
}

/// An age as `45s`, `12m`, `3h 05m` or `2d 04h`.
fn age(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        s => format!("{}d {:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

async fn drain_daemon(args: &DrainArgs, settings: &Settings) -> Result<ExitCode, CliError> {
    let base = args.admin.clone().unwrap_or_else(|| admin_base(settings));
    let client = daemon_client(&base, settings)?;
    client.drain().await?;
    let mut out = std::io::stdout();
    writeln!(
        out,
        "Draining the daemon at {}: it takes no new messages, finishes what it admitted and leaves pending deliveries to the next process.",
        client.base()
    )?;
    if args.no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    let grace = settings.intake.shutdown_grace;
    let timeout = args
        .timeout
        .unwrap_or_else(|| (grace * 2 + Duration::from_secs(30)).as_secs());
    let until = Instant::now() + Duration::from_secs(timeout);
    // The admin endpoints are the last part of the daemon to stop.
    while client.alive().await {
        if Instant::now() >= until {
            return Err(CliError::StillRunning(timeout));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    writeln!(out, "The daemon drained and stopped.")?;
    Ok(ExitCode::SUCCESS)
}
