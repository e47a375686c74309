//! Issue 27, finding 2: replicas whose clocks disagree. The real binary runs twice on one
//! PostgreSQL schema against the fake Telegram (which ends a long poll with a 409 when
//! another one starts, as Telegram does) and the Gateway simulator; the second replica runs
//! under libfaketime with its clock 30 s ahead. Leases and journal claims are decided by the
//! database's clock, so the skewed replica stands by while the holder lives, takes none of
//! its in-flight work, and takes both over only once the holder's leases really ran out.
//!
//! libfaketime is preloaded directly (`LD_PRELOAD` and `FAKETIME`) rather than through the
//! `faketime` wrapper, which forks: the replica has to be the child process this test
//! kills. Without libfaketime (or PostgreSQL) the test is skipped with a printed line, and
//! fails under `IM_BRIDGE_TEST_STRICT`, which CI sets (`.ci/run` installs Debian's
//! `faketime`; `IM_BRIDGE_LIBFAKETIME` names the library where it lives elsewhere). The
//! monotonic clock stays real (`FAKETIME_DONT_FAKE_MONOTONIC`): only the wall clock is off,
//! as on a machine whose NTP is broken.
//!
//! Also here, since it reads the same rows by the same clock: a daemon takes leases as
//! long as `bridge.store_lease_seconds` says (no libfaketime needed).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use im_bridge::simulator::{Hold, Script};
use tokio::time::Instant;

use crate::crash::{Crashable, DEADLINE, kill9, late, with_text};
use crate::support::PgSchema;

/// How far ahead the second replica's wall clock runs.
const SKEW_SECS: u64 = 30;
/// The lease the daemons take on their transport and their journal entries (renewed every
/// third; `bridge.store_lease_seconds`): shortened from the default 15 s so that the
/// renewals watched and the takeover waited for take seconds, not a minute. The skew
/// stays six leases long: a replica that judged leases by its own clock would find every
/// lease of A's expired at once.
const TTL: Duration = crate::crash::SHORT_LEASE;
/// Long enough for a lease to run out and be taken over, with room to spare.
const TAKEOVER: Duration = Duration::from_secs(60);
/// How often the store is read while waiting.
const POLL: Duration = Duration::from_millis(25);

/// The preloadable libfaketime; `None` (said once, a failure under `IM_BRIDGE_TEST_STRICT`)
/// when this machine has none.
fn libfaketime() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("IM_BRIDGE_LIBFAKETIME") {
        let path = PathBuf::from(path);
        assert!(
            path.exists(),
            "IM_BRIDGE_LIBFAKETIME: no {}",
            path.display()
        );
        return Some(path);
    }
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/lib64/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ];
    let found = candidates.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        im_bridge_fakes::prereq::missing(
            "libfaketime",
            "the clock-skew test runs a replica with its clock 30 s off; install it \
             (`apt-get install faketime`) or set IM_BRIDGE_LIBFAKETIME to libfaketime.so.1",
        );
    }
    found
}

/// The holder and expiry (the database's unix milliseconds) of the Telegram lease.
async fn telegram_lease(pg: &PgSchema) -> Option<(String, i64)> {
    let sql = format!(
        "SELECT holder, expires_at FROM {}.im_bridge_leases WHERE name = 'transport:telegram'",
        pg.name
    );
    let row = pg.admin.query_opt(&sql, &[]).await.ok()??;
    Some((row.get(0), row.get(1)))
}

/// Each journal entry's holder, lease end (milliseconds) and record.
async fn journal(pg: &PgSchema) -> Vec<(String, i64, String)> {
    let sql = format!(
        "SELECT holder, lease_until, record FROM {}.im_bridge_journal ORDER BY seq",
        pg.name
    );
    pg.admin
        .query(&sql, &[])
        .await
        .map(|rows| {
            rows.iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect()
        })
        .unwrap_or_default()
}

/// How far, in milliseconds, the Telegram lease and the first journal entry's lease run
/// out after the database's now (`None` where there is no such row).
async fn leases_ahead(pg: &PgSchema) -> (Option<i64>, Option<i64>) {
    let now = "(floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)";
    let sql = format!(
        "SELECT (SELECT expires_at FROM {s}.im_bridge_leases WHERE name = 'transport:telegram') - {now},
                (SELECT lease_until FROM {s}.im_bridge_journal ORDER BY seq LIMIT 1) - {now}",
        s = pg.name
    );
    let row = pg.admin.query_one(&sql, &[]).await.unwrap();
    (row.get(0), row.get(1))
}

/// Waits until the journal holds exactly one entry and its run id is saved.
async fn wait_running_entry(c: &Crashable, pg: &PgSchema) -> (String, i64) {
    let until = Instant::now() + TAKEOVER;
    loop {
        if let [(holder, lease_until, record)] = journal(pg).await.as_slice()
            && record.contains("run_id")
        {
            return (holder.clone(), *lease_until);
        }
        assert!(Instant::now() < until, "no run id journaled\n{}", c.logs());
        tokio::time::sleep(POLL).await;
    }
}

/// Seconds into the UTC day of a log line's RFC 3339 timestamp (`…THH:MM:SS.ffffffZ…`,
/// maybe wrapped in colour codes).
fn second_of_day(line: &str) -> Option<f64> {
    let (_, time) = line.split_whitespace().next()?.split_once('T')?;
    let mut parts = time.split('Z').next()?.split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    Some(hours * 3600.0 + minutes * 60.0 + seconds)
}

#[tokio::test]
async fn issue_27_a_replica_whose_clock_runs_30_s_ahead_neither_polls_nor_takes_live_work() {
    let Some(faketime) = libfaketime() else {
        return;
    };
    let Some(pg) = PgSchema::create("im_bridge_skew").await else {
        return;
    };
    let c = Crashable::with_short_leases(tempfile::tempdir().unwrap(), pg.url.clone()).await;
    let conflicts = || {
        c.fake
            .calls_to("getUpdates")
            .iter()
            .filter(|call| call.status == 409)
            .count()
    };
    let transports_started = || c.fake.calls_to("getMe").len();
    let joins = || c.paths().iter().filter(|p| p.ends_with("/join")).count();

    // A holds the polling lease and a journaled message whose run is in flight.
    c.sim.script_next_run(
        Script::with_answer("answered by the holder")
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    let a = c.spawn(0);
    let a_holder = format!("{}-", a.id().unwrap());
    c.fake
        .wait_for_call("replica A polls", DEADLINE, |call| {
            call.method == "getUpdates"
        })
        .await
        .unwrap();
    c.say("first");
    let (holder, _) = wait_running_entry(&c, &pg).await;
    assert!(holder.starts_with(&a_holder), "A holds its entry: {holder}");

    // B starts with its wall clock 30 s ahead.
    let real_second = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        % 86_400.0;
    let b = c.spawn_with(
        1,
        &[
            ("LD_PRELOAD", faketime.to_str().unwrap()),
            ("FAKETIME", &format!("+{SKEW_SECS}s")),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    // Up once it decided about the transport lease (stand by, or, wrongly, take it).
    let until = Instant::now() + DEADLINE;
    while !["standing by.", "starting the transport."]
        .iter()
        .any(|decided| c.log(1).contains(decided))
    {
        assert!(Instant::now() < until, "B never started\n{}", c.logs());
        tokio::time::sleep(POLL).await;
    }
    // B's clock really is ahead: its log lines are stamped 30 s in the future.
    let b_second = second_of_day(&c.log(1)).expect("B's log opens with a timestamp");
    let ahead = (b_second - real_second).rem_euclid(86_400.0);
    assert!(
        (SKEW_SECS as f64 - 1.0..SKEW_SECS as f64 + 10.0).contains(&ahead),
        "B's clock is {ahead:.1} s ahead, not {SKEW_SECS} s: is libfaketime preloaded?"
    );

    // Over two lease periods (A renews every third of one), A keeps both leases: B never
    // polls Telegram and never claims or joins A's run.
    let (_, mut last_expiry) = telegram_lease(&pg).await.expect("A's lease");
    let until = Instant::now() + 4 * TTL;
    let mut renewals = 0;
    while renewals < 6 {
        let (holder, expiry) = telegram_lease(&pg).await.expect("the lease row");
        let entries = journal(&pg).await;
        assert!(
            holder.starts_with(&a_holder)
                && entries.iter().all(|(h, _, _)| h.starts_with(&a_holder))
                && conflicts() == 0
                && transports_started() == 1
                && joins() == 0,
            "B took over from a live A (whose holders start {a_holder}): lease held by \
             {holder}, journal held by {:?}, {} getUpdates conflicts, {} transports \
             started, {} joins\n{}",
            entries.iter().map(|(h, _, _)| h).collect::<Vec<_>>(),
            conflicts(),
            transports_started(),
            joins(),
            c.logs()
        );
        if expiry > last_expiry {
            renewals += 1;
            last_expiry = expiry;
        }
        assert!(Instant::now() < until, "A stopped renewing\n{}", c.logs());
        tokio::time::sleep(POLL).await;
    }

    // The run ends: A answers, once, in time (no "comes late" line), and one run ran.
    let thread = c.sim.thread_ids().pop().unwrap();
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    let messages = c.wait_text("answered by the holder").await;
    assert_eq!(
        with_text(&messages, "answered by the holder").len(),
        1,
        "{messages:?}"
    );
    assert_eq!(c.run_starts(), 1, "{:?}", c.paths());

    // A dies with a second run in flight: B takes the transport and the entry over, each
    // only once A's lease on it ran out by the database's clock.
    c.sim.script_next_run(
        Script::with_answer("finished by the standby")
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    c.say("second");
    wait_running_entry(&c, &pg).await;
    kill9(a).await;
    let (holder, a_lease_end) = telegram_lease(&pg).await.expect("A's lease");
    assert!(holder.starts_with(&a_holder), "{holder}");
    let (holder, a_entry_end) = wait_running_entry(&c, &pg).await;
    assert!(holder.starts_with(&a_holder), "{holder}");
    let ttl_ms = i64::try_from(TTL.as_millis()).unwrap();

    let until = Instant::now() + TAKEOVER;
    let b_lease_end = loop {
        match telegram_lease(&pg).await {
            Some((holder, end)) if !holder.starts_with(&a_holder) => break end,
            _ => {}
        }
        assert!(
            Instant::now() < until,
            "B never took the lease\n{}",
            c.logs()
        );
        tokio::time::sleep(POLL).await;
    };
    // Taken at (its expiry - TTL) or earlier if renewed since; never before A's ran out.
    assert!(
        b_lease_end - ttl_ms >= a_lease_end,
        "B took the lease {} ms before A's ran out",
        a_lease_end - (b_lease_end - ttl_ms)
    );
    c.sim
        .wait_for_requests(1, TAKEOVER, |r| r.path.ends_with("/join"))
        .await
        .unwrap_or_else(|_| panic!("B never followed A's run\n{}", c.logs()));
    let (holder, b_entry_end) = wait_running_entry(&c, &pg).await;
    assert!(!holder.starts_with(&a_holder), "{holder}");
    assert!(
        b_entry_end - ttl_ms >= a_entry_end,
        "B took the entry {} ms before A's lease on it ran out",
        a_entry_end - (b_entry_end - ttl_ms)
    );
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    let messages = c.wait_text(&late("finished by the standby")).await;
    assert_eq!(
        with_text(&messages, "finished by the standby").len(),
        1,
        "{messages:?}"
    );
    assert_eq!(c.run_starts(), 2, "{:?}", c.paths());
    assert_eq!(conflicts(), 0, "one poller at a time\n{}", c.logs());
    assert_eq!(transports_started(), 2);
    drop(b);
    pg.drop().await;
}

/// `bridge.store_lease_seconds` is what the daemon's leases last: with a run in flight, its
/// transport's lease and its journaled message's run out at most that long after the
/// database's now (renewed every third of it), where the default would put them 10 to
/// 15 s ahead.
#[tokio::test]
async fn the_daemon_takes_leases_as_long_as_bridge_store_lease_seconds() {
    let Some(pg) = PgSchema::create("im_bridge_lease").await else {
        return;
    };
    let c = Crashable::with_short_leases(tempfile::tempdir().unwrap(), pg.url.clone()).await;
    c.sim.script_next_run(
        Script::with_answer("held open")
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    let daemon = c.spawn(0);
    c.say("how long is a lease?");
    wait_running_entry(&c, &pg).await;
    let ttl_ms = i64::try_from(TTL.as_millis()).unwrap();
    let (transport, entry) = leases_ahead(&pg).await;
    for (what, ahead) in [("transport lease", transport), ("journal lease", entry)] {
        let ahead = ahead.unwrap_or_else(|| panic!("no {what}\n{}", c.logs()));
        assert!(
            (1..=ttl_ms).contains(&ahead),
            "the {what} runs out {ahead} ms after the database's now, not within {ttl_ms} ms"
        );
    }
    drop(daemon);
    pg.drop().await;
}
