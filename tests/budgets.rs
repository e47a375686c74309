//! Issue 33: rate budgets shared across replicas. Three real `im-bridge` processes share one
//! PostgreSQL store and serve the fake Telegram's webhook, each on an address of its own
//! (the test plays the load balancer and spreads the updates over them). The fake enforces
//! Telegram's per-chat limits and a bot-wide limit of 10 writes a second (Telegram's is
//! about 30; lowered so the test takes seconds), and the replicas are configured with the
//! matching budget (`channels.telegram.rate_budgets.bot`). A burst of messages from many
//! chats, several times what the bot may write in a second, must get every answer with no
//! 429 from the fake: each replica alone would keep within the limit, three together only
//! if they draw on one budget.

use std::time::Duration;

use im_bridge::simulator::{Simulator, SimulatorConfig};
use im_bridge_fakes::telegram::{FakeTelegram, FloodLimits, Incoming, Rate, TOKEN};
use tokio::process::Child;
use tokio::time::Instant;

use crate::crash::run_daemon;
use crate::support::PgSchema;

const REPLICAS: usize = 3;
/// Chats writing at once, one message each: 4.5 s of the bot's budget.
const CHATS: i64 = 45;
/// The fake's bot-wide limit: 10 writes at once, then 10 a second.
const BOT_LIMIT: u32 = 10;
const SECRET: &str = "budget-Secret_33";
const DEADLINE: Duration = Duration::from_secs(60);

/// A loopback address nothing listens on a moment ago (the daemon binds it).
fn free_addr() -> std::net::SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap()
}

/// Starts replica `n` serving the webhook at `listen`; its log goes to `<dir>/replica-<n>.log`.
fn spawn(
    dir: &std::path::Path,
    n: usize,
    listen: std::net::SocketAddr,
    fake: &FakeTelegram,
    sim: &im_bridge::simulator::RunningSimulator,
    store: &str,
) -> Child {
    let config = format!(
        "channels:
  langgraph_url: {langgraph}
  gateway_url: {gateway}
  telegram:
    enabled: true
    bot_token: \"{TOKEN}\"
    api_url: {api}
    mode: webhook
    webhook:
      listen: \"{listen}\"
      public_url: \"http://{listen}/telegram/hook\"
      secret_token: \"{SECRET}\"
    rate_budgets:
      bot: {{per_second: {BOT_LIMIT}, burst: 4}}
bridge:
  store: \"{store}\"
  admin_listen: 127.0.0.1:0
",
        langgraph = sim.langgraph_url(),
        gateway = sim.gateway_url(),
        api = fake.api_url(),
    );
    let path = dir.join(format!("replica-{n}.yaml"));
    std::fs::write(&path, config).unwrap();
    run_daemon(&path, &dir.join(format!("replica-{n}.log")), &[])
}

fn logs(dir: &std::path::Path) -> String {
    (0..REPLICAS)
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(format!("replica-{n}.log")));
            format!("--- replica {n}\n{}", text.unwrap_or_default())
        })
        .collect()
}

/// Posts `update` to the replica at `listen` as Telegram would, until it takes it (a
/// replica still starting answers 503, and Telegram retries).
async fn post(client: &reqwest::Client, listen: std::net::SocketAddr, update: &serde_json::Value) {
    let until = Instant::now() + DEADLINE;
    loop {
        let sent = client
            .post(format!("http://{listen}/telegram/hook"))
            .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
            .json(update)
            .send()
            .await;
        if sent.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        assert!(
            Instant::now() < until,
            "the replica at {listen} never took an update"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn issue_33_three_replicas_on_postgres_keep_within_one_bot_wide_budget() {
    let Some(pg) = PgSchema::create("im_bridge_budgets").await else {
        return;
    };
    let fake = FakeTelegram::start().await.unwrap();
    fake.enforce_flood_limits(FloodLimits {
        global: Rate::per_second(BOT_LIMIT, BOT_LIMIT),
        ..FloodLimits::telegram()
    });
    let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let addrs: Vec<_> = (0..REPLICAS).map(|_| free_addr()).collect();
    let replicas: Vec<Child> = addrs
        .iter()
        .enumerate()
        .map(|(n, addr)| spawn(dir.path(), n, *addr, &fake, &sim, &pg.url))
        .collect();

    // Every chat writes at once, the updates spread over the replicas.
    let client = reqwest::Client::new();
    let chats: Vec<i64> = (1..=CHATS).map(|i| 7_000 + i).collect();
    let posts = chats.iter().enumerate().map(|(i, chat)| {
        let update = fake
            .make_update(Incoming::private(*chat, &format!("question {chat}")))
            .update;
        let (client, listen) = (&client, addrs[i % REPLICAS]);
        async move { post(client, listen, &update).await }
    });
    futures_util::future::join_all(posts).await;

    // Every chat gets its answer.
    let until = Instant::now() + DEADLINE;
    loop {
        let unanswered: Vec<i64> = chats
            .iter()
            .copied()
            .filter(|chat| {
                let needle = format!("“question {chat}”");
                !fake
                    .bot_messages(*chat)
                    .iter()
                    .any(|m| m.text.contains(&needle))
            })
            .collect();
        if unanswered.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "unanswered chats: {unanswered:?}\n{}",
            logs(dir.path())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        fake.flood_refusals(),
        0,
        "the replicas together exceeded the bot's limit\n{}",
        logs(dir.path())
    );
    // The burst was more than the bot may write at once: the budget, not the load, paced it.
    let writes = fake
        .calls()
        .iter()
        .filter(|c| c.ok() && c.method.starts_with("send") && c.method != "sendChatAction")
        .count();
    assert!(writes >= chats.len(), "{writes} writes");
    drop(replicas);
    pg.drop().await;
}
