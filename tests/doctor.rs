//! `im-bridge doctor` (issue 20): the real binary against the Gateway simulator and the six
//! platform fakes, which enforce credentials. One process per case: everything passes; a
//! wrong internal token; an unreachable Gateway; refused platform credentials; a webhook
//! another deployment set; an unwritable store; the admin address in use. Each failure
//! must name its fix, exit 1, and no secret may appear in the output.
//!
//! The platforms come from the daemon's registry: [`PLATFORM_CASES`] says how each meets
//! doctor (its block, its secret, a wrong one, the hint), and a test fails when a registered
//! platform has no case.

use std::collections::HashMap;
use std::process::Output;

use im_bridge::doctor::DOCTOR_LEASE;
use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge::store::{SqliteStore, Store};
use im_bridge_fakes::dingtalk::{self, FakeDingTalk};
use im_bridge_fakes::discord::{self, FakeDiscord};
use im_bridge_fakes::feishu::{self, FakeFeishu};
use im_bridge_fakes::qq::{self, FakeQq};
use im_bridge_fakes::slack::{self, FakeSlack};
use im_bridge_fakes::telegram::{self, FakeTelegram};
use im_bridge_fakes::wechat::{self, FakeWechat};
use im_bridge_fakes::wecom::{self, FakeWecom};

use crate::cli::bin;

/// The simulator's internal token.
const INTERNAL_TOKEN: &str = "doctor-INTERNAL-token-0001";

/// The variable the config reads the internal token from.
const INTERNAL_VAR: &str = "DOCTOR_INTERNAL_TOKEN";

/// What doctor meets of one platform: its `channels.<name>` block against its fake (the
/// secret read from `$var`), the secret the fake accepts, one it refuses, and the keys the
/// refusal's hint must name.
struct PlatformCase {
    name: &'static str,
    var: &'static str,
    secret: &'static str,
    wrong: &'static str,
    hint: &'static str,
    block: fn(&World) -> String,
}

/// Every platform with credentials to check; [`platforms`] keeps the ones this build
/// registers.
const PLATFORM_CASES: &[PlatformCase] = &[
    PlatformCase {
        name: "telegram",
        var: "DOCTOR_TG_TOKEN",
        secret: telegram::TOKEN,
        wrong: "999999:WRONG-telegram-token",
        hint: "channels.telegram.bot_token",
        block: |w| {
            let api = w.telegram.api_url();
            format!("{{enabled: true, bot_token: $DOCTOR_TG_TOKEN, api_url: {api}}}")
        },
    },
    PlatformCase {
        name: "feishu",
        var: "DOCTOR_FEISHU_SECRET",
        secret: feishu::APP_SECRET,
        wrong: "WRONG-feishu-secret",
        hint: "channels.feishu.app_id and channels.feishu.app_secret",
        block: |w| {
            format!(
                "{{enabled: true, app_id: {}, app_secret: $DOCTOR_FEISHU_SECRET, domain: {}}}",
                feishu::APP_ID,
                w.feishu.domain()
            )
        },
    },
    PlatformCase {
        name: "dingtalk",
        var: "DOCTOR_DINGTALK_SECRET",
        secret: dingtalk::CLIENT_SECRET,
        wrong: "WRONG-dingtalk-secret",
        hint: "channels.dingtalk.client_secret",
        block: |w| {
            let api = w.dingtalk.api_url();
            format!(
                "{{enabled: true, client_id: {}, client_secret: $DOCTOR_DINGTALK_SECRET, api_url: {api}, oapi_url: {api}}}",
                dingtalk::CLIENT_ID
            )
        },
    },
    PlatformCase {
        name: "qq",
        var: "DOCTOR_QQ_SECRET",
        secret: qq::CLIENT_SECRET,
        wrong: "WRONG-qq-secret",
        hint: "channels.qq.client_secret",
        block: |w| {
            format!(
                "{{enabled: true, app_id: \"{}\", client_secret: $DOCTOR_QQ_SECRET, api_url: {}, token_url: {}}}",
                qq::APP_ID,
                w.qq.api_url(),
                w.qq.token_url()
            )
        },
    },
    PlatformCase {
        name: "discord",
        var: "DOCTOR_DISCORD_TOKEN",
        secret: discord::TOKEN,
        wrong: "WRONG-discord-token",
        hint: "channels.discord.bot_token",
        block: |w| {
            let api = w.discord.api_url();
            format!("{{enabled: true, bot_token: $DOCTOR_DISCORD_TOKEN, api_url: {api}}}")
        },
    },
    PlatformCase {
        name: "slack",
        var: "DOCTOR_SLACK_TOKEN",
        secret: slack::BOT_TOKEN,
        wrong: "xoxb-WRONG-slack-token",
        hint: "channels.slack.bot_token",
        block: |w| {
            // The app-level token is checked too (`slack socket mode`), with the right one.
            format!(
                "{{enabled: true, bot_token: $DOCTOR_SLACK_TOKEN, app_token: {}, api_url: {}}}",
                slack::APP_TOKEN,
                w.slack.api_url()
            )
        },
    },
    PlatformCase {
        name: "wecom",
        var: "DOCTOR_WECOM_SECRET",
        secret: wecom::SECRET,
        wrong: "WRONG-wecom-secret",
        hint: "channels.wecom.bot_id and channels.wecom.bot_secret",
        block: |w| {
            format!(
                "{{enabled: true, bot_id: {}, bot_secret: $DOCTOR_WECOM_SECRET, ws_url: \"{}\"}}",
                wecom::BOT_ID,
                w.wecom.ws_url()
            )
        },
    },
    PlatformCase {
        name: "wechat",
        var: "DOCTOR_WECHAT_TOKEN",
        secret: wechat::BOT_TOKEN,
        wrong: "fakebot00000001@im.bot:WRONG-wechat-token",
        hint: "channels.wechat.bot_token",
        block: |w| {
            format!(
                "{{enabled: true, bot_token: $DOCTOR_WECHAT_TOKEN, base_url: {}, cdn_base_url: {}}}",
                w.wechat.base_url(),
                w.wechat.cdn_base_url()
            )
        },
    },
];

/// The cases of the platforms the daemon's registry holds in this build.
fn platforms() -> impl Iterator<Item = &'static PlatformCase> {
    PLATFORM_CASES
        .iter()
        .filter(|c| im_bridge::platforms::find(c.name).is_some())
}

/// Whether this build has platform `name`.
fn has(name: &str) -> bool {
    im_bridge::platforms::find(name).is_some()
}

/// The simulator and the fakes, on a runtime that serves them while the binary runs.
struct World {
    rt: tokio::runtime::Runtime,
    sim: RunningSimulator,
    telegram: FakeTelegram,
    feishu: FakeFeishu,
    dingtalk: FakeDingTalk,
    qq: FakeQq,
    discord: FakeDiscord,
    slack: FakeSlack,
    wecom: FakeWecom,
    wechat: FakeWechat,
    dir: tempfile::TempDir,
}

/// What a case changes in the working setup.
struct Case {
    /// The secrets' values, by variable.
    secrets: HashMap<&'static str, String>,
    gateway: Option<String>,
    store: Option<String>,
    admin: String,
}

impl World {
    fn start() -> Self {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (sim, telegram, feishu, dingtalk, qq, discord, slack, wecom, wechat) = rt.block_on(async {
            let sim = Simulator::start(SimulatorConfig {
                internal_token: Some(INTERNAL_TOKEN.into()),
                ..SimulatorConfig::demo()
            });
            let (sim, telegram, feishu, dingtalk, qq, discord, slack, wecom, wechat) = tokio::join!(
                sim,
                FakeTelegram::start(),
                FakeFeishu::start(),
                FakeDingTalk::start(),
                FakeQq::start(),
                FakeDiscord::start(),
                FakeSlack::start(),
                FakeWecom::start(),
                FakeWechat::start(),
            );
            (
                sim.unwrap(),
                telegram.unwrap(),
                feishu.unwrap(),
                dingtalk.unwrap(),
                qq.unwrap(),
                discord.unwrap(),
                slack.unwrap(),
                wecom.unwrap(),
                wechat.unwrap(),
            )
        });
        Self {
            rt,
            sim,
            telegram,
            feishu,
            dingtalk,
            qq,
            discord,
            slack,
            wecom,
            wechat,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Every value right: the checks should all pass.
    fn case(&self) -> Case {
        let platforms = platforms().map(|c| (c.var, c.secret.to_owned()));
        let secrets = std::iter::once((INTERNAL_VAR, INTERNAL_TOKEN.to_owned()))
            .chain(platforms)
            .collect();
        Case {
            secrets,
            gateway: None,
            store: None,
            admin: "127.0.0.1:0".into(),
        }
    }

    /// Runs `im-bridge doctor` on the case's config: (exit code, stdout, stderr). Fails the
    /// test if any secret of the case shows in the output.
    fn doctor(&self, case: &Case) -> (Option<i32>, String, String) {
        let gateway = case
            .gateway
            .clone()
            .unwrap_or_else(|| self.sim.gateway_url());
        let store = case
            .store
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.dir.path().join("doctor.db").display()));
        let blocks: String = platforms()
            .map(|c| format!("  {}: {}\n", c.name, (c.block)(self)))
            .collect();
        let text = format!(
            "channels:
  langgraph_url: {gateway}/api
  gateway_url: {gateway}
{blocks}bridge:
  store: {store}
  admin_listen: {admin}
  internal_token: ${INTERNAL_VAR}
",
            admin = case.admin,
        );
        let path = self.dir.path().join("doctor.yaml");
        std::fs::write(&path, text).unwrap();
        let mut cmd = bin();
        cmd.args(["doctor", "--config"]).arg(&path);
        for (var, value) in &case.secrets {
            cmd.env(var, value);
        }
        let Output {
            status,
            stdout,
            stderr,
        } = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&stdout).into_owned();
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        for value in case.secrets.values() {
            assert!(
                !stdout.contains(value.as_str()) && !stderr.contains(value.as_str()),
                "a secret leaked:\n{stdout}\n{stderr}"
            );
        }
        (status.code(), stdout, stderr)
    }
}

/// The line of check `name`.
fn line<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| {
            l.get(5..)
                .is_some_and(|rest| rest.starts_with(&format!("{name}: ")))
        })
        .unwrap_or_else(|| panic!("no line for {name}:\n{stdout}"))
}

/// The checks that failed, by name.
fn failed(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("FAIL "))
        .filter_map(|l| l.split_once(": ").map(|(name, _)| name))
        .collect()
}

/// Asserts that check `name` failed with `problem` and a hint containing `hint`.
fn assert_fails(stdout: &str, name: &str, problem: &str, hint: &str) {
    let line = line(stdout, name);
    assert!(line.starts_with("FAIL "), "{line}");
    let (found, fix) = line.split_once("; fix: ").unwrap_or((line, ""));
    assert!(found.contains(problem), "{name}: {problem:?} not in {line}");
    assert!(fix.contains(hint), "{name}: hint {hint:?} not in {line}");
}

#[test]
fn every_check_passes_against_the_simulator_and_the_fakes() {
    let world = World::start();
    let (code, stdout, stderr) = world.doctor(&world.case());
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let checks: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("All ")).collect();
    assert!(checks.iter().all(|l| l.starts_with("ok   ")), "{stdout}");
    let own = [
        "gateway",
        "gateway token",
        "langgraph",
        "gateway routes",
        "store",
    ];
    for name in own.into_iter().chain(["admin address"]) {
        line(&stdout, name);
    }
    // A line for each platform of the registry that has credentials (the console has none).
    let mut checked: Vec<&str> = platforms().map(|c| c.name).collect();
    for name in &checked {
        assert!(line(&stdout, name).starts_with("ok   "), "{stdout}");
    }
    let mut registered: Vec<&str> = im_bridge::platforms::PLATFORMS
        .iter()
        .map(|p| p.name())
        .filter(|name| *name != "console")
        .collect();
    checked.sort_unstable();
    registered.sort_unstable();
    assert_eq!(checked, registered, "a platform without a doctor case");
    if has("telegram") {
        line(&stdout, "telegram webhook");
        assert!(
            line(&stdout, "telegram").contains(telegram::BOT_USERNAME),
            "{stdout}"
        );
    }
    // Issue 26: the optional routes the simulator serves by default.
    assert_eq!(
        line(&stdout, "gateway routes"),
        "ok   gateway routes: POST /api/threads/{id}/goal/from-chat: served; \
         GET /api/user-preferences: served; GET /api/threads/{id}/runs: served",
    );
    assert!(stdout.ends_with(&format!("All {} checks passed.\n", checks.len())));
    // The store check closed the file (its lock is free) and gave its lease back.
    world.rt.block_on(async {
        let store = SqliteStore::open(&world.dir.path().join("doctor.db"))
            .await
            .unwrap();
        let ttl = std::time::Duration::from_secs(60);
        assert!(
            store
                .acquire_lease(DOCTOR_LEASE, "a daemon", ttl)
                .await
                .unwrap()
        );
        store.close().await.unwrap();
    });
}

/// Issue 26: a Gateway without the optional routes (today's DeerFlow) is listed, not failed.
#[test]
fn issue_26_missing_optional_routes_are_listed_not_failed() {
    let world = World::start();
    world
        .sim
        .configure(|c| *c = c.clone().deerflow_routes_only());
    let (code, stdout, stderr) = world.doctor(&world.case());
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let routes = line(&stdout, "gateway routes");
    assert!(routes.starts_with("ok   "), "{stdout}");
    assert_eq!(
        routes
            .matches("not served (this DeerFlow version lacks it)")
            .count(),
        2,
        "{routes}"
    );
}

#[test]
fn a_wrong_internal_token_fails_with_the_token_hint() {
    let world = World::start();
    let mut case = world.case();
    case.secrets
        .insert("DOCTOR_INTERNAL_TOKEN", "doctor-WRONG-token-0002".into());
    let (code, stdout, _) = world.doctor(&case);
    assert_eq!(code, Some(1), "{stdout}");
    assert_fails(
        &stdout,
        "gateway token",
        "refused the internal token",
        "bridge.internal_token (or DEER_FLOW_INTERNAL_AUTH_TOKEN)",
    );
    assert!(line(&stdout, "gateway").starts_with("ok   "), "{stdout}");
    assert_eq!(failed(&stdout), ["gateway token"], "{stdout}");
}

#[test]
fn an_unreachable_gateway_fails_naming_the_url_key() {
    let world = World::start();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut case = world.case();
    // Credentials in the URL are never printed (the secret check covers every value).
    case.gateway = Some(format!("http://doctor:URL-PASSWORD@127.0.0.1:{port}"));
    case.secrets.insert("DOCTOR_UNUSED", "URL-PASSWORD".into());
    let (code, stdout, _) = world.doctor(&case);
    assert_eq!(code, Some(1), "{stdout}");
    assert_fails(
        &stdout,
        "gateway",
        &format!("no answer from http://127.0.0.1:{port}"),
        "check channels.gateway_url (or DEER_FLOW_CHANNELS_GATEWAY_URL)",
    );
    assert_fails(&stdout, "langgraph", "no answer", "channels.langgraph_url");
    assert!(
        line(&stdout, "gateway token").starts_with("skip "),
        "{stdout}"
    );
    assert_eq!(failed(&stdout), ["gateway", "langgraph"], "{stdout}");
}

#[test]
fn refused_platform_credentials_fail_naming_each_channel_and_its_keys() {
    let world = World::start();
    let mut case = world.case();
    for platform in platforms() {
        case.secrets.insert(platform.var, platform.wrong.into());
    }
    let (code, stdout, _) = world.doctor(&case);
    assert_eq!(code, Some(1), "{stdout}");
    let refused = "the credentials were refused";
    for platform in platforms() {
        assert_fails(&stdout, platform.name, refused, platform.hint);
    }
    if has("telegram") {
        assert!(
            line(&stdout, "telegram webhook").starts_with("skip "),
            "{stdout}"
        );
    }
    let mut names: Vec<&str> = platforms().map(|c| c.name).collect();
    names.sort_unstable();
    assert_eq!(failed(&stdout), names, "{stdout}");
}

#[test]
fn a_webhook_set_elsewhere_fails_the_polling_bot() {
    let world = World::start();
    world.rt.block_on(async {
        let url = format!(
            "{}/bot{}/setWebhook",
            world.telegram.api_url(),
            telegram::TOKEN
        );
        let body = serde_json::json!({"url": "https://elsewhere.example.com/hook?k=v"});
        let answer = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success());
    });
    let (code, stdout, _) = world.doctor(&world.case());
    assert_eq!(code, Some(1), "{stdout}");
    assert_fails(
        &stdout,
        "telegram webhook",
        "a webhook is set (https://elsewhere.example.com/hook)",
        "deleteWebhook; or set channels.telegram.mode: webhook",
    );
    assert_eq!(failed(&stdout), ["telegram webhook"], "{stdout}");
    assert!(
        world.telegram.webhook().is_some(),
        "doctor changes nothing on the platform"
    );
}

#[test]
fn an_unwritable_store_fails_naming_its_directory() {
    let world = World::start();
    // Tests run as root, so permissions stop nothing: a directory that is a file does.
    let file = world.dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let mut case = world.case();
    case.store = Some(format!("sqlite://{}", file.join("doctor.db").display()));
    let (code, stdout, _) = world.doctor(&case);
    assert_eq!(code, Some(1), "{stdout}");
    assert_fails(
        &stdout,
        "store",
        "Cannot open the store file",
        &format!("check that {} exists", file.display()),
    );
    assert!(
        line(&stdout, "store").contains("StateDirectory"),
        "{stdout}"
    );
    assert_eq!(failed(&stdout), ["store"], "{stdout}");
}

#[test]
fn an_admin_address_in_use_fails() {
    let world = World::start();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let mut case = world.case();
    case.admin = addr.to_string();
    let (code, stdout, _) = world.doctor(&case);
    assert_eq!(code, Some(1), "{stdout}");
    assert_fails(
        &stdout,
        "admin address",
        &format!("{addr} is in use"),
        "bridge.admin_listen",
    );
    assert_eq!(failed(&stdout), ["admin address"], "{stdout}");
}
