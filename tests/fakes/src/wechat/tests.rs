//! The fake iLink's rules, proven against a plain HTTP client.
