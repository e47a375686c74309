//! Fake platform servers for end-to-end tests, one module per platform, named like the
//! adapter it serves (STYLE habit 5):
//!
//! - [`dingtalk`] — DingTalk: `connections/open` and stream mode (CALLBACK pushes,
//!   SYSTEM ping and disconnect, acks, redelivery), the token, robot messages, file
//!   download and upload, AI cards, scripted failures.
//! - [`discord`] — Discord: REST v10 with bot auth (messages with the 2000-character
//!   limit and `allowed_mentions`, edits, threads, typing, reactions, uploads, scripted
//!   429s and errors) and the gateway (READY, heartbeats, resume with replay, op 7 / op 9 /
//!   close codes).
//! - [`feishu`] — Feishu / Lark: endpoint discovery, the pbbp2 long connection (pings,
//!   pushes, split payloads, acks, re-pushes), the REST API with its token and card
//!   rules, webhook requests (encrypted, signed).
//! - [`qq`] — the QQ bot API v2: tokens, the op-code gateway (sessions, resume with
//!   replay, scripted op 7 / op 9 / close codes), the passive-reply rules against a
//!   controllable clock, ed25519-signed webhook requests.
//! - [`slack`] — Slack: the Web API with its tokens and `{"ok": …}` answers (messages with
//!   the 40,000-character limit, threads, edits at one a second, reactions, uploads through
//!   the upload URL, streams, scripted 429s and errors), the private file host, Socket Mode
//!   (hello, envelopes, acks, redelivery, disconnects, hand-overs) and signed HTTP requests.
//! - [`telegram`] — the Telegram Bot API: long polling, webhook delivery, messages, edits,
//!   uploads, the HTML parse mode, scripted failures.
//! - [`wechat`] — personal WeChat over Tencent's iLink bot API: QR login (wait, scaned,
//!   confirmed, expired), the token headers and session expiry (`-14`), `getupdates` long
//!   polling with its opaque cursor (replay from an old one), `sendmessage` with the
//!   `context_token` rules and the 16 KiB text limit, typing tickets, the AES-128-ECB CDN
//!   (uploads checked against `getuploadurl`, encrypted downloads), scripted failures.
//! - [`wecom`] — WeCom (企业微信) intelligent bots over the long connection: subscribe,
//!   `ping` heartbeats, one live connection per bot (`disconnected_event`), message and
//!   event callbacks, streams and replies with WeCom's windows, byte limits and rates,
//!   welcomes, proactive sends, chunked media uploads, the AES-256-CBC file host, scripted
//!   failures, redelivery.
//!
//! And the checks every adapter's tests share:
//!
//! - [`telemetry`] — a metrics recorder that asserts the adapter telemetry contract
//!   (`docs/adapter-spec.md`).
//! - [`postgres`] — the PostgreSQL server tests use: `IM_BRIDGE_TEST_POSTGRES`, or a
//!   throwaway cluster from the machine's binaries.
//! - [`prereq`] — a missing prerequisite skips its tests with one line, or fails them
//!   under `IM_BRIDGE_TEST_STRICT` (CI).
//! - [`running`] — a channel's transport on its own task with its inbound queue, for
//!   adapter tests without the daemon; any transport's `run` on a task with its shutdown
//!   token.
//! - [`wait`] — the error of a wait that reached its deadline.
//!
//! Every fake is built on [`skeleton`]: one handle type ([`skeleton::Fake`]) over the
//! platform's state, one HTTP server on `127.0.0.1:0`, one way to record, script failures,
//! accept WebSocket connections and wait with deadlines.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod dingtalk;
pub mod discord;
pub mod feishu;
pub mod image;
pub mod postgres;
pub mod prereq;
pub mod qq;
pub mod running;
pub mod skeleton;
pub mod slack;
pub mod telegram;
pub mod telemetry;
pub mod wait;
pub mod wechat;
pub mod wecom;

use im_bridge_channel::{
    Adapter, AllowedUsers, BuildContext, ChannelResult, CommandVocabulary, Issues,
};
use serde_json::Value;

/// The daemon's command names, as adapter tests that run without the daemon see them.
pub const COMMANDS: &[&str] = &[
    "bootstrap",
    "cancel",
    "compact",
    "context",
    "goal",
    "help",
    "lang",
    "memory",
    "models",
    "new",
    "status",
    "stop",
];

/// What the daemon hands an adapter it builds, for adapter tests without the daemon:
/// `allowed_users`, the [`COMMANDS`] vocabulary, no menu, a fresh webhook host.
pub fn build_context(allowed_users: AllowedUsers) -> BuildContext {
    let mut ctx = BuildContext::default();
    ctx.allowed_users = allowed_users;
    ctx.commands = CommandVocabulary::new(COMMANDS);
    ctx
}

/// An adapter's channel as the daemon builds it, for adapter tests: `block` validated as
/// `channels.<name>` by the adapter's registry entry, then built by `new` with a
/// [`build_context`] that lets anyone talk to it. Panics on a block with an error (the
/// test's own mistake) and on a build that fails.
pub fn built<S, C>(
    adapter: &Adapter<S>,
    block: Value,
    new: impl FnOnce(S, &BuildContext) -> ChannelResult<C>,
) -> C {
    let mut issues = Issues::new(format!("channels.{}", adapter.name));
    let settings = (adapter.validate)(block, &mut issues);
    let Some(settings) = settings.filter(|_| issues.error_count() == 0) else {
        panic!(
            "the test's block does not validate: {:?}",
            issues.iter().collect::<Vec<_>>()
        );
    };
    match new(settings, &build_context(AllowedUsers::Anyone)) {
        Ok(channel) => channel,
        Err(error) => panic!("the channel could not be built: {error}"),
    }
}
