//! Typed identities that cross crate boundaries.
//!
//! Platforms disagree on what an id is (Telegram uses integers, QQ prefixes openids with
//! `group:`/`c2c:`), so every id is carried as the platform's own string form. The newtypes
//! exist so a chat id can never be passed where a message id is expected.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps a platform string.
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            /// The id as the platform spells it.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Consumes the id, returning its string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// A platform conversation id (QQ: `group:<openid>` / `c2c:<openid>`).
    ChatId
);
string_id!(
    /// A raw platform sender id. Never a DeerFlow identity by itself.
    UserId
);
string_id!(
    /// A platform message id: the source message a reply threads under, or a sent message.
    MessageId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialize_as_plain_strings() {
        let id = ChatId::new("group:abc");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"group:abc\"");
        let back: ChatId = serde_json::from_str("\"group:abc\"").unwrap();
        assert_eq!(back, id);
        assert_eq!(format!("{id:?}"), "ChatId(\"group:abc\")");
    }
}
