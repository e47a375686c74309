//! The telemetry contract every adapter keeps (STYLE habit 12; `docs/adapter-spec.md` is
//! its reference and a test below keeps the two in step).
//!
//! An adapter builds one [`Telemetry`] in its constructor and records through it: each
//! platform event it receives, each message it sends or edits, each failure by [`Stage`],
//! and whether it is connected. Because every adapter records through the same type, the
//! metric names, labels and meanings cannot drift apart between platforms, and a dashboard
//! built for one platform works for all of them.
//!
//! The metric handles are registered once, with the `metrics` recorder that is current when
//! [`Telemetry::new`] runs: the daemon installs its Prometheus recorder before it builds
//! the channels, and a test can build an adapter under a local recorder of its own (see
//! `im_bridge_fakes::telemetry`). Recording is then an atomic add: no label strings are
//! built per event. All three error stages and every reconnect cause are registered up
//! front, so a healthy channel exports zeros rather than nothing.
//!
//! A long connection reconnects through the [`Reconnect`] its telemetry makes
//! ([`Telemetry::reconnect`]), which counts each reconnect in [`names::RESTARTS`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use metrics::{Counter, Gauge};

use crate::backoff::Backoff;
use crate::reconnect::{Cause, Reconnect};

/// The contract's metric names. Every series carries the label `channel` (the adapter's
/// [`Channel::name`](crate::Channel::name)); [`ERRORS`](names::ERRORS) also carries `stage`.
pub mod names {
    /// Counter: platform events the adapter received (every update or callback, whether or
    /// not it became a message).
    pub const RECEIVED: &str = "im_bridge_channel_events_received_total";
    /// Counter: platform calls that sent, edited or uploaded a message successfully.
    pub const SENT: &str = "im_bridge_channel_messages_sent_total";
    /// Counter: failures, by `stage` (see [`Stage`](super::Stage)).
    pub const ERRORS: &str = "im_bridge_channel_errors_total";
    /// Gauge: 1 while the adapter is connected to its platform, 0 otherwise.
    pub const CONNECTED: &str = "im_bridge_channel_connected";
    /// Counter: the transport made again, by `reason`. An adapter's long connection
    /// counts each reconnect by its [`Cause`](crate::reconnect::Cause) (`connect_failed`,
    /// `lost`, `rotated`); the daemon's supervisor counts each restart of a whole
    /// transport in the same series (`error`, `panic`, `stopped`).
    pub const RESTARTS: &str = "im_bridge_transport_restarts_total";

    /// Every name of the contract.
    pub const ALL: [&str; 5] = [RECEIVED, SENT, ERRORS, CONNECTED, RESTARTS];
}

/// Where in an adapter a failure happened: the `stage` label of
/// [`names::ERRORS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Getting events from the platform failed: a poll or connection that failed or
    /// dropped, a registration the platform refused, a webhook request that failed
    /// authentication.
    Receiving,
    /// An event arrived but could not be read or turned into a message: a malformed
    /// payload, a missing field the adapter needs, an attachment it could not fetch.
    /// (Messages the intake refuses because it is full are counted by the daemon, not here.)
    Processing,
    /// A platform call that sends, edits or uploads a message failed (every failed
    /// attempt, including ones the delivery engine retries).
    Sending,
}

impl Stage {
    /// Every stage, in label order.
    pub const ALL: [Stage; 3] = [Stage::Receiving, Stage::Processing, Stage::Sending];

    /// The `stage` label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stage::Receiving => "receiving",
            Stage::Processing => "processing",
            Stage::Sending => "sending",
        }
    }

    const fn index(self) -> usize {
        match self {
            Stage::Receiving => 0,
            Stage::Processing => 1,
            Stage::Sending => 2,
        }
    }
}

/// One adapter's metric handles and its connection state. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    channel: &'static str,
    received: Counter,
    sent: Counter,
    errors: [Counter; 3],
    /// [`names::RESTARTS`] by [`Cause`], in [`Cause::ALL`] order.
    restarts: [Counter; 3],
    connected_gauge: Gauge,
    connected: AtomicBool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("channel", &self.inner.channel)
            .field("connected", &self.is_connected())
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Registers the contract's series for `channel` with the current recorder, starting
    /// disconnected.
    pub fn new(channel: &'static str) -> Self {
        let errors = Stage::ALL.map(|stage| {
            metrics::counter!(names::ERRORS, "channel" => channel, "stage" => stage.as_str())
        });
        let restarts = Cause::ALL.map(|cause| {
            metrics::counter!(names::RESTARTS, "channel" => channel, "reason" => cause.as_str())
        });
        let connected_gauge = metrics::gauge!(names::CONNECTED, "channel" => channel);
        connected_gauge.set(0.0);
        Self {
            inner: Arc::new(Inner {
                channel,
                received: metrics::counter!(names::RECEIVED, "channel" => channel),
                sent: metrics::counter!(names::SENT, "channel" => channel),
                errors,
                restarts,
                connected_gauge,
                connected: AtomicBool::new(false),
            }),
        }
    }

    /// The channel these series are labelled with.
    pub fn channel(&self) -> &'static str {
        self.inner.channel
    }

    /// Counts `n` platform events received.
    pub fn received(&self, n: u64) {
        self.inner.received.increment(n);
    }

    /// Counts one message sent, edited or uploaded.
    pub fn sent(&self) {
        self.inner.sent.increment(1);
    }

    /// Counts one failure at `stage`.
    pub fn error(&self, stage: Stage) {
        self.inner.errors[stage.index()].increment(1);
    }

    /// Counts a failed send when `result` is an error, a sent message otherwise, and hands
    /// `result` back: the one-liner for an adapter's outbound primitives.
    pub fn sending<T, E>(&self, result: Result<T, E>) -> Result<T, E> {
        match &result {
            Ok(_) => self.sent(),
            Err(_) => self.error(Stage::Sending),
        }
        result
    }

    /// Records whether the adapter is connected; returns whether it was before, so a
    /// caller can log the transitions only.
    pub fn set_connected(&self, connected: bool) -> bool {
        let was = self.inner.connected.swap(connected, Ordering::AcqRel);
        if was != connected {
            self.inner
                .connected_gauge
                .set(if connected { 1.0 } else { 0.0 });
        }
        was
    }

    /// The reconnect policy of a long connection of this channel: waits per `backoff`,
    /// counted in [`names::RESTARTS`] and logged as [`Reconnect`] says.
    pub fn reconnect(&self, backoff: Backoff) -> Reconnect {
        Reconnect::new(self.inner.channel, self.inner.restarts.clone(), backoff)
    }

    /// Whether the adapter last reported itself connected
    /// (what [`Channel::is_connected`](crate::Channel::is_connected) should return).
    pub fn is_connected(&self) -> bool {
        self.inner.connected.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_spec_documents_every_name_and_stage() {
        let spec = include_str!("../../../docs/adapter-spec.md");
        for name in names::ALL {
            assert!(
                spec.contains(&format!("`{name}`")),
                "{name} is not in docs/adapter-spec.md"
            );
        }
        for stage in Stage::ALL {
            assert!(
                spec.contains(&format!("`{}`", stage.as_str())),
                "stage {} is not in docs/adapter-spec.md",
                stage.as_str()
            );
        }
        for cause in Cause::ALL {
            assert!(
                spec.contains(&format!("`{}`", cause.as_str())),
                "reconnect cause {} is not in docs/adapter-spec.md",
                cause.as_str()
            );
        }
    }

    #[test]
    fn stage_labels_are_distinct_and_indexed_in_order() {
        for (i, stage) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(stage.index(), i);
        }
        let labels: std::collections::HashSet<_> = Stage::ALL.map(Stage::as_str).into();
        assert_eq!(labels.len(), 3);
    }

    #[test]
    fn connection_state_reports_transitions() {
        let telemetry = Telemetry::new("unit");
        assert!(!telemetry.is_connected());
        assert!(!telemetry.set_connected(true));
        assert!(telemetry.set_connected(true));
        assert!(telemetry.is_connected());
        assert!(telemetry.set_connected(false));
        assert!(!telemetry.is_connected());
    }
}
