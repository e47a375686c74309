//! The `im-bridge` binary (issue 2): `check-config` on good and bad files, `run` with the
//! console channel against the simulator, and the scriptable `demo`; for packaging (issue
//! 20) the completions, the man page, `--version` naming the commit, and the example
//! configuration under `deploy/`; for the operator (issue 33) `deliveries` and `drain`; for
//! idle memory (issue 35) the release of start-up's code pages.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::PgSchema;
use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};

/// The operator's tools: `deliveries` and `drain` (issue 33).
mod deliveries;
/// `run` gives back start-up's code pages (issue 35).
mod memory;
/// Completions, the man page, `--version` and the example configuration (issue 20).
mod packaging;

/// The binary, with none of the environment a config could read.
pub(crate) fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_im-bridge"));
    cmd.env_remove("DEER_FLOW_INTERNAL_AUTH_TOKEN")
        .env_remove("DEER_FLOW_CHANNELS_LANGGRAPH_URL")
        .env_remove("DEER_FLOW_CHANNELS_GATEWAY_URL")
        .env_remove("DEER_FLOW_CONFIG_PATH")
        .env("RUST_LOG", "warn");
    cmd
}

fn write_config(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// (config text, a substring the error must contain: the key path and what was expected)
const BAD_CONFIGS: &[(&str, &str)] = &[
    (
        "channels:\n  console: {enabled: true}\n  inbound_queue_maxsize: -3\n",
        "channels.inbound_queue_maxsize: expected a positive integer",
    ),
    (
        "channels:\n  console: {enabled: true}\n  max_concurrency: 0\n",
        "channels.max_concurrency: expected a positive integer",
    ),
    (
        "channels:\n  console: {enabled: true}\n  max_concurrency: lots\n",
        "channels.max_concurrency: invalid type: string \"lots\"",
    ),
    (
        "channels:\n  console: {enabled: true}\n  shutdown_grace_period_seconds: -1\n",
        "channels.shutdown_grace_period_seconds: expected a number of seconds",
    ),
    (
        "channels:\n  console: {enabled: true}\n  gateway_url: ftp://files\n",
        "channels.gateway_url: expected an http:// or https:// URL",
    ),
    (
        "channels:\n  console: {enabled: true}\n  langgraph_url: not a url\n",
        "channels.langgraph_url: expected an http:// or https:// URL",
    ),
    (
        "channels:\n  console: {enabled: true}\nbridge:\n  admin_listen: everywhere\n",
        "bridge.admin_listen: expected an address",
    ),
    (
        "channels:\n  console: {enabled: true}\nbridge:\n  store: mysql://db\n",
        "bridge.store: expected sqlite://PATH or postgres://",
    ),
    (
        "channels:\n  console: {enabled: true}\nbridge:\n  goal_from_chat_timeout_seconds: 0\n",
        "bridge.goal_from_chat_timeout_seconds: expected a number of seconds above 0",
    ),
    (
        "channels:\n  console: {enabled: true}\nbridge:\n  surprise: 1\n",
        "bridge.surprise: unknown field `surprise`",
    ),
    (
        "channels:\n  console: {enabled: true}\nchannel_connections:\n  notification_locale: fr-FR\n",
        "channel_connections.notification_locale: there is no catalog for \"fr-FR\"",
    ),
    (
        "channels:\n  console: {enabled: true, locale: \"12\"}\n",
        "channels.console.locale: expected a language tag",
    ),
    (
        "channels:\n  console: {enabled: true}\n  telegram: {enabled: true, bot_token: $IM_BRIDGE_TEST_UNSET_TOKEN}\n",
        "channels.telegram.bot_token: environment variable $IM_BRIDGE_TEST_UNSET_TOKEN is not set",
    ),
    (
        "channels:\n  console: {enabled: true}\nbridge:\n  store_lease_seconds: 2\n",
        "bridge.store_lease_seconds: expected a number of seconds from 5 to 300, got 2",
    ),
    (
        "channels:\n  console: {enabled: false}\n",
        "channels: no channel is enabled",
    ),
    (
        "channels:\n  console: {enabled: true}\nchannel_connections:\n  enabled: true\n",
        "channel_connections.enabled: user-owned connections with require_bound_identity are not supported",
    ),
    (
        "channels:\n  console: {enabled: yes please}\n",
        "channels.console.enabled: invalid type",
    ),
    ("channels: [1, 2]\n", "channels: invalid type: sequence"),
    ("channels:\n  console: {enabled: true\n", "not valid YAML"),
];

#[test]
fn check_config_rejects_bad_files_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (text, expected)) in BAD_CONFIGS.iter().enumerate() {
        let path = write_config(&dir, &format!("bad{i}.yaml"), text);
        let out = bin()
            .args(["check-config", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "case {i} ({text:?}) should be refused: {stderr}"
        );
        assert!(
            stderr.contains(expected),
            "case {i}: expected {expected:?} in:\n{stderr}"
        );
    }
}

#[test]
fn check_config_prints_the_effective_settings_without_secrets_and_opens_no_socket() {
    // A "Gateway" that counts connections, and an admin address already taken: a
    // check-config that connected or bound anything would be caught.
    let gateway = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    gateway.set_nonblocking(true).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "models: [{{name: x}}]\nchannels:\n  gateway_url: http://ops:GWPASSWORD@{}\n  console: {{enabled: true}}\n  telegram: {{enabled: false, bot_token: $TG}}\nbridge:\n  internal_token: $TOKEN\n  admin_listen: {}\n  store: postgres://im:DBPASSWORD@db/im\n",
        gateway.local_addr().unwrap(),
        taken.local_addr().unwrap()
    );
    let path = write_config(&dir, "good.yaml", &text);
    let out = bin()
        .args(["check-config", "--config"])
        .arg(&path)
        .env("TOKEN", "SUPERSECRET-TOKEN")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("Channels that would start: console"),
        "{stdout}"
    );
    assert!(stdout.contains("<redacted>"), "{stdout}");
    // Issue 27: a password inside a URL is redacted like any secret.
    for secret in ["SUPERSECRET", "DBPASSWORD", "GWPASSWORD"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} leaked:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        gateway.accept().is_err(),
        "check-config must not connect to the Gateway"
    );
}

/// DeerFlow's own example (`tests/fixtures/deerflow-channels.yaml`, its config.example.yaml
/// uncommented), each of its platform blocks this build has enabled in turn and nothing else
/// changed: `check-config` accepts it, warns about nothing in the block, would start that
/// channel, and prints none of the secrets (issues 30, 31 and 32 for Slack, WeCom and WeChat).
#[test]
fn check_config_accepts_each_of_deerflows_channel_blocks_unchanged() {
    const DEERFLOW: &str = include_str!("fixtures/deerflow-channels.yaml");
    // Values of the shape each platform checks; every secret holds `SECRET`.
    let vars = [
        ("FEISHU_APP_ID", "cli_a1b2c3"),
        ("FEISHU_APP_SECRET", "feishu-SECRET"),
        ("SLACK_BOT_TOKEN", "xoxb-1234-5678-SECRETBOT"),
        ("SLACK_APP_TOKEN", "xapp-1-A0123-4567-SECRETAPP"),
        ("TELEGRAM_BOT_TOKEN", "123456789:AAtelegramSECRET"),
        ("WECOM_BOT_ID", "aibExampleBot"),
        ("WECOM_BOT_SECRET", "wecom-SECRET"),
        ("WECHAT_BOT_TOKEN", "wechat@im.bot:SECRET"),
        ("WECHAT_ILINK_BOT_ID", "b0f5860fdecb@im.bot"),
        ("DINGTALK_CLIENT_ID", "dingexample"),
        ("DINGTALK_CLIENT_SECRET", "dingtalk-SECRET"),
        ("DISCORD_BOT_TOKEN", "discord-SECRET"),
        ("DEER_FLOW_INTERNAL_AUTH_TOKEN", "internal-SECRET"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut checked = Vec::new();
    for name in im_bridge::platforms::KNOWN_PLATFORMS {
        let disabled = format!("\n  {name}:\n    enabled: false\n");
        if !DEERFLOW.contains(&disabled) || im_bridge::platforms::find(name).is_none() {
            continue;
        }
        let text = DEERFLOW.replace(&disabled, &format!("\n  {name}:\n    enabled: true\n"));
        let path = write_config(&dir, &format!("{name}.yaml"), &text);
        let mut cmd = bin();
        cmd.args(["check-config", "--config"]).arg(&path);
        for (var, value) in vars {
            cmd.env(var, value);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        let block = format!("channels.{name}");
        assert!(!stderr.contains(&block), "{name}: a warning: {stderr}");
        let starts = format!("Channels that would start: {name}");
        assert!(stdout.contains(&starts), "{name}: {stdout}");
        assert!(
            !stdout.contains("SECRET") && !stderr.contains("SECRET"),
            "{name}: a secret printed:\n{stdout}\n{stderr}"
        );
        checked.push(*name);
    }
    for name in ["slack", "wecom", "wechat"] {
        assert!(
            checked.contains(&name) || im_bridge::platforms::find(name).is_none(),
            "{name} was not checked: {checked:?}"
        );
    }
}

/// Starts `cmd` with stdin open, stdout discarded, and every stderr line sent to the
/// returned channel as it is written.
fn spawn_reading_stderr(
    mut cmd: Command,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// The first stderr line `pick` accepts, within 20 s, else the test fails naming `what`.
fn first_line<T>(
    lines: &std::sync::mpsc::Receiver<String>,
    what: &str,
    pick: impl Fn(&str) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("timed out waiting: {what}"));
        if let Some(found) = pick(&line) {
            return found;
        }
    }
}

/// Writes `input` to the binary's stdin, closes it, and returns (stdout, stderr, status).
fn run_with_input(mut cmd: Command, input: &str) -> (String, String, std::process::ExitStatus) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status,
    )
}

#[test]
fn demo_is_scriptable_and_exits_after_the_last_reply() {
    let mut cmd = bin();
    cmd.arg("demo").env("LANG", "C");
    let started = Instant::now();
    let (stdout, stderr, status) =
        run_with_input(cmd, "hello\n/goal ship it\n/goal\n/goal clear\n");
    assert!(status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(stdout.contains("You said: “hello”"), "{stdout}");
    assert!(
        stdout.contains("↻ Still working toward the goal (follow-up 1 of 8)"),
        "{stdout}"
    );
    assert!(
        lines.contains(&"Goal met: ship it"),
        "replies come back in order:\n{stdout}"
    );
    assert_eq!(lines.last(), Some(&"The goal is cleared."), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Issue 28: a piped script is read one line at a time, each answered before the next,
/// and the end of input waits for the last answer.
#[test]
fn issue_28_a_piped_script_gets_every_answer_in_order() {
    let mut cmd = bin();
    cmd.arg("demo").env("LANG", "C");
    let (stdout, stderr, status) =
        run_with_input(cmd, "hello\n/goal ship it\n/goal\n/compact\n/help\n");
    assert!(status.success(), "{stderr}");
    let text = crate::support::catalog_text("en-US");
    let busy = text("run-busy", &[]);
    assert!(!stdout.contains(busy.as_str()), "{stdout}");
    // One answer per line, in the order asked.
    let answers = [
        "You said: “hello”",
        "You said: “ship it”",
        "Goal met: ship it",
        "Condensed the older part of this conversation",
        "/help — show this list",
    ];
    let at: Vec<usize> = answers
        .iter()
        .map(|a| {
            stdout
                .find(a)
                .unwrap_or_else(|| panic!("no {a:?} in:\n{stdout}"))
        })
        .collect();
    assert!(at.is_sorted(), "out of order ({at:?}):\n{stdout}");
}

/// The terminal's `LANG` picks the demo's language: Simplified and Traditional Chinese (by
/// region, Hong Kong's included) and Japanese (issue 33).
#[test]
fn demo_speaks_the_terminal_language() {
    for (lang, answer) in [
        ("zh_CN.UTF-8", "这个对话目前没有目标。"),
        ("zh_TW.UTF-8", "這個對話目前沒有設定目標。"),
        ("zh_HK.UTF-8", "這個對話目前沒有設定目標。"),
        ("ja_JP.UTF-8", "この会話には目標が設定されていません。"),
    ] {
        let mut cmd = bin();
        cmd.arg("demo")
            .env("LANG", lang)
            .env_remove("LC_ALL")
            .env_remove("LC_MESSAGES");
        let (stdout, stderr, status) = run_with_input(cmd, "/goal\n");
        assert!(status.success(), "{lang}: {stderr}");
        assert_eq!(stdout, format!("{answer}\n"), "{lang}");
    }
}

#[test]
fn demo_answers_its_first_message_within_a_second() {
    let mut cmd = bin();
    cmd.arg("demo").env("LANG", "C");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"/status\n").unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = [0u8; 64];
    let n = std::io::Read::read(&mut stdout, &mut buf).unwrap();
    let elapsed = started.elapsed();
    drop(stdin);
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("This chat has no conversation yet."));
    assert!(child.wait().unwrap().success());
    // Startup plus one reply; generous for a loaded 2-core CI machine.
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    eprintln!("demo: first reply after {elapsed:?}");
}

/// A config in `dir` running the console channel against `sim`, its store in `dir`, the
/// admin endpoints on a port the system picks.
fn console_config(dir: &tempfile::TempDir, sim: &RunningSimulator) -> std::path::PathBuf {
    let text = format!(
        "channels:\n  langgraph_url: {}\n  gateway_url: {}\n  console: {{enabled: true}}\nbridge:\n  store: sqlite://{}\n  admin_listen: 127.0.0.1:0\n",
        sim.langgraph_url(),
        sim.gateway_url(),
        dir.path().join("run.db").display()
    );
    write_config(dir, "run.yaml", &text)
}

#[test]
fn run_serves_the_console_channel_against_a_gateway() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt
        .block_on(Simulator::start(SimulatorConfig {
            internal_token: Some("tok-123".into()),
            ..SimulatorConfig::demo()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = console_config(&dir, &sim);
    let mut cmd = bin();
    cmd.args(["run", "--config"])
        .arg(&path)
        .env("DEER_FLOW_INTERNAL_AUTH_TOKEN", "tok-123")
        .env("LANG", "C");
    let (stdout, stderr, status) = run_with_input(cmd, "hello\n/status\n");
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("You said: “hello”"), "{stdout}\n{stderr}");
    assert!(stdout.contains("This chat is in conversation"), "{stdout}");
    assert!(
        !stderr.contains("tok-123"),
        "the token never reaches the logs"
    );
    let requests = sim.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.header("x-deerflow-internal-token") == Some("tok-123"))
    );
    rt.block_on(sim.shutdown()).unwrap();
}

#[test]
fn run_exports_the_adapter_telemetry_on_metrics() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt
        .block_on(Simulator::start(SimulatorConfig::demo()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = console_config(&dir, &sim);
    let mut cmd = bin();
    cmd.args(["--log-format", "json", "run", "--config"])
        .arg(&path)
        .env("RUST_LOG", "info");
    let (mut child, lines) = spawn_reading_stderr(cmd);
    // The admin address the system picked for port 0 is in the "Serving" log line.
    let addr = first_line(&lines, "the admin address is logged", |line| {
        let event = serde_json::from_str::<serde_json::Value>(line).ok()?;
        event["addr"].as_str().map(str::to_owned)
    });
    let page = rt.block_on(async {
        let url = format!("http://{addr}/metrics");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let page = reqwest::get(&url).await.unwrap().text().await.unwrap();
            // The console reports itself connected once it reads its input.
            if page.contains("im_bridge_channel_connected{channel=\"console\"} 1")
                || Instant::now() > deadline
            {
                return page;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    rt.block_on(sim.shutdown()).unwrap();
    // Every series of the adapter contract, registered with the recorder /metrics renders.
    assert!(
        page.contains("im_bridge_channel_connected{channel=\"console\"} 1"),
        "{page}"
    );
    for stage in ["receiving", "processing", "sending"] {
        assert!(
            page.contains(&format!(
                "im_bridge_channel_errors_total{{channel=\"console\",stage=\"{stage}\"}} 0"
            )),
            "{stage}: {page}"
        );
    }
    assert!(page.contains("im_bridge_channel_events_received_total{channel=\"console\"}"));
    assert!(page.contains("im_bridge_channel_messages_sent_total{channel=\"console\"}"));
}

#[test]
fn demo_exits_on_interrupt_while_its_input_stays_open() {
    // stdin stays open and silent: the console is blocked reading it when SIGINT comes.
    let mut cmd = bin();
    cmd.arg("demo").env("RUST_LOG", "info");
    let (mut child, lines) = spawn_reading_stderr(cmd);
    let stdin = child.stdin.take().unwrap();
    // Running (and handling signals) once it says so.
    first_line(&lines, "the demo starts", |line| {
        line.contains("im-bridge is running.").then_some(())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break Some(exit);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    let Some(exit) = exit else {
        child.kill().unwrap();
        panic!("demo did not exit after SIGINT while its input was open");
    };
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn run_keeps_its_state_in_postgres_when_configured() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt
        .block_on(Simulator::start(SimulatorConfig::demo()))
        .unwrap();
    // A schema of its own on the test PostgreSQL server, dropped at the end.
    let Some(pg) = rt.block_on(PgSchema::create("im_bridge_cli")) else {
        return;
    };
    let url = pg.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "channels:\n  langgraph_url: {}\n  gateway_url: {}\n  console: {{enabled: true}}\nbridge:\n  store: {url}\n  admin_listen: 127.0.0.1:0\n",
        sim.langgraph_url(),
        sim.gateway_url(),
    );
    let path = write_config(&dir, "pg.yaml", &text);
    let mut cmd = bin();
    cmd.args(["run", "--config"]).arg(&path).env("LANG", "C");
    let (stdout, stderr, status) = run_with_input(cmd, "hello\n");
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("You said: “hello”"), "{stdout}\n{stderr}");
    let bound: Vec<(String, String)> = rt.block_on(async {
        let rows = pg
            .admin
            .query(
                &format!(
                    "SELECT channel, thread_id FROM {}.im_bridge_bindings",
                    pg.name
                ),
                &[],
            )
            .await
            .unwrap();
        pg.drop().await;
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    });
    let threads = sim.thread_ids();
    assert_eq!(bound, [("console".to_owned(), threads[0].clone())]);
    rt.block_on(sim.shutdown()).unwrap();
}

#[test]
fn run_refuses_an_invalid_file_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, "bad.yaml", "channels:\n  max_concurrency: -1\n");
    let out = bin().args(["run", "--config"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("channels.max_concurrency"));
}

/// Issue 33: an adjustment of a rate budget the channel does not declare is refused at
/// start with its key path (the console declares none), before anything runs.
#[test]
fn issue_33_run_refuses_a_rate_budget_the_channel_does_not_declare() {
    let dir = tempfile::tempdir().unwrap();
    let text = "channels:\n  console:\n    enabled: true\n    rate_budgets:\n      bot: {per_second: 5}\nbridge:\n  admin_listen: 127.0.0.1:0\n";
    let path = write_config(&dir, "budget.yaml", text);
    let out = bin()
        .args(["run", "--config"])
        .arg(&path)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "channels.console.rate_budgets.bot: the console channel declares no rate budget"
        ),
        "{stderr}"
    );
}

/// Issue 27: a store that cannot be opened is named once, with the part that failed.
#[test]
fn issue_27_a_missing_postgres_database_is_said_once_and_named() {
    let Some(base) = im_bridge_fakes::postgres::url() else {
        return;
    };
    let mut url = reqwest::Url::parse(base).unwrap();
    url.set_path("/im_bridge_no_such_database_27");
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "channels:\n  console: {{enabled: true}}\nbridge:\n  store: \"{url}\"\n  admin_listen: 127.0.0.1:0\n"
    );
    let path = write_config(&dir, "pg.yaml", &text);
    let out = bin()
        .args(["run", "--config"])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("the database does not exist").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("db error"), "{stderr}");
}
