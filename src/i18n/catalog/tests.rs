//! Catalog tests: every id in every shipped locale with the same placeables, negotiation,
//! fallback, overrides and syntax errors.

use std::collections::BTreeSet;

use super::*;
use crate::i18n::msg;

fn catalogs() -> Catalogs {
    Catalogs::embedded().unwrap()
}

fn loc(c: &Catalogs, tag: &str) -> Locale {
    c.negotiate(tag).unwrap()
}

/// Every shipped catalog against `en-US`: each message and attribute present, none extra,
/// and the same variables message by message. One failure lists every difference.
#[test]
fn every_id_exists_in_every_shipped_locale_with_the_same_placeables() {
    let (_, base_source) = EMBEDDED[0];
    let base = placeables(base_source);
    let code_ids: BTreeSet<&str> = msg::ALL.iter().copied().collect();
    let catalog_ids: BTreeSet<&str> = base
        .keys()
        .map(String::as_str)
        .filter(|id| !id.contains('.'))
        .collect();
    assert_eq!(
        code_ids, catalog_ids,
        "en-US and the ids in code must list the same messages"
    );
    let mut problems = Vec::new();
    for (tag, source) in EMBEDDED {
        let other = placeables(source);
        for (id, vars) in &base {
            match other.get(id) {
                None => problems.push(format!("{tag}: {id} is missing")),
                Some(theirs) if theirs != vars => problems.push(format!(
                    "{tag}: {id} uses {} but en-US uses {}",
                    variables(theirs),
                    variables(vars)
                )),
                Some(_) => {}
            }
        }
        for id in other.keys().filter(|id| !base.contains_key(*id)) {
            problems.push(format!("{tag}: {id} is not in en-US"));
        }
    }
    assert!(
        problems.is_empty(),
        "the catalogs differ from en-US:\n{}",
        problems.join("\n")
    );
}

fn variables(vars: &BTreeSet<String>) -> String {
    let names: Vec<String> = vars.iter().map(|v| format!("${v}")).collect();
    format!("{{{}}}", names.join(", "))
}

#[test]
fn attributes_and_function_arguments_count_as_placeables() {
    let found = placeables(
        "files = { NUMBER($count) } files\n    .title = About { $name }\nplain = text\n",
    );
    let vars = |id: &str| -> Vec<&str> { found[id].iter().map(String::as_str).collect() };
    assert_eq!(vars("files"), ["count"]);
    assert_eq!(vars("files.title"), ["name"]);
    assert!(vars("plain").is_empty());
}

/// Every message of every shipped locale is its own: the locale's catalog has it (no
/// fallback to en-US), and its text is in the locale's writing (a han character in
/// Chinese, kana in Japanese) except the few with nothing to write in it.
#[test]
fn every_shipped_locale_says_every_message_in_its_own_writing() {
    let c = catalogs();
    let kana = |ch: char| ('\u{3040}'..='\u{30ff}').contains(&ch);
    let han = |ch: char| ('\u{4e00}'..='\u{9fff}').contains(&ch);
    // The separator is punctuation, and Japanese calls itself 日本語 (no kana).
    let exempt = [msg::LIST_SEPARATOR, msg::LOCALE_NAME];
    let mut problems = Vec::new();
    for locale in c.supported() {
        let writes: &dyn Fn(char) -> bool = match locale.language() {
            "zh" => &han,
            "ja" => &kana,
            _ => continue,
        };
        for id in msg::ALL {
            let text = c.text(locale, id, &[]);
            if !c.has_message(locale, id) {
                problems.push(format!("{locale}: {id} falls back to en-US"));
            } else if !exempt.contains(id) && !text.chars().any(writes) {
                problems.push(format!("{locale}: {id} is not written in {locale}: {text}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// zh-TW is Traditional Chinese as Taiwan writes it, not a character conversion of zh-CN:
/// no Simplified-only characters, and Taiwan's words (訊息, 檔案, 設定, 預設, 指令, 網路,
/// 程式, 支援, 伺服器, 字元) rather than the mainland's.
#[test]
fn zh_tw_is_traditional_chinese_in_taiwans_words() {
    const SIMPLIFIED_ONLY: &str = "这们对话时没说设为会发还让请应处务录记统网络档号证据达过进选择关启动态该与从无认识间问题执运户实现见页级输写读类错误删条个开标种经结给东语简体帮长变认";
    const MAINLAND_WORDS: &[&str] = &[
        "信息",
        "默認",
        "文件",
        "網絡",
        "程序",
        "設置",
        "支持",
        "用戶",
        "服務器",
        "鏈接",
        "視頻",
        "智能",
        "數據",
        "質量",
        "登錄",
        "文本",
        "命令",
        "字符",
        "上下文",
        "菜單",
        "創建",
        "獲取",
        "回復",
        "聯繫",
        "賬號",
        "屏幕",
        "激活",
        "運行",
    ];
    let source = EMBEDDED
        .iter()
        .find(|(tag, _)| *tag == "zh-TW")
        .map(|(_, source)| *source)
        .unwrap();
    let mut problems = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let simplified: String = line
            .chars()
            .filter(|c| SIMPLIFIED_ONLY.contains(*c))
            .collect();
        if !simplified.is_empty() {
            problems.push(format!("line {}: Simplified {simplified}: {line}", n + 1));
        }
        for word in MAINLAND_WORDS.iter().filter(|w| line.contains(**w)) {
            problems.push(format!("line {}: mainland word {word}: {line}", n + 1));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn negotiation_matches_by_language_and_chinese_by_script() {
    let c = catalogs();
    for (tag, want) in [
        // Simplified Chinese: no script and a region that writes it, or script Hans.
        ("zh", "zh-CN"),
        ("zh-CN", "zh-CN"),
        ("zh-Hans", "zh-CN"),
        ("zh-hans", "zh-CN"),
        ("zh-Hans-CN", "zh-CN"),
        ("zh-Hans-SG", "zh-CN"),
        ("zh-Hans-TW", "zh-CN"),
        ("zh_CN.UTF-8", "zh-CN"),
        ("zh-SG", "zh-CN"),
        ("zh-MY", "zh-CN"),
        // Traditional Chinese: script Hant, or Taiwan, Hong Kong, Macau.
        ("zh-TW", "zh-TW"),
        ("zh-tw", "zh-TW"),
        ("zh_TW.Big5", "zh-TW"),
        ("zh-Hant", "zh-TW"),
        ("zh-hant", "zh-TW"),
        ("zh-Hant-TW", "zh-TW"),
        ("zh-Hant-HK", "zh-TW"),
        ("zh-Hant-CN", "zh-TW"),
        ("zh-HK", "zh-TW"),
        ("zh-MO", "zh-TW"),
        ("zh_HK.UTF-8", "zh-TW"),
        // A tag with a trailing part that does not parse: its leading part counts.
        ("zh-hant-raw", "zh-TW"),
        ("zh-hans-raw", "zh-CN"),
        // Japanese.
        ("ja", "ja-JP"),
        ("ja-JP", "ja-JP"),
        ("JA-jp", "ja-JP"),
        ("ja_JP.UTF-8", "ja-JP"),
        ("ja-Jpan-JP", "ja-JP"),
        // Everything else as before: by language.
        ("en-GB", "en-US"),
        ("en", "en-US"),
        ("EN-us", "en-US"),
    ] {
        assert_eq!(
            c.negotiate(tag).map(|l| l.to_string()).as_deref(),
            Some(want),
            "{tag}"
        );
    }
    assert!(c.negotiate("fr-FR").is_none());
    assert!(c.negotiate("ko").is_none());
    assert!(c.negotiate("").is_none());
    assert!(c.negotiate("not a tag!").is_none());
}

/// An added locale of a shipped language: its own tag and region win, the script still
/// decides between Simplified and Traditional.
#[test]
fn an_added_regional_locale_wins_its_region() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("zh-HK")).unwrap();
    std::fs::write(
        dir.path().join("zh-HK/bridge.ftl"),
        "locale-name = 繁體中文（香港）\n",
    )
    .unwrap();
    let c = Catalogs::load(Some(dir.path())).unwrap();
    for (tag, want) in [
        ("zh-HK", "zh-HK"),
        ("zh-Hant-HK", "zh-HK"),
        ("zh-Hant", "zh-TW"),
        ("zh-MO", "zh-TW"),
        ("zh", "zh-CN"),
    ] {
        assert_eq!(c.negotiate(tag).unwrap().to_string(), want, "{tag}");
    }
}

#[test]
fn formatting_has_no_isolation_marks_and_selects_plurals() {
    let c = catalogs();
    let en = loc(&c, "en-US");
    let one = c.text(
        &en,
        msg::RUN_FILES_CREATED,
        &[("count", Arg::Num(1)), ("names", Arg::Str("a.pdf"))],
    );
    assert_eq!(one, "Created a file: 📎 a.pdf");
    let names = c.join_list(&en, &["a", "b"]);
    let two = c.text(
        &en,
        msg::RUN_FILES_CREATED,
        &[("count", Arg::Num(2)), ("names", Arg::Str(&names))],
    );
    assert_eq!(two, "Created 2 files: 📎 a, b");
    assert!(!two.contains('\u{2068}') && !two.contains('\u{2069}'));
    let zh = loc(&c, "zh-CN");
    let names = c.join_list(&zh, &["a", "b"]);
    assert_eq!(
        c.text(
            &zh,
            msg::RUN_FILES_CREATED,
            &[("count", Arg::Num(2)), ("names", Arg::Str(&names))]
        ),
        "已创建 2 个文件：📎 a、b"
    );
}

/// Japanese and Chinese have one plural form: a count of one takes the `other` variant,
/// and only an exact `[0]` is set apart.
#[test]
fn japanese_and_traditional_chinese_select_their_variants() {
    let c = catalogs();
    let (ja, tw) = (loc(&c, "ja-JP"), loc(&c, "zh-TW"));
    let count = |n| [("count", Arg::Num(n))];
    for (locale, zero, one) in [
        (
            &ja,
            "あなたについては、まだ何も覚えていません。",
            "あなたについて1件のことを覚えています。",
        ),
        (
            &tw,
            "我還沒有記住任何關於你的事。",
            "我記得 1 件關於你的事。",
        ),
    ] {
        assert_eq!(c.text(locale, msg::CMD_MEMORY_FACTS, &count(0)), zero);
        assert_eq!(c.text(locale, msg::CMD_MEMORY_FACTS, &count(1)), one);
    }
    let names = c.join_list(&ja, &["a.pdf", "b.png"]);
    assert_eq!(
        c.text(
            &ja,
            msg::RUN_FILES_CREATED,
            &[("count", Arg::Num(2)), ("names", Arg::Str(&names))]
        ),
        "ファイルを2件作成しました：📎 a.pdf、b.png"
    );
    let continuing = |locale, max| {
        c.text(
            locale,
            msg::GOAL_CONTINUING,
            &[("n", Arg::Num(2)), ("max", Arg::Num(max))],
        )
    };
    assert_eq!(continuing(&tw, 0), "↻ 繼續朝目標努力（第 2 次自動接續）");
    assert_eq!(
        continuing(&tw, 8),
        "↻ 繼續朝目標努力（第 2 次自動接續，共 8 次）"
    );
    assert_eq!(
        continuing(&ja, 0),
        "↻ 引き続き目標に取り組んでいます（自動継続 2 回目）"
    );
    let stopped = c.text(
        &ja,
        msg::GOAL_STATUS_STOPPED,
        &[
            ("objective", Arg::Str("launch")),
            ("reason", Arg::Str("needs_user_input")),
            ("n", Arg::Num(3)),
            ("max", Arg::Num(8)),
        ],
    );
    assert!(
        stopped.contains("理由：続けるには、あなたからの情報が必要です。"),
        "{stopped}"
    );
}

#[test]
fn languages_go_by_their_own_names_and_lists_by_the_readers_separator() {
    let c = Catalogs::embedded().unwrap();
    let (en, zh) = (loc(&c, "en-US"), loc(&c, "zh-CN"));
    let (tw, ja) = (loc(&c, "zh-TW"), loc(&c, "ja-JP"));
    assert_eq!(c.locale_name(&en), "English");
    assert_eq!(c.locale_name(&zh), "简体中文");
    assert_eq!(c.locale_name(&tw), "繁體中文");
    assert_eq!(c.locale_name(&ja), "日本語");
    assert_eq!(c.join_list(&en, &["x", "y", "z"]), "x, y, z");
    assert_eq!(c.join_list(&zh, &["x", "y", "z"]), "x、y、z");
    assert_eq!(c.join_list(&ja, &["x", "y", "z"]), "x、y、z");
    assert_eq!(c.join_list::<&str>(&en, &[]), "");
    assert_eq!(
        c.supported_names(&en),
        "English (en-US), 简体中文 (zh-CN), 繁體中文 (zh-TW), 日本語 (ja-JP)"
    );
    assert_eq!(
        c.supported_names(&tw),
        "English (en-US)、简体中文 (zh-CN)、繁體中文 (zh-TW)、日本語 (ja-JP)"
    );
    assert_eq!(c.supported_list(), "en-US, zh-CN, zh-TW, ja-JP");
}

#[test]
fn an_override_directory_adds_locales_and_overrides_messages() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ko-KR")).unwrap();
    std::fs::write(
        dir.path().join("ko-KR/bridge.ftl"),
        "run-busy = 이 대화는 아직 처리 중입니다.\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("en-US")).unwrap();
    std::fs::write(
        dir.path().join("en-US/bridge.ftl"),
        "err-internal = Our own wording.\n",
    )
    .unwrap();
    let c = Catalogs::load(Some(dir.path())).unwrap();
    let ko = loc(&c, "ko");
    assert_eq!(
        c.text(&ko, msg::RUN_BUSY, &[]),
        "이 대화는 아직 처리 중입니다."
    );
    // Missing in ko-KR: falls back to en-US (and the override applies there).
    assert_eq!(c.text(&ko, msg::ERR_INTERNAL, &[]), "Our own wording.");
    assert!(!c.has_message(&ko, msg::ERR_INTERNAL));
    let en = loc(&c, "en-US");
    assert_eq!(
        c.text(&en, msg::RUN_NO_RESPONSE, &[]),
        "The agent finished without writing a reply."
    );
}

#[test]
fn a_syntax_error_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("de-DE")).unwrap();
    std::fs::write(
        dir.path().join("de-DE/bridge.ftl"),
        "run-busy = ok\n\nthis is not fluent\n",
    )
    .unwrap();
    let err = Catalogs::load(Some(dir.path())).unwrap_err();
    match err {
        I18nError::Syntax { path, line, .. } => {
            assert!(path.ends_with("de-DE/bridge.ftl"));
            assert_eq!(line, 3);
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn checking_a_directory_reports_placeable_drift_and_missing_messages() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ko-KR")).unwrap();
    std::fs::write(
        dir.path().join("ko-KR/bridge.ftl"),
        "run-busy = 처리 중입니다.\nno-such-id = x\n",
    )
    .unwrap();
    let warnings = check_dir(dir.path()).unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("no-such-id")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("messages are missing in ko-KR")),
        "{warnings:?}"
    );
    std::fs::write(
        dir.path().join("ko-KR/bridge.ftl"),
        "goal-status-active = 목표: { $goal }\n",
    )
    .unwrap();
    let errors = check_dir(dir.path()).unwrap_err();
    assert!(
        errors[0]
            .contains("goal-status-active uses the placeables {$goal} but en-US uses {$objective}"),
        "{errors:?}"
    );
}

#[test]
fn a_directory_that_is_not_a_tag_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("not a tag")).unwrap();
    assert!(matches!(
        Catalogs::load(Some(dir.path())),
        Err(I18nError::BadTag { .. })
    ));
}
