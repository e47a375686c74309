//! [`ThreadId`]: a DeerFlow Gateway thread id, the daemon's side of a binding.
//!
//! Chat platforms never see it, so it lives here and not in the adapters' core crate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A DeerFlow Gateway thread id.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct ThreadId(String);

impl ThreadId {
    /// Wraps a Gateway thread id.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as the Gateway spells it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Consumes the id, returning its string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ThreadId({:?})", self.0)
    }
}

impl From<String> for ThreadId {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for ThreadId {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl AsRef<str> for ThreadId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}
