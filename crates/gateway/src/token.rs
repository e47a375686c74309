//! [`InternalToken`]: the `X-DeerFlow-Internal-Token` value, which never reaches a log line,
//! an error or a printed configuration.
//!
//! The client's own type, so the crate needs no chat-side crate for a credential: the
//! daemon reads the token from its configuration (a `Secret` there) and converts it where
//! it builds a [`GatewayConfig`](crate::GatewayConfig).

use std::fmt;

/// The internal auth token the Gateway expects (`DEER_FLOW_INTERNAL_AUTH_TOKEN`).
///
/// `Debug` and `Display` print `<redacted>`; the value is reachable only through
/// [`InternalToken::expose`], which the client calls where it sets the header.
#[derive(Clone, PartialEq, Eq)]
pub struct InternalToken(String);

impl InternalToken {
    /// Wraps a token.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The token itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the token is empty (then no header is sent).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for InternalToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for InternalToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_never_prints() {
        let token = InternalToken::new("s3cret-token");
        assert_eq!(format!("{token:?}"), "<redacted>");
        assert_eq!(format!("{token}"), "<redacted>");
        let config = crate::GatewayConfig {
            internal_token: Some(token.clone()),
            ..crate::GatewayConfig::default()
        };
        assert!(!format!("{config:?}").contains("s3cret"));
        assert_eq!(token.expose(), "s3cret-token");
    }
}
