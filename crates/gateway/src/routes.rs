//! Optional routes (issue 26): Gateway routes some DeerFlow versions serve and others do
//! not (`POST …/goal/from-chat`, `GET /api/user-preferences`, `GET …/runs`), and what this
//! client knows about them.
//!
//! A Gateway without a route answers FastAPI's route-level `404 {"detail": "Not Found"}`
//! ([`GatewayError::RouteMissing`]), which is not a thread that does not exist. The client
//! learns each route's support three ways:
//! - [`GatewayClient::probe_optional_routes`], which the daemon calls at start and after a
//!   reconnect ([`GatewayClient::reconnected`]): one request per route that no Gateway acts
//!   on (a from-chat body of the wrong shape, refused by validation before any handler
//!   runs; a plain GET of the preferences, and of the runs of a thread no Gateway has);
//!   the probes and the client's questions live in
//!   `probe.rs`, this module only keeps what is known;
//! - every real call of a route: a route-level 404 marks it missing, any other answer
//!   present;
//! - a Gateway that could not be reached and then answers again may have been upgraded or
//!   replaced, so what was known is forgotten until the next probe.
//!
//! Callers ask [`GatewayClient::route_support`] to skip a call that cannot work (the locale
//! chain does not ask a Gateway without preferences) or to say so (`/goal from-chat`).
//!
//! [`GatewayClient::probe_optional_routes`]: crate::GatewayClient::probe_optional_routes
//! [`GatewayClient::reconnected`]: crate::GatewayClient::reconnected
//! [`GatewayClient::route_support`]: crate::GatewayClient::route_support

use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::GatewayError;

/// A route not every DeerFlow serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptionalRoute {
    /// `POST /api/threads/{id}/goal/from-chat`.
    GoalFromChat,
    /// `GET /api/user-preferences`.
    UserPreferences,
    /// `GET {langgraph_url}/threads/{id}/runs`: how a restarted bridge finds a run whose id
    /// it could not journal (issue 27), so while the Gateway serves it the id need not be
    /// saved the moment the run starts (issue 35).
    ListRuns,
}

impl OptionalRoute {
    /// Every optional route, in a stable order.
    pub const ALL: [Self; 3] = [Self::GoalFromChat, Self::UserPreferences, Self::ListRuns];

    /// The route as a reader knows it (`doctor`, logs).
    pub fn path(self) -> &'static str {
        match self {
            Self::GoalFromChat => "POST /api/threads/{id}/goal/from-chat",
            Self::UserPreferences => "GET /api/user-preferences",
            Self::ListRuns => "GET /api/threads/{id}/runs",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::GoalFromChat => 0,
            Self::UserPreferences => 1,
            Self::ListRuns => 2,
        }
    }
}

/// What the client knows about an optional route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Not probed yet, or forgotten after a reconnect: callers just try it.
    Unknown,
    /// The Gateway serves it.
    Present,
    /// The Gateway answered the route-level 404.
    Missing,
}

impl Support {
    fn from_u8(value: u8) -> Self {
        match value {
            1 => Self::Present,
            2 => Self::Missing,
            _ => Self::Unknown,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Self::Unknown => 0,
            Self::Present => 1,
            Self::Missing => 2,
        }
    }

    /// What a call's outcome says about its route: `None` when it says nothing (the
    /// Gateway could not be reached, or failed before routing).
    pub(crate) fn from_outcome<T>(outcome: &Result<T, GatewayError>) -> Option<Self> {
        match outcome {
            Ok(_) => Some(Self::Present),
            Err(GatewayError::RouteMissing) => Some(Self::Missing),
            Err(
                GatewayError::Transport { .. }
                | GatewayError::Timeout
                | GatewayError::Server { .. }
                | GatewayError::InvalidArgument { .. }
                | GatewayError::Unauthorized
                | GatewayError::Forbidden,
            ) => None,
            Err(_) => Some(Self::Present),
        }
    }
}

/// The known support of every optional route; lock-free, shared by the client's clones.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    support: [AtomicU8; OptionalRoute::ALL.len()],
}

impl Routes {
    pub(crate) fn get(&self, route: OptionalRoute) -> Support {
        Support::from_u8(self.support[route.index()].load(Ordering::Relaxed))
    }

    pub(crate) fn set(&self, route: OptionalRoute, support: Support) {
        let previous = self.support[route.index()].swap(support.as_u8(), Ordering::Relaxed);
        if support == Support::Missing && previous != support.as_u8() {
            tracing::info!(
                route = route.path(),
                "The Gateway does not serve this optional route."
            );
        }
    }

    /// Forgets everything (the Gateway came back and may be another version).
    pub(crate) fn forget(&self) {
        for slot in &self.support {
            slot.store(Support::Unknown.as_u8(), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_say_what_they_can_about_a_route() {
        let ok: Result<(), GatewayError> = Ok(());
        assert_eq!(Support::from_outcome(&ok), Some(Support::Present));
        let missing: Result<(), _> = Err(GatewayError::RouteMissing);
        assert_eq!(Support::from_outcome(&missing), Some(Support::Missing));
        // A route's own refusals prove it exists.
        for present in [
            GatewayError::NotFound,
            GatewayError::Invalid { status: 422 },
            GatewayError::NoContext,
            GatewayError::Busy,
        ] {
            assert_eq!(
                Support::from_outcome::<()>(&Err(present.clone())),
                Some(Support::Present),
                "{present:?}"
            );
        }
        // Nothing reached a route (or a middleware refused before routing).
        for silent in [
            GatewayError::Timeout,
            GatewayError::Server { status: 502 },
            GatewayError::Unauthorized,
        ] {
            assert_eq!(Support::from_outcome::<()>(&Err(silent)), None);
        }
    }

    #[test]
    fn routes_are_forgotten_together() {
        let routes = Routes::default();
        assert_eq!(routes.get(OptionalRoute::GoalFromChat), Support::Unknown);
        routes.set(OptionalRoute::GoalFromChat, Support::Missing);
        routes.set(OptionalRoute::UserPreferences, Support::Present);
        assert_eq!(routes.get(OptionalRoute::GoalFromChat), Support::Missing);
        assert_eq!(routes.get(OptionalRoute::UserPreferences), Support::Present);
        routes.forget();
        assert_eq!(routes.get(OptionalRoute::GoalFromChat), Support::Unknown);
        assert_eq!(routes.get(OptionalRoute::UserPreferences), Support::Unknown);
    }
}
