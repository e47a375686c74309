//! Integration tests, built as one binary (one link, one process):
//!
//! - `support`: the test channel and the daemon + simulator harness;
//! - `arrivals`: the real binary through the fake Telegram: a backlog of stale updates
//!   after downtime is not acted on, its chat told once; a crowd writing during one run
//!   gets one notice, then reactions (issue 33);
//! - `adapters`: the adapter conformance suite, one scenario body run on every platform
//!   through the harness each implements in its own module (issue 29), and the ignored
//!   per-platform cost measurement (`scripts/platform-costs`, issue 35);
//! - `manager`: the channel manager end to end, one theme a child module (issue 4);
//! - `goal`: the `/goal` family (issue 5);
//! - `lang`: localization and `/lang` (issue 6);
//! - `compact`: `/compact` in chat (issue 8);
//! - `files`: inbound attachments uploaded to the thread and referenced in the run;
//! - `cli`: the binary: check-config, run, demo (issue 2); completions, man page, `--version`
//!   and the example configuration under `deploy/` (issue 20);
//! - `doctor`: `im-bridge doctor` against the simulator and the platform fakes, each
//!   failure with its hint (issue 20);
//! - `gateway`: the Gateway client against the simulator, route by route (issue 3);
//! - `source_rules`: file docs, bounded channels, platform names only in the registry, no
//!   platform or platform key in the manager, no DeerFlow concept in `channels/`, no
//!   user-facing sentence outside the catalogs, all over production code (issues 6, 12);
//!   and every relative link in the Markdown files resolving (issue 28);
//! - `simulator`: the Gateway simulator over loopback, checked with plain HTTP (issue 3);
//! - `telegram`: the Telegram adapter against the fake Bot API, daemon and simulator;
//! - `feishu`: the Feishu adapter on the long connection to the fake Feishu (issue 15);
//! - `dingtalk`: the DingTalk adapter in stream mode against the fake DingTalk (issue 16);
//! - `discord`: the Discord adapter (serenity's gateway) against the fake Discord (issue 18);
//! - `qq`: the QQ adapter on the gateway and the webhook against the fake QQ (issue 17);
//! - `slack`: the Slack adapter in Socket Mode and on the Events API against the fake Slack
//!   (issue 30);
//! - `wecom`: the WeCom adapter on the long connection against the fake WeCom (issue 31);
//! - `wechat`: the WeChat adapter on iLink's long poll against the fake iLink: QR login, the
//!   stored token and cursor across restarts, the ten-sends cap, the encrypted CDN (issue 32);
//! - `chaos` (ignored; `scripts/chaos`): kills, outages and 429 storms under load, counting
//!   answers per message (issue 19);
//! - `interop` (ignored; `scripts/interop`): the real binary through the platform fakes
//!   against the real DeerFlow Gateway, with auth on and in single-user mode (issue 26);
//! - `clock`: two replicas of the real binary on PostgreSQL, one with its clock 30 s ahead
//!   (libfaketime): one poller, no in-flight work taken from a live replica (issue 27);
//! - `crash`: the real binary killed with SIGKILL at each risky point; the next start (or
//!   another replica on Postgres) answers every message exactly once (issue 19);
//! - `budgets`: three replicas of the real binary on PostgreSQL under a burst through the
//!   fake Telegram with its bot-wide limit on: every answer, no 429 (issue 33);
//! - `security`: the log capture the conformance suite scans for secrets and message text,
//!   file fetches only from the platforms' file hosts, webhooks under a flood;
//! - `supervisor`: a failing or panicking transport is restarted while the other channels
//!   serve, and `/readyz` and `/metrics` show it (issue 12).

// Harness helpers outside `#[test]` functions fail the test by panicking, like the tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapters;
mod arrivals;
mod budgets;
mod chaos;
mod cli;
mod clock;
mod compact;
mod crash;
mod dingtalk;
mod discord;
mod doctor;
mod feishu;
mod files;
mod gateway;
mod goal;
mod interop;
mod lang;
mod manager;
mod qq;
mod security;
mod simulator;
mod slack;
mod source_rules;
mod supervisor;
mod support;
mod telegram;
mod wechat;
mod wecom;
