//! Transports only one process may run (Telegram long polling: a second poller gets a
//! conflict) run on the replica holding the channel's lease in the shared store; the other
//! replicas stand by and take over when the holder stops or stops renewing (DESIGN.md
//! "Scale-out").
//!
//! The lease `transport:<channel>` is taken for [`DaemonConfig::lease_ttl`]
//! (`bridge.store_lease_seconds`, default [`DEFAULT_TTL`]) and renewed a third of it after
//! the last grant. A holder that cannot renew (the lease went to another replica, or the
//! store failed or did not answer in time) stops its transport before the lease can expire,
//! so two replicas never run the transport at once; then it stands by again. The lease is
//! counted from when the call that took or renewed it was sent (the store wrote its expiry
//! then or later, never earlier), and the transport is stopped once [`STOP_BY`] of it
//! passed without a renewal, the rest left for the transport to wind down (a transport
//! stops within about a second of being told; 1.25 s is the least this leaves). A renewal
//! has until then to answer (a failed one is tried again every twelfth of the lease
//! meanwhile), and one still unanswered then is abandoned, the transport serving on while
//! it waits; a take must answer within a third of the lease, or the transport is not
//! started on it, and the replica stands back for a lease (so that the lease such a late
//! take may have renewed runs out for another replica). So a store that answers within
//! about a third of the lease (5 s of the default) keeps the transport running; with a
//! slower one this replica stops it and leaves it to a replica whose store answers in time,
//! logged. This holds while the store's clock and this process's monotonic clock run alike
//! (a machine suspended meanwhile stops the latter). A holder that shuts down releases the
//! lease (waiting at most a second for the store), so a standby takes over within a third
//! of the TTL (within a lease when the release did not go through, or a renewal abandoned
//! just before commits after it). With the single-replica SQLite store no lease is taken at
//! all ([`Store::is_shared`]): its lock file already keeps a second daemon out, and a lease
//! left by a crashed run would only delay the restart.
//!
//! Replicas may run with different leases. What keeps a holder's work its own depends only
//! on its own lease and the expiry it wrote in the store (a transport's `expires_at`, a
//! journal entry's `lease_until`): it renews every third of its lease, and stops (the
//! transport here, its finals in the journal's fence) by its own clock before that expiry.
//! A replica taking over judges by the stored expiry, never by its own setting; its own
//! lease only adds the journal claim's grace (it claims an entry whose lease ran out one
//! of *its* leases ago), so a fleet is as safe as one whose every replica runs the
//! shortest lease among them.
//!
//! [`DaemonConfig::lease_ttl`]: crate::daemon::DaemonConfig::lease_ttl

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use im_bridge_channel::{Channel, ChannelError, ChannelExit, InboundSink};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// How long a lease lasts unless renewed (`bridge.store_lease_seconds` unset).
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// The longest a shutdown waits to give the lease up (a twelfth of a lease when shorter).
const SHUTDOWN_RELEASE: Duration = Duration::from_secs(1);

/// The part of its lease after which a holder that could not renew stops its transport
/// (three quarters, as the journal's fence withholds finals): 11.25 s of the default, the
/// last 3.75 s left for the transport to stop.
pub const STOP_BY: f64 = 0.75;

/// The shortest lease `bridge.store_lease_seconds` accepts. A holder renews every third
/// of its lease and withholds its finals once three quarters of it passed without a
/// renewal; below 5 s those steps (1.7 s, 3.75 s) leave less room than a PostgreSQL round
/// trip under load may take, so a live replica would withhold finals or give its
/// transport up on an ordinary slow call.
pub const MIN_TTL: Duration = Duration::from_secs(5);

/// The shortest lease whose margins cover a whole store call on a store replicas share:
/// a write stalled for the store's 15 s timeout, with the holder's renewals held up too,
/// has the holder's last quarter of its lease plus the whole lease of the replica taking
/// over before a second replica may answer the same message. `check-config`, and the
/// daemon as it starts, warn below it when the store is PostgreSQL
/// (`docs/configuration.md`).
pub const SHARED_SAFE_TTL: Duration = Duration::from_secs(12);

// The holder's last quarter and the claimer's whole lease cover a whole store call.
const _: () = assert!(
    SHARED_SAFE_TTL.as_millis() * 5 / 4 >= crate::store::postgres::CALL_TIMEOUT.as_millis()
);

/// The longest lease `bridge.store_lease_seconds` accepts: a dead replica's transport
/// waits up to a lease for another replica, and its journaled messages two (the claim's
/// grace), so a longer one means more than ten minutes of silence.
pub const MAX_TTL: Duration = Duration::from_secs(300);

/// The channels standing by for their lease (another replica runs their transport): healthy,
/// so `/readyz` counts them ready.
#[derive(Clone, Debug, Default)]
pub struct Standby(Arc<Mutex<HashSet<&'static str>>>);

impl Standby {
    pub(crate) fn set(&self, channel: &'static str, standing_by: bool) {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if standing_by {
            set.insert(channel);
        } else {
            set.remove(channel);
        }
    }

    /// Whether `channel` is standing by.
    pub fn contains(&self, channel: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(channel)
    }
}

/// This process's name as a lease holder: unique per start.
pub fn holder_id() -> String {
    format!("{}-{:016x}", std::process::id(), rand::random::<u64>())
}

/// What [`run_exclusive`] needs besides the channel.
#[derive(Clone)]
pub struct Lease {
    /// The shared store the lease lives in.
    pub store: Arc<dyn Store>,
    /// This process's holder id.
    pub holder: String,
    /// How long a lease lasts unless renewed.
    pub ttl: Duration,
    /// Where standing by is reported.
    pub standby: Standby,
}

/// Runs `channel`'s transport whenever this replica holds its lease, until `shutdown`.
pub async fn run_exclusive(
    channel: Arc<dyn Channel>,
    sink: InboundSink,
    shutdown: CancellationToken,
    lease: Lease,
) -> Result<ChannelExit, ChannelError> {
    let channel_name = channel.name();
    let name = format!("transport:{channel_name}");
    let renew_every = lease.ttl / 3;
    let stop_by = lease.ttl.mul_f64(STOP_BY);
    loop {
        lease.standby.set(channel_name, true);
        let Some(mut granted) = acquire(&lease, &name, renew_every, &shutdown).await else {
            lease.standby.set(channel_name, false);
            return Ok(ChannelExit::Stopped);
        };
        lease.standby.set(channel_name, false);
        tracing::info!(
            channel = channel_name,
            "Holding the transport lease; starting the transport."
        );
        let held = shutdown.child_token();
        let run = channel.run(sink.clone(), held.clone());
        tokio::pin!(run);
        let mut next = granted + renew_every;
        loop {
            // Stop before the lease can run out and another replica start, however long
            // the renewal takes; the transport serves on meanwhile.
            let deadline = granted + stop_by;
            let renewal = async {
                tokio::time::sleep_until(next).await;
                let sent = Instant::now();
                let call = lease.store.acquire_lease(&name, &lease.holder, lease.ttl);
                (sent, tokio::time::timeout_at(deadline, call).await)
            };
            let (sent, renewed) = tokio::select! {
                exit = &mut run => {
                    release(&lease, &name, &shutdown).await;
                    return exit;
                }
                renewed = renewal => renewed,
            };
            match renewed {
                Ok(Ok(true)) => {
                    granted = sent;
                    next = sent + renew_every;
                }
                Ok(Ok(false)) => break,
                Ok(Err(error)) => {
                    tracing::warn!(channel = channel_name, %error, "Renewing the transport lease failed.");
                    // Tried again soon, while there is time.
                    next = Instant::now() + renew_every / 4;
                    if next >= deadline {
                        break;
                    }
                }
                Err(_) => {
                    tracing::warn!(
                        channel = channel_name,
                        "Renewing the transport lease took too long."
                    );
                    break;
                }
            }
        }
        tracing::warn!(
            channel = channel_name,
            "Lost the transport lease; stopping the transport."
        );
        held.cancel();
        run.await?;
        if shutdown.is_cancelled() {
            // Given up in case it is still this replica's, so a standby need not wait.
            release(&lease, &name, &shutdown).await;
            return Ok(ChannelExit::Stopped);
        }
    }
}

/// Waits until the lease is this replica's: when the call that took it was sent, or `None`
/// when `shutdown` came first. A call that answers only after `retry_every` (a third of
/// the lease it asks for) is abandoned: it may have taken the lease, but too little of it
/// is left to start the transport on, which would stop again at the first renewal. The next
/// call waits until such a lease ran out, or a replica whose store answers late would keep
/// the lease from the others without ever running the transport.
async fn acquire(
    lease: &Lease,
    name: &str,
    retry_every: Duration,
    shutdown: &CancellationToken,
) -> Option<Instant> {
    let mut waiting_logged = false;
    loop {
        let mut wait = retry_every;
        let sent = Instant::now();
        let call = lease.store.acquire_lease(name, &lease.holder, lease.ttl);
        match tokio::time::timeout_at(sent + retry_every, call).await {
            Ok(Ok(true)) => return Some(sent),
            Ok(Ok(false)) if !waiting_logged => {
                tracing::info!(
                    lease = name,
                    "Another replica runs this transport; standing by."
                );
                waiting_logged = true;
            }
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                tracing::warn!(lease = name, %error, "Taking the transport lease failed.")
            }
            Err(_) => {
                // It may still take the lease, for a whole lease: stand back until that ran
                // out, so that a replica whose store answers in time gets it meanwhile.
                tracing::warn!(
                    lease = name,
                    "Taking the transport lease took too long; standing back for a lease."
                );
                wait = lease.ttl + retry_every;
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Gives the lease up. At shutdown the call is bounded by [`SHUTDOWN_RELEASE`] (a store that
/// does not answer keeps the lease until it runs out): nothing of this process's follows,
/// so a release that commits later takes nothing from it. Otherwise it waits for the
/// store: a release abandoned while the transport is restarted could commit after the
/// restart took the lease again, and take it away from the running transport.
async fn release(lease: &Lease, name: &str, shutdown: &CancellationToken) {
    let call = lease.store.release_lease(name, &lease.holder);
    let released = if shutdown.is_cancelled() {
        let bound = SHUTDOWN_RELEASE.min(lease.ttl / 12);
        tokio::time::timeout(bound, call).await.unwrap_or(Ok(()))
    } else {
        call.await
    };
    if let Err(error) = released {
        tracing::warn!(lease = name, %error, "Releasing the transport lease failed.");
    }
}

#[cfg(test)]
mod tests;
