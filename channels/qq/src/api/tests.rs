//! The client against the fake QQ.
