//! What a close code from the gateway means for the next connection, after QQ's table of
//! gateway error codes (tencent-connect/bot-docs `gateway/error/error.md`: which codes may
//! RESUME, which may IDENTIFY).
//!
//! - 4008 (payloads sent too fast; reconnect and keep to the rate) and 4009 (the session
//!   timed out, typically right after op 7): reconnect and **resume**, as the table allows;
//! - 4000–4007 (unknown error, bad op code or payload, not or already authenticated,
//!   session no longer valid, bad seq): the session is gone, **identify** anew; 4004
//!   (authentication failed) also means the token was refused, so it is fetched again.
//!   For 4001 (invalid opcode) and 4002 (invalid payload) the table allows neither RESUME
//!   nor IDENTIFY, and the page's own rule for every code but 4009, 4914 and 4915 is
//!   "identify anew", which is what is done (the next connection is backed off like any
//!   other). botpy resumes after these, as after every close but its own 9001/9005 (4006
//!   and 4007 too, which the table forbids), so it is no authority here;
//! - 4900–4913 (QQ's internal errors, "请重连"): the table allows no RESUME, so
//!   **identify** anew;
//! - 4010–4014 (bad shard, sharding required, bad version, bad or unauthorized intents)
//!   and 4914 / 4915 (the bot is taken down / banned): the adapter's constant shard and
//!   intents, or the bot itself, were refused, and retrying cannot help: **fatal** (the
//!   daemon's supervisor decides when to start the channel again);
//! - anything else (1000/1001/1006, …): **resume**, and QQ answers op 9 if the session
//!   cannot be resumed.

/// What a fatal close code said was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// 4010.
    #[error("the shard was refused")]
    Shard,
    /// 4011.
    #[error("the bot needs sharding, which this adapter does not do")]
    Sharding,
    /// 4012.
    #[error("the gateway version was refused")]
    Version,
    /// 4013.
    #[error("the intents were refused")]
    Intents,
    /// 4014.
    #[error("the bot may not use the group and C2C message intent (check its permissions)")]
    IntentsNotAllowed,
    /// 4914.
    #[error("the bot has been taken down (only the sandbox may connect)")]
    TakenDown,
    /// 4915.
    #[error("the bot is banned")]
    Banned,
}

/// What to do after a close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AfterClose {
    /// Reconnect and resume the session.
    Resume,
    /// Reconnect and identify anew; `refresh_token` when the token was refused.
    Identify {
        /// Whether the access token must be fetched again.
        refresh_token: bool,
    },
    /// Stop: what the close says will not change by retrying.
    Fatal(Refusal),
}

/// What close `code` means.
pub(super) fn after_close(code: u16) -> AfterClose {
    match code {
        4008 | 4009 => AfterClose::Resume,
        4004 => AfterClose::Identify {
            refresh_token: true,
        },
        4000..=4007 | 4900..=4913 => AfterClose::Identify {
            refresh_token: false,
        },
        4010 => AfterClose::Fatal(Refusal::Shard),
        4011 => AfterClose::Fatal(Refusal::Sharding),
        4012 => AfterClose::Fatal(Refusal::Version),
        4013 => AfterClose::Fatal(Refusal::Intents),
        4014 => AfterClose::Fatal(Refusal::IntentsNotAllowed),
        4914 => AfterClose::Fatal(Refusal::TakenDown),
        4915 => AfterClose::Fatal(Refusal::Banned),
        _ => AfterClose::Resume,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_are_sorted() {
        for code in [4008, 4009, 1000, 1006] {
            assert_eq!(after_close(code), AfterClose::Resume, "{code}");
        }
        assert_eq!(
            after_close(4004),
            AfterClose::Identify {
                refresh_token: true
            }
        );
        for code in [4000, 4001, 4002, 4006, 4007, 4900, 4905, 4913] {
            assert_eq!(
                after_close(code),
                AfterClose::Identify {
                    refresh_token: false
                },
                "{code}"
            );
        }
        for code in [4010, 4011, 4012, 4013, 4014, 4914, 4915] {
            assert!(matches!(after_close(code), AfterClose::Fatal(_)), "{code}");
        }
    }
}
