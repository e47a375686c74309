//! The shared telemetry compliance check (STYLE habit 12, `docs/adapter-spec.md`).
//!
//! [`TelemetryProbe`] is a `metrics` recorder of its own. An adapter built inside
//! [`TelemetryProbe::build`] registers its [`Telemetry`](im_bridge_channel::Telemetry)
//! handles with the probe instead of the process-wide recorder, so each test reads exactly
//! its own adapter's values however many tests run at once. Values are read without being
//! reset.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use im_bridge_channel::Cause;
use im_bridge_channel::telemetry::{Stage, names};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_util::registry::{AtomicStorage, Registry};

/// A recorder that keeps every series an adapter registers, for assertions.
#[derive(Clone)]
pub struct TelemetryProbe {
    registry: Arc<Registry<Key, AtomicStorage>>,
}

impl Default for TelemetryProbe {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for TelemetryProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryProbe").finish_non_exhaustive()
    }
}

impl TelemetryProbe {
    /// An empty probe.
    pub fn new() -> Self {
        Self {
            registry: Arc::new(Registry::atomic()),
        }
    }

    /// Runs `build` (an adapter's constructor) with this probe as the current recorder:
    /// the adapter's telemetry handles report here from any thread afterwards.
    pub fn build<T>(&self, build: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(self, build)
    }

    /// Panics unless every series of the contract is registered for `channel`: the
    /// received, sent and connected series, the error counter of every stage and the
    /// restart counter of every reconnect cause.
    pub fn assert_contract(&self, channel: &str) {
        let counters = self.registry.get_counter_handles();
        let gauges = self.registry.get_gauge_handles();
        let has = |name: &str, labels: &[(&str, &str)], gauge: bool| {
            if gauge {
                gauges.keys().any(|k| matches(k, name, labels))
            } else {
                counters.keys().any(|k| matches(k, name, labels))
            }
        };
        let channel_only = [("channel", channel)];
        assert!(
            has(names::RECEIVED, &channel_only, false),
            "{channel}: {} is not registered",
            names::RECEIVED
        );
        assert!(
            has(names::SENT, &channel_only, false),
            "{channel}: {} is not registered",
            names::SENT
        );
        assert!(
            has(names::CONNECTED, &channel_only, true),
            "{channel}: {} is not registered",
            names::CONNECTED
        );
        for stage in Stage::ALL {
            assert!(
                has(
                    names::ERRORS,
                    &[("channel", channel), ("stage", stage.as_str())],
                    false
                ),
                "{channel}: {}{{stage=\"{}\"}} is not registered",
                names::ERRORS,
                stage.as_str()
            );
        }
        for cause in Cause::ALL {
            assert!(
                has(
                    names::RESTARTS,
                    &[("channel", channel), ("reason", cause.as_str())],
                    false
                ),
                "{channel}: {}{{reason=\"{}\"}} is not registered",
                names::RESTARTS,
                cause.as_str()
            );
        }
    }

    /// `im_bridge_channel_events_received_total{channel}`.
    pub fn received(&self, channel: &str) -> u64 {
        self.counter(names::RECEIVED, &[("channel", channel)])
    }

    /// `im_bridge_channel_messages_sent_total{channel}`.
    pub fn sent(&self, channel: &str) -> u64 {
        self.counter(names::SENT, &[("channel", channel)])
    }

    /// `im_bridge_channel_errors_total{channel, stage}`.
    pub fn errors(&self, channel: &str, stage: Stage) -> u64 {
        self.counter(
            names::ERRORS,
            &[("channel", channel), ("stage", stage.as_str())],
        )
    }

    /// `im_bridge_channel_connected{channel}`: `Some(true)` at 1, `None` when unregistered.
    pub fn connected(&self, channel: &str) -> Option<bool> {
        self.registry
            .get_gauge_handles()
            .into_iter()
            .find(|(k, _)| matches(k, names::CONNECTED, &[("channel", channel)]))
            .map(|(_, g)| f64::from_bits(g.load(Ordering::Acquire)) == 1.0)
    }

    /// `im_bridge_transport_restarts_total{channel, reason}`: the long connection's
    /// reconnects after `cause`.
    pub fn restarts(&self, channel: &str, cause: Cause) -> u64 {
        self.counter(
            names::RESTARTS,
            &[("channel", channel), ("reason", cause.as_str())],
        )
    }

    /// The value of a counter series; 0 when it was never registered.
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.registry
            .get_counter_handles()
            .into_iter()
            .find(|(k, _)| matches(k, name, labels))
            .map_or(0, |(_, c)| c.load(Ordering::Acquire))
    }
}

/// Whether `key` is `name` with exactly `labels`, in any order.
fn matches(key: &Key, name: &str, labels: &[(&str, &str)]) -> bool {
    key.name() == name
        && key.labels().count() == labels.len()
        && labels
            .iter()
            .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
}

impl Recorder for TelemetryProbe {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.registry
            .get_or_create_counter(key, |c| Counter::from_arc(c.clone()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.registry
            .get_or_create_gauge(key, |g| Gauge::from_arc(g.clone()))
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        // The contract has no histograms.
        Histogram::noop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::Telemetry;

    #[test]
    fn a_telemetry_built_under_the_probe_meets_the_contract_and_reports_there() {
        let probe = TelemetryProbe::new();
        let telemetry = probe.build(|| Telemetry::new("probe-test"));
        probe.assert_contract("probe-test");
        assert_eq!(probe.connected("probe-test"), Some(false));
        // Recording happens on another thread, outside `build`.
        std::thread::spawn(move || {
            telemetry.received(2);
            telemetry.sent();
            telemetry.error(Stage::Sending);
            telemetry.set_connected(true);
            telemetry
                .reconnect(im_bridge_channel::reconnect::BACKOFF)
                .next(Cause::Lost, "closed");
        })
        .join()
        .unwrap();
        assert_eq!(probe.received("probe-test"), 2);
        assert_eq!(probe.sent("probe-test"), 1);
        assert_eq!(probe.errors("probe-test", Stage::Sending), 1);
        assert_eq!(probe.errors("probe-test", Stage::Receiving), 0);
        assert_eq!(probe.connected("probe-test"), Some(true));
        assert_eq!(probe.restarts("probe-test", Cause::Lost), 1);
        assert_eq!(probe.restarts("probe-test", Cause::Rotated), 0);
        // Reading does not reset.
        assert_eq!(probe.received("probe-test"), 2);
    }

    #[test]
    #[should_panic(expected = "is not registered")]
    fn a_channel_without_telemetry_fails_the_contract() {
        TelemetryProbe::new().assert_contract("silent");
    }
}
