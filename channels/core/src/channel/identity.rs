//! [`ChannelIdentity`]: what the daemon reads of a channel before it sends anything.
//!
//! Every adapter answered the same four questions the same way: its name (a constant),
//! what it can show (fixed when it is built), whether it is connected (what its
//! [`Telemetry`] last recorded) and whether only one process may run its transport (fixed
//! by the transport its settings chose). It builds one identity in its constructor and
//! hands it out through [`Channel::identity`](super::Channel::identity); the trait's
//! provided `name`, `capabilities`, `is_connected` and `exclusive_transport` read it, so an
//! `impl Channel` starts with its transport and its primitives.

use crate::capabilities::Capabilities;
use crate::telemetry::Telemetry;

/// A channel's name, capabilities, connection state and transport exclusivity. Cheap to
/// clone (the telemetry handle is one `Arc`).
#[derive(Clone, Debug)]
pub struct ChannelIdentity {
    name: &'static str,
    capabilities: Capabilities,
    /// Where the connection state is kept: the adapter's telemetry, which its transport
    /// updates. `None` for a channel with no connection to lose: always connected.
    connection: Option<Telemetry>,
    exclusive_transport: bool,
}

impl ChannelIdentity {
    /// An adapter's identity: named like its `telemetry` (whose series carry the channel
    /// label), connected while the telemetry says so (the gauge and `/readyz` then agree),
    /// and run by every replica unless [`exclusive`](Self::exclusive) says otherwise.
    pub fn new(telemetry: &Telemetry, capabilities: Capabilities) -> Self {
        Self {
            name: telemetry.channel(),
            capabilities,
            connection: Some(telemetry.clone()),
            exclusive_transport: false,
        }
    }

    /// A channel with no connection to lose (a test double, an embedded channel): always
    /// connected, records no telemetry, run by every replica.
    pub fn always_connected(name: &'static str, capabilities: Capabilities) -> Self {
        Self {
            name,
            capabilities,
            connection: None,
            exclusive_transport: false,
        }
    }

    /// The same identity, its transport run by one process at a time when `exclusive`:
    /// the platform serves one connection or poller per bot (Telegram's long polling
    /// answers a second poller with a conflict; WeCom's newer connection replaces the
    /// older). The daemon then runs it only while it holds the channel's lease in the
    /// shared store; other replicas stand by.
    pub fn exclusive(self, exclusive: bool) -> Self {
        Self {
            exclusive_transport: exclusive,
            ..self
        }
    }

    /// The provider key (`telegram`, `console`, …).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// What the channel can show.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// Whether the transport last reported itself connected (always, without telemetry).
    pub fn is_connected(&self) -> bool {
        self.connection.as_ref().is_none_or(Telemetry::is_connected)
    }

    /// Whether only one process at a time may run the transport.
    pub fn exclusive_transport(&self) -> bool {
        self.exclusive_transport
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adapter_is_connected_while_its_telemetry_says_so() {
        let telemetry = Telemetry::new("probe");
        let identity = ChannelIdentity::new(&telemetry, Capabilities::final_only(10));
        assert_eq!(identity.name(), "probe");
        assert_eq!(identity.capabilities(), Capabilities::final_only(10));
        assert!(!identity.is_connected() && !identity.exclusive_transport());
        telemetry.set_connected(true);
        assert!(identity.is_connected());
        telemetry.set_connected(false);
        assert!(!identity.is_connected());
        assert!(identity.exclusive(true).exclusive_transport());
    }

    #[test]
    fn a_channel_without_telemetry_is_always_connected() {
        let identity = ChannelIdentity::always_connected("double", Capabilities::final_only(1));
        assert_eq!(identity.name(), "double");
        assert!(identity.is_connected() && !identity.exclusive_transport());
    }
}
