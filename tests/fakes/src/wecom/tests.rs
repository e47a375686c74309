//! The fake WeCom's tests.
