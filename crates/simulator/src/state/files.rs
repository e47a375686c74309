//! The thread files the simulator keeps per user (`spec/gateway.md` §7), bounded: uploads
//! and what the agent writes, read back by the artifacts route (`files.rs`).

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

/// Files kept over all users and threads; at the bound the oldest file is forgotten.
pub const MAX_FILES: usize = 1_024;

/// Bytes kept over all files; past it the oldest files are forgotten.
pub const MAX_FILE_BYTES: usize = 512 * 1024 * 1024;

/// Where a key's file lives: `(user, thread, virtual path)`.
type Key = (String, String, String);

/// The per-user file store, bounded by [`MAX_FILES`] and [`MAX_FILE_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct Files {
    files: HashMap<Key, Bytes>,
    /// Keys, oldest first.
    order: VecDeque<Key>,
    bytes: usize,
}

impl Files {
    /// Stores `bytes` at `path` (a virtual path, `/mnt/user-data/…`) of `user`'s `thread`.
    pub(crate) fn put(&mut self, user: &str, thread: &str, path: &str, bytes: Bytes) {
        let key = (user.to_owned(), thread.to_owned(), path.to_owned());
        if let Some(old) = self.files.remove(&key) {
            self.bytes -= old.len();
            self.order.retain(|k| k != &key);
        }
        self.bytes += bytes.len();
        self.files.insert(key.clone(), bytes);
        self.order.push_back(key);
        while self.order.len() > MAX_FILES || (self.bytes > MAX_FILE_BYTES && self.order.len() > 1)
        {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.files.remove(&old) {
                self.bytes -= gone.len();
            }
        }
    }

    /// The file at `path` of `user`'s `thread`.
    pub(crate) fn get(&self, user: &str, thread: &str, path: &str) -> Option<Bytes> {
        let key = (user.to_owned(), thread.to_owned(), path.to_owned());
        self.files.get(&key).cloned()
    }

    /// The uploads of `thread` (any user), by name and size, oldest first.
    pub(crate) fn uploads(&self, thread: &str) -> Vec<(String, u64)> {
        self.order
            .iter()
            .filter(|(_, t, _)| t == thread)
            .filter_map(|key| {
                let name = key.2.strip_prefix("/mnt/user-data/uploads/")?;
                let size = self.files.get(key)?.len() as u64;
                Some((name.to_owned(), size))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_kept_per_user_and_bounded() {
        let mut files = Files::default();
        files.put(
            "alice",
            "t",
            "/mnt/user-data/uploads/a",
            Bytes::from_static(b"1"),
        );
        assert!(files.get("bob", "t", "/mnt/user-data/uploads/a").is_none());
        assert!(
            files
                .get("alice", "t", "/mnt/user-data/uploads/a")
                .is_some()
        );
        files.put(
            "bob",
            "t",
            "/mnt/user-data/uploads/b",
            Bytes::from_static(b"22"),
        );
        assert_eq!(
            files.uploads("t"),
            [("a".to_owned(), 1), ("b".to_owned(), 2)]
        );
        for i in 0..MAX_FILES {
            files.put(
                "c",
                "u",
                &format!("/mnt/user-data/outputs/{i}"),
                Bytes::new(),
            );
        }
        assert!(files.uploads("t").is_empty(), "the oldest went first");
        assert_eq!(files.order.len(), MAX_FILES);
    }
}
