//! The daemon's metric names, one place for all of them: the admin endpoints render them
//! (`/metrics`), and the intake, the delivery lanes, the manager and the supervisor count
//! under them. A module of its own so each of those can name a metric without depending on
//! the admin endpoints (issue 34: no module loop in the daemon).

/// Metric names, one place for all of them.
pub mod names {
    /// Counter: inbound messages admitted, by `channel`.
    pub const INBOUND: &str = "im_bridge_inbound_messages_total";
    /// Counter: inbound messages refused at admission, by `channel` and `reason`.
    pub const INBOUND_REFUSED: &str = im_bridge_channel::REFUSED_METRIC;
    /// Gauge: messages holding room in the inbound queue: not handled yet, waiting to be
    /// received, for a worker or for their turn. Set as messages come and on the journal's
    /// upkeep clock.
    pub const QUEUE_DEPTH: &str = "im_bridge_inbound_queue_depth";
    /// Counter: agent runs, by `outcome`.
    pub const RUNS: &str = "im_bridge_runs_total";
    /// Counter: outbound deliveries, by `channel` and `result`.
    pub const OUTBOUND: &str = "im_bridge_outbound_sends_total";
    /// Counter: journaled messages finished after a restart or by another replica, by
    /// `state` they were found in (`admitted`, `running`, `final_pending`).
    pub const JOURNAL_RECOVERED: &str = "im_bridge_journal_recovered_total";
    /// Counter: journaled messages given up on (undelivered for `bridge.final_retry_hours`);
    /// each is kept for an operator (issue 33, `im-bridge deliveries`).
    pub const JOURNAL_GIVEN_UP: &str = "im_bridge_journal_given_up_total";
    /// Counter: messages not acted on because they were older than their channel's
    /// `max_event_age_seconds` when they arrived, by `channel`.
    pub const STALE: &str = "im_bridge_stale_messages_total";
    /// Counter: answers that outlived their source's reply window (issue 33), by `channel`
    /// and `step`: `handed_off` (what was written went out in time), `held` (the rest
    /// waits for the chat's next message), `carried` (a later message took it up).
    pub const HANDOFFS: &str = "im_bridge_reply_handoffs_total";
    /// Gauge: journal entries that gave up and wait for an operator to retry or drop them,
    /// as the store holds them (every replica of a shared store reports the same number;
    /// refreshed each journal renewal, every 5 s).
    pub const JOURNAL_GAVE_UP: &str = "im_bridge_journal_gave_up_entries";
    /// Counter: deliveries an operator retried through this daemon's admin endpoint.
    pub const JOURNAL_RETRIED: &str = "im_bridge_journal_retried_total";
    /// Counter: deliveries an operator dropped through this daemon's admin endpoint.
    pub const JOURNAL_DROPPED: &str = "im_bridge_journal_dropped_total";
    /// Gauge: replies waiting in the per-chat delivery lanes (or being delivered).
    pub const OUTBOUND_PENDING: &str = "im_bridge_outbound_pending";
    /// Counter: transport attempts that ended unexpectedly and were scheduled for a restart,
    /// by `channel` and `reason` (`error`, `panic`, `stopped`); in the same series, the
    /// adapters count each reconnect of a long connection (`connect_failed`, `lost`,
    /// `rotated`: [`im_bridge_channel::Reconnect`]).
    pub const TRANSPORT_RESTARTS: &str = im_bridge_channel::telemetry::names::RESTARTS;
    /// Gauge: 1 while a channel's transport attempt runs, 0 while it waits to restart.
    pub const TRANSPORT_UP: &str = "im_bridge_transport_up";
}
