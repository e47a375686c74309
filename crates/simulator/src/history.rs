//! A thread's message history: the dumps as `Value`s, for the handlers and the inspection
//! API, and each dump's JSON, serialized once when the message is appended.
//!
//! A `values` event carries the whole history and a run sends at least two, so without the
//! cache a conversation of n turns serializes its first messages about 2n times. History
//! only ever grows (messages are appended, never edited), which is what keeps the cache
//! exact: the type offers no way to change a message in place.

use std::ops::Deref;

use serde_json::Value;

/// The messages of one thread, oldest first; derefs to `[Value]` for reading.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    messages: Vec<Value>,
    /// `messages[i]` as compact JSON.
    json: Vec<String>,
    /// Total length of `json`, plus one separator each.
    json_len: usize,
}

impl History {
    /// Appends a message.
    pub(crate) fn push(&mut self, message: Value) {
        let json = serde_json::to_string(&message).unwrap_or_else(|_| "null".to_owned());
        self.json_len += json.len() + 1;
        self.json.push(json);
        self.messages.push(message);
    }

    /// Appends messages in order.
    pub(crate) fn extend(&mut self, messages: impl IntoIterator<Item = Value>) {
        for message in messages {
            self.push(message);
        }
    }

    /// Writes the history as a JSON array.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        out.reserve(self.json_len + 2);
        out.push(b'[');
        for (i, json) in self.json.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(json.as_bytes());
        }
        out.push(b']');
    }

    /// About how many bytes [`History::write_json`] writes.
    pub(crate) fn json_len(&self) -> usize {
        self.json_len + 2
    }
}

impl Deref for History {
    type Target = [Value];

    fn deref(&self) -> &[Value] {
        &self.messages
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_cached_json_is_the_messages_json() {
        let mut h = History::default();
        let mut out = Vec::new();
        h.write_json(&mut out);
        assert_eq!(out, b"[]");
        h.push(json!({"type": "human", "content": "héllo \"x\""}));
        h.extend([json!({"type": "ai", "content": "你好"}), json!(null)]);
        let mut out = Vec::new();
        h.write_json(&mut out);
        let written: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(written, Value::Array(h.to_vec()));
        assert!(out.len() <= h.json_len());
        assert_eq!(h.len(), 3);
    }
}
