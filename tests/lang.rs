//! Localization end to end (issue 6): the locale chain with its fall-through, `/lang` in
//! private and group chats, and the `/goal` outcomes in every shipped locale (Traditional
//! Chinese and Japanese since issue 33).

use std::time::Duration;

use im_bridge::i18n::{Arg, Catalogs, msg};
use im_bridge::manager::Owners;
use im_bridge::simulator::{Failure, Fault, GoalState, Hold, Reply, Route, Script, SimModel};
use im_bridge_channel::RedeliveryKey;

use crate::support::{
    Call, DEADLINE, Harness, Options, admins, catalog_text, goal_met_at_once, in_group,
    shipped_locales,
};

const EN_NONE: &str = "There's no active goal in this conversation.";
const ZH_NONE: &str = "这个对话目前没有目标。";

/// The finals a test expects so far, in locale `tag`.
struct Finals<'a> {
    tag: &'a str,
    expected: Vec<String>,
}

impl Finals<'_> {
    /// Says `said` and checks that the next final is `want`.
    async fn check(&mut self, h: &Harness, said: &str, want: String) {
        h.say(said).await;
        self.expected.push(want);
        let finals = h.channel.wait_finals(self.expected.len()).await;
        assert_eq!(finals.last(), self.expected.last(), "{} {said}", self.tag);
    }
}

/// `items` as locale `tag` lists them in a sentence.
fn list_in(tag: &str, items: &[&str]) -> String {
    let catalogs = Catalogs::embedded().unwrap();
    catalogs.join_list(&catalogs.negotiate(tag).unwrap(), items)
}

#[tokio::test]
async fn each_step_of_the_chain_and_its_fall_through() {
    // 6. Nothing configured: en-US.
    let h = Harness::with(Options::final_only().notification_locale("fr-FR")).await;
    assert_eq!(h.ask("/goal", 1).await, EN_NONE);
    h.stop().await;

    // 5. The admin's notification_locale.
    let h = Harness::with(Options::final_only().notification_locale("zh-CN")).await;
    assert_eq!(h.ask("/goal", 1).await, ZH_NONE);
    h.stop().await;

    // 4. The channel's locale beats the admin default.
    let mut o = Options::final_only().notification_locale("en-US");
    o.manager
        .channel_locales
        .insert("telegram".into(), "zh".into());
    let h = Harness::with(o).await;
    assert_eq!(h.ask("/goal", 1).await, ZH_NONE);
    // 3. The sender's platform language beats the channel's.
    let mut m = h.message("/goal");
    m.locale_hint = Some("en-GB".into());
    h.send(m).await;
    assert_eq!(h.channel.nth_final(2).await, EN_NONE);
    h.stop().await;

    // 2. The owner's preference beats the sender's language; a failing lookup falls through.
    let mut o = Options::final_only();
    o.manager.owners =
        Owners::by_user([("telegram", "u1", "owner-1"), ("telegram", "u2", "owner-2")]);
    let h = Harness::with(o).await;
    h.sim.set_user_locale("owner-1", Some("zh-CN"));
    let mut m = h.message("/goal");
    m.locale_hint = Some("en-US".into());
    h.send(m.clone()).await;
    assert_eq!(h.channel.nth_final(1).await, ZH_NONE);
    let mut other = m.clone();
    other.user_id = "u2".into();
    other.redelivery = Some(RedeliveryKey::new("c1", "fresh-1"));
    h.sim.push_fault(
        Fault::on(Route::UserPreferences)
            .reply(Reply::html(500))
            .sticky(),
    );
    other.locale_hint = Some("zh-Hans-SG".into());
    h.send(other).await;
    assert_eq!(
        h.channel.nth_final(2).await,
        ZH_NONE,
        "a failed lookup falls through to the sender's language"
    );
    h.sim.clear_faults();

    // 1. The chat's override beats everything.
    assert_eq!(
        h.ask("/lang en", 3).await,
        "Okay, I'll reply in English in this chat."
    );
    let mut m2 = m.clone();
    m2.redelivery = Some(RedeliveryKey::new("c1", "fresh-2"));
    h.send(m2).await;
    assert_eq!(h.channel.nth_final(4).await, EN_NONE);
    h.stop().await;
}

#[tokio::test]
async fn lang_reports_its_source_and_switches_both_ways() {
    let h = Harness::with(Options::final_only().notification_locale("zh-CN")).await;
    assert_eq!(
        h.ask("/lang", 1).await,
        "我现在用 简体中文 回复，因为这是管理员设定的默认语言。"
    );
    assert_eq!(
        h.ask("/lang en-US", 2).await,
        "Okay, I'll reply in English in this chat."
    );
    assert_eq!(
        h.ask("/lang", 3).await,
        "I'm replying in English because this chat chose it with /lang."
    );
    assert_eq!(
        h.ask("/lang auto", 4).await,
        "这个聊天不再单独指定语言，我会用 简体中文 回复。"
    );
    assert_eq!(
        h.ask("/lang klingon", 5).await,
        "我暂时还不能用 klingon 回复。可用的语言有：English (en-US)、简体中文 (zh-CN)、繁體中文 (zh-TW)、日本語 (ja-JP)"
    );
    h.stop().await;
}

#[tokio::test]
async fn in_groups_only_admins_change_the_language() {
    let mut o = Options::final_only();
    o.manager.channel_admins = admins("telegram", &["boss"]);
    let h = Harness::with(o).await;
    h.send(in_group(h.message("/lang zh-CN"), None)).await;
    assert_eq!(
        h.channel.nth_final(1).await,
        "Only this bot's admins can change the language in a group chat."
    );
    let mut boss = in_group(h.message("/lang zh-CN"), None);
    boss.user_id = "boss".into();
    h.send(boss).await;
    assert_eq!(
        h.channel.nth_final(2).await,
        "好的，在这个聊天里我会用 简体中文 回复。"
    );
    // Anyone may look; and in a private chat anyone may change it.
    h.send(in_group(h.message("/lang"), None)).await;
    let shown = h.channel.nth_final(3).await;
    assert!(shown.starts_with("我现在用 简体中文 回复"), "{shown}");
    let mut private = h.message("/lang en");
    private.chat_id = "dm".into();
    h.send(private).await;
    assert_eq!(
        h.channel.nth_final(4).await,
        "Okay, I'll reply in English in this chat."
    );
    h.stop().await;
}

/// Every `/goal` outcome in each shipped locale: each reply is that locale's catalog text
/// (outside en-US, not English).
#[tokio::test]
async fn every_goal_outcome_in_every_shipped_locale() {
    for tag in shipped_locales() {
        let tag = tag.as_str();
        let text = catalog_text(tag);
        let h = Harness::with(Options {
            from_chat_timeout: Duration::from_millis(300),
            ..Options::final_only().notification_locale(tag)
        })
        .await;
        let mut finals = Finals {
            tag,
            expected: Vec::new(),
        };
        finals
            .check(&h, "/goal", text(msg::GOAL_STATUS_NONE, &[]))
            .await;
        finals
            .check(&h, "/goal clear", text(msg::GOAL_CLEARED, &[]))
            .await;
        finals
            .check(
                &h,
                "/goal from-chat",
                text(msg::GOAL_FROM_CHAT_NO_CONTEXT, &[]),
            )
            .await;
        h.sim.script_next_run(goal_met_at_once("ok"));
        finals
            .check(&h, "Please draft the launch plan", "ok".into())
            .await;
        let thread = h.only_thread();
        h.sim.set_goal(&thread, Some(GoalState::new("launch", 8)));
        finals
            .check(
                &h,
                "/goal",
                text(
                    msg::GOAL_STATUS_ACTIVE,
                    &[("objective", Arg::Str("launch"))],
                ),
            )
            .await;
        let mut g = GoalState::new("launch", 8);
        g.continuation_count = 2;
        h.sim.set_goal(&thread, Some(g));
        finals
            .check(
                &h,
                "/goal",
                text(
                    msg::GOAL_STATUS_PROGRESS,
                    &[
                        ("objective", Arg::Str("launch")),
                        ("n", Arg::Num(2)),
                        ("max", Arg::Num(8)),
                    ],
                ),
            )
            .await;
        h.sim
            .push_fault(Fault::on(Route::GoalGet).reply(Reply::html(502)));
        finals
            .check(&h, "/goal", text(msg::GOAL_STATUS_FAILED, &[]))
            .await;
        h.sim
            .push_fault(Fault::on(Route::GoalDelete).reply(Reply::detail(409, "busy")));
        finals
            .check(&h, "/goal clear", text(msg::GOAL_BUSY_UNCHANGED, &[]))
            .await;
        h.sim
            .push_fault(Fault::on(Route::GoalDelete).reply(Reply::detail(500, "x")));
        finals
            .check(&h, "/goal clear", text(msg::GOAL_CLEAR_FAILED, &[]))
            .await;
        h.sim
            .push_fault(Fault::on(Route::GoalPut).reply(Reply::detail(500, "x")));
        finals
            .check(&h, "/goal launch it", text(msg::GOAL_SET_FAILED, &[]))
            .await;
        finals
            .check(
                &h,
                &format!("/goal {}", "x".repeat(4001)),
                text(msg::GOAL_TOO_LONG, &[("max", Arg::Num(4000))]),
            )
            .await;
        finals
            .check(
                &h,
                &format!("/goal from-chat {}", "x".repeat(4001)),
                text(msg::GOAL_HINT_TOO_LONG, &[("max", Arg::Num(4000))]),
            )
            .await;
        for (reply, id) in [
            (
                Reply::coded(409, "thread_busy", "m"),
                msg::GOAL_FROM_CHAT_BUSY,
            ),
            (
                Reply::coded(409, "pending_human_input", "m"),
                msg::GOAL_FROM_CHAT_PENDING_INPUT,
            ),
            (
                Reply::coded(409, "pending_tool_approval", "m"),
                msg::GOAL_FROM_CHAT_PENDING_APPROVAL,
            ),
            (
                Reply::coded(409, "goal_changed", "m"),
                msg::GOAL_FROM_CHAT_GOAL_CHANGED,
            ),
            (
                Reply::coded(422, "unclear", "m"),
                msg::GOAL_FROM_CHAT_UNCLEAR,
            ),
            (
                Reply::coded(502, "synthesis_failed", "m"),
                msg::GOAL_FROM_CHAT_SYNTHESIS_FAILED,
            ),
            (
                Reply::coded(403, "forbidden", "m"),
                msg::GOAL_FROM_CHAT_FORBIDDEN,
            ),
            (Reply::html(500), msg::GOAL_FROM_CHAT_FAILED),
        ] {
            h.sim
                .push_fault(Fault::on(Route::GoalFromChat).reply(reply));
            finals.check(&h, "/goal from-chat", text(id, &[])).await;
        }
        h.sim
            .push_fault(Fault::on(Route::GoalFromChat).delay(Duration::from_secs(2)));
        finals
            .check(
                &h,
                "/goal from-chat",
                text(msg::GOAL_FROM_CHAT_TIMEOUT, &[]),
            )
            .await;
        // Saved, then the run is refused: the objective, then "saved but not started".
        h.sim.wait_idle(&thread, DEADLINE).await.unwrap();
        h.sim.set_goal(&thread, None);
        // Busy past the waits for a run in flight (none is listed): not started.
        h.sim.push_fault(
            Fault::on(Route::RunCreate)
                .reply(Reply::run_busy("x"))
                .sticky(),
        );
        h.say("/goal from-chat").await;
        let objective = "Please draft the launch plan";
        finals.expected.push(text(
            msg::GOAL_FROM_CHAT_SAVED,
            &[("objective", Arg::Str(objective))],
        ));
        finals.expected.push(text(
            msg::GOAL_FROM_CHAT_NOT_STARTED_BUSY,
            &[("objective", Arg::Str(objective))],
        ));
        let all = h.channel.wait_finals(finals.expected.len()).await;
        assert_eq!(all, finals.expected, "{tag}");
        if tag != "en-US" {
            for f in &all[..3] {
                assert!(
                    f.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
                    "{f}"
                );
            }
        }
        h.stop().await;
    }
}

#[tokio::test]
async fn issue_13_single_user_deerflow_replies_in_the_default_users_language() {
    // DEER_FLOW_AUTH_DISABLED=1: every conversation belongs to DeerFlow's `default` user.
    let mut o = Options::final_only();
    o.manager.owners = Owners::single_user();
    let h = Harness::with(o).await;
    h.sim
        .set_user_locale(im_bridge::manager::SINGLE_USER, Some("zh-CN"));
    let mut m = h.message("/goal");
    m.locale_hint = Some("en-US".into());
    h.send(m).await;
    assert_eq!(h.channel.nth_final(1).await, ZH_NONE);
    h.stop().await;
}

/// Issue 14: a bare `/bootstrap` asks the agent in the chat's language; in English it keeps
/// DeerFlow's own wording.
#[tokio::test]
async fn a_bare_bootstrap_asks_in_the_chats_language() {
    for (tag, input) in [
        ("en-US", "Initialize workspace"),
        ("zh-CN", "初始化工作区"),
        ("zh-TW", "初始化工作區"),
        ("ja-JP", "ワークスペースを初期化"),
    ] {
        let h = Harness::with(Options::final_only().notification_locale(tag)).await;
        h.say("/bootstrap").await;
        h.channel.wait_finals(1).await;
        let body = h.first_body("/runs");
        assert_eq!(body["input"]["messages"][0]["content"], input, "{tag}");
        assert_eq!(body["context"]["is_bootstrap"], true);
        h.stop().await;
    }
}

/// Issue 33: `/lang` takes Traditional Chinese and Japanese by any of their tags, confirms
/// in the new language by its own name, and says where the language came from; a sender
/// whose app is in Traditional Chinese or Japanese is answered in it.
#[tokio::test]
async fn issue_33_traditional_chinese_and_japanese_by_lang_and_by_the_senders_language() {
    let h = Harness::with(Options::final_only()).await;
    assert_eq!(
        h.ask("/lang zh-Hant", 1).await,
        "好的，在這個聊天室裡我會用 繁體中文 回覆。"
    );
    assert_eq!(
        h.ask("/lang", 2).await,
        "我現在用 繁體中文 回覆，因為這個聊天室用 /lang 選了它。"
    );
    assert_eq!(h.ask("/goal", 3).await, "這個對話目前沒有設定目標。");
    assert_eq!(
        h.ask("/lang ja", 4).await,
        "承知しました。このチャットでは日本語で返信します。"
    );
    assert_eq!(
        h.ask("/lang", 5).await,
        "現在は日本語で返信しています。このチャットで /lang により選ばれているためです。"
    );
    assert_eq!(
        h.ask("/lang klingon", 6).await,
        "klingon での返信にはまだ対応していません。使える言語：English (en-US)、简体中文 (zh-CN)、繁體中文 (zh-TW)、日本語 (ja-JP)"
    );
    assert_eq!(
        h.ask("/lang auto", 7).await,
        "This chat no longer has its own language. I'll reply in English."
    );
    for (n, (hint, want)) in [
        ("zh-HK", "這個對話目前沒有設定目標。"),
        ("zh-Hant-MO", "這個對話目前沒有設定目標。"),
        ("zh-SG", ZH_NONE),
        ("ja-JP", "この会話には目標が設定されていません。"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut m = h.message("/goal");
        m.locale_hint = Some(hint.into());
        h.send(m).await;
        assert_eq!(h.channel.nth_final(8 + n).await, want, "{hint}");
    }
    let mut m = h.message("/lang");
    m.locale_hint = Some("zh-TW".into());
    h.send(m).await;
    assert_eq!(
        h.channel.nth_final(12).await,
        "我現在用 繁體中文 回覆，因為這是你的應用程式使用的語言。"
    );
    h.stop().await;
}

/// Issue 33: the run, failure and command replies, one of each class, in every shipped
/// locale (the `/goal`, `/compact`, `/help`, `/lang`, bootstrap and cut-off ones have
/// their own tests): each is that locale's catalog sentence.
#[tokio::test]
async fn issue_33_each_run_failure_and_command_reply_in_every_shipped_locale() {
    let commands = "/bootstrap | /compact | /context | /goal | /help | /lang | /memory | /models | /new | /status | /stop";
    for tag in shipped_locales() {
        let tag = tag.as_str();
        let text = catalog_text(tag);
        let mut o = Options::default().notification_locale(tag);
        o.sim.models = vec![SimModel::new("gpt-4")];
        o.sim.memory_facts = vec!["likes tea".into()];
        let h = Harness::with(o).await;
        let mut finals = Finals {
            tag,
            expected: Vec::new(),
        };
        finals
            .check(&h, "/status", text(msg::CMD_STATUS_NONE, &[]))
            .await;
        finals
            .check(&h, "/stop", text(msg::CMD_STOP_NONE, &[]))
            .await;
        let unknown = [
            ("command", Arg::Str("/nosuch")),
            ("commands", Arg::Str(commands)),
        ];
        finals
            .check(&h, "/nosuch", text(msg::CMD_UNKNOWN, &unknown))
            .await;
        let models = [("models", Arg::Str("• gpt-4"))];
        finals
            .check(&h, "/models", text(msg::CMD_MODELS_LIST, &models))
            .await;
        let facts = [("count", Arg::Num(1))];
        finals
            .check(&h, "/memory", text(msg::CMD_MEMORY_FACTS, &facts))
            .await;
        h.sim.push_fault(
            Fault::on(Route::CreateThread)
                .reply(Reply::html(503))
                .sticky(),
        );
        finals
            .check(&h, "hello?", text(msg::ERR_GATEWAY_UNAVAILABLE, &[]))
            .await;
        h.sim.clear_faults();
        // Busy past the waits for a run in flight (none is listed).
        h.sim.push_fault(
            Fault::on(Route::RunStream)
                .reply(Reply::run_busy("x"))
                .sticky(),
        );
        finals
            .check(&h, "are you there?", text(msg::RUN_BUSY, &[]))
            .await;
        h.sim.clear_faults();
        h.sim.script_next_run(Script::with_answer(""));
        finals
            .check(&h, "say nothing", text(msg::RUN_NO_RESPONSE, &[]))
            .await;
        let boom = Failure::Error {
            message: "boom".into(),
            name: "RuntimeError".into(),
        };
        h.sim
            .script_next_run(Script::with_answer("x").chunks(1).fail_after_chunk(0, boom));
        finals.check(&h, "fail", text(msg::RUN_FAILED, &[])).await;
        let thread = h.only_thread();
        let active = [("thread", Arg::Str(&thread))];
        finals
            .check(&h, "/status", text(msg::CMD_STATUS_ACTIVE, &active))
            .await;
        h.sim
            .script_next_run(Script::with_answer("Here.").present_files([
                "/mnt/user-data/outputs/a.pdf",
                "/mnt/user-data/outputs/b.png",
            ]));
        let names = list_in(tag, &["a.pdf", "b.png"]);
        let files = [("count", Arg::Num(2)), ("names", Arg::Str(&names))];
        let created = text(msg::RUN_FILES_CREATED, &files);
        finals
            .check(&h, "the files?", format!("Here.\n\n{created}"))
            .await;
        // A second message while the first runs waits, told so, then starts with the
        // working notice. Its run writes nothing until the notice showed: the notice is a
        // partial update, which a first word arriving sooner would rightly replace.
        h.sim.script_next_run(
            Script::with_answer("first")
                .chunks(1)
                .hold(Hold::UntilFinished),
        );
        h.sim
            .script_next_run(Script::with_answer("second").chunks(1).wait_after_chunk(0));
        let (queued, thinking) = (text(msg::RUN_QUEUED, &[]), text(msg::RUN_THINKING, &[]));
        // Earlier turns may have shown either notice already: count them.
        let shown = |calls: &[Call], text: &str| calls.iter().filter(|c| c.text() == text).count();
        let calls = h.channel.calls();
        let (queued_before, thinking_before) = (shown(&calls, &queued), shown(&calls, &thinking));
        let started = h.streamed_runs();
        h.say("one").await;
        h.wait_until_sent(started + 1, "/runs/stream").await;
        h.say("two").await;
        h.channel
            .wait_for("the queued notice", |calls| {
                shown(calls, &queued) > queued_before
            })
            .await;
        h.finish_runs();
        h.channel
            .wait_for("the working notice", |calls| {
                shown(calls, &thinking) > thinking_before
            })
            .await;
        h.wait_until_sent(started + 2, "/runs/stream").await;
        h.finish_runs();
        finals
            .expected
            .extend(["first".to_owned(), "second".to_owned()]);
        let all = h.channel.wait_finals(finals.expected.len()).await;
        assert_eq!(all, finals.expected, "{tag}");
        finals.check(&h, "/new", text(msg::CMD_NEW_DONE, &[])).await;
        h.stop().await;
    }
}
