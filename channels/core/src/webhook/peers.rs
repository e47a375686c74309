//! Per-peer budgets (issue 27): how much of a shared resource one remote address may hold
//! at once, so that a flood from one address (idle connections, bodies trickled a byte a
//! second) cannot take what every other sender needs.
//!
//! A [`PeerBudget`] counts, per IP address, the [`PeerSlot`]s taken and not yet dropped;
//! [`PeerBudget::try_take`] refuses once an address holds its bound. An address holding
//! nothing has no entry, so the map is bounded by the slots held (themselves bounded by the
//! listener's connection cap).
//!
//! A reverse proxy in front of the bridge makes every request come from the proxy's
//! address: the per-peer bound then bounds the proxy as a whole. Proxies that buffer request
//! bodies (nginx does by default) absorb slow senders themselves.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::lock;

/// What each peer holds of one resource, against one bound per peer.
#[derive(Debug)]
pub(crate) struct PeerBudget {
    per_peer: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

impl PeerBudget {
    /// A budget of `per_peer` slots for each address.
    pub(crate) fn new(per_peer: usize) -> Arc<Self> {
        Arc::new(Self {
            per_peer,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for `peer`, or `None` when it holds `per_peer` already.
    pub(crate) fn try_take(self: &Arc<Self>, peer: IpAddr) -> Option<PeerSlot> {
        let mut held = lock(&self.held);
        let count = held.entry(peer).or_insert(0);
        if *count >= self.per_peer {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            budget: self.clone(),
            peer,
        })
    }

    /// Slots `peer` holds now.
    #[cfg(test)]
    pub(crate) fn held(&self, peer: IpAddr) -> usize {
        lock(&self.held).get(&peer).copied().unwrap_or(0)
    }
}

/// One slot of a [`PeerBudget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    budget: Arc<PeerBudget>,
    peer: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = lock(&self.budget.held);
        if let Some(count) = held.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_peer_has_its_own_bound_and_dropped_slots_come_back() {
        let budget = PeerBudget::new(2);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let first = budget.try_take(a).unwrap();
        let _second = budget.try_take(a).unwrap();
        assert!(budget.try_take(a).is_none(), "a holds its bound");
        assert!(budget.try_take(b).is_some(), "b is not held back by a");
        drop(first);
        assert_eq!(budget.held(a), 1);
        assert!(budget.try_take(a).is_some());
    }

    #[test]
    fn an_address_holding_nothing_has_no_entry() {
        let budget = PeerBudget::new(1);
        let a: IpAddr = "::1".parse().unwrap();
        drop(budget.try_take(a).unwrap());
        assert!(lock(&budget.held).is_empty());
    }
}
