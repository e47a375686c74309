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

#[test]
fn every_id_exists_in_every_shipped_locale_with_the_same_placeables() {
    let (_, base_source) = EMBEDDED[0];
    let base = placeables(base_source);
    let code_ids: BTreeSet<&str> = msg::ALL.iter().copied().collect();
    let catalog_ids: BTreeSet<&str> = base.keys().map(String::as_str).collect();
    assert_eq!(
        code_ids, catalog_ids,
        "en-US and the ids in code must list the same messages"
    );
    for (tag, source) in EMBEDDED {
        let other = placeables(source);
        for (id, vars) in &base {
            let theirs = other.get(id).unwrap_or_else(|| panic!("{tag} lacks {id}"));
            assert_eq!(theirs, vars, "{tag} {id}: placeables differ from en-US");
        }
        assert_eq!(other.len(), base.len(), "{tag} has messages en-US lacks");
    }
}

#[test]
fn negotiation_matches_by_language() {
    let c = catalogs();
    for (tag, want) in [
        ("zh", "zh-CN"),
        ("zh-Hans", "zh-CN"),
        ("zh-Hans-SG", "zh-CN"),
        ("zh_CN.UTF-8", "zh-CN"),
        ("zh-SG", "zh-CN"),
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
    assert!(c.negotiate("").is_none());
    assert!(c.negotiate("not a tag!").is_none());
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

#[test]
fn languages_go_by_their_own_names_and_lists_by_the_readers_separator() {
    let c = Catalogs::embedded().unwrap();
    let (en, zh) = (loc(&c, "en-US"), loc(&c, "zh-CN"));
    assert_eq!(c.locale_name(&en), "English");
    assert_eq!(c.locale_name(&zh), "简体中文");
    assert_eq!(c.join_list(&en, &["x", "y", "z"]), "x, y, z");
    assert_eq!(c.join_list(&zh, &["x", "y", "z"]), "x、y、z");
    assert_eq!(c.join_list::<&str>(&en, &[]), "");
    assert_eq!(c.supported_names(&en), "English (en-US), 简体中文 (zh-CN)");
    assert_eq!(c.supported_names(&zh), "English (en-US)、简体中文 (zh-CN)");
}

#[test]
fn an_override_directory_adds_locales_and_overrides_messages() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ja-JP")).unwrap();
    std::fs::write(
        dir.path().join("ja-JP/bridge.ftl"),
        "run-busy = 会話はまだ処理中です。\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("en-US")).unwrap();
    std::fs::write(
        dir.path().join("en-US/bridge.ftl"),
        "err-internal = Our own wording.\n",
    )
    .unwrap();
    let c = Catalogs::load(Some(dir.path())).unwrap();
    let ja = loc(&c, "ja");
    assert_eq!(c.text(&ja, msg::RUN_BUSY, &[]), "会話はまだ処理中です。");
    // Missing in ja-JP: falls back to en-US (and the override applies there).
    assert_eq!(c.text(&ja, msg::ERR_INTERNAL, &[]), "Our own wording.");
    assert!(!c.has_message(&ja, msg::ERR_INTERNAL));
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
    std::fs::create_dir_all(dir.path().join("ja-JP")).unwrap();
    std::fs::write(
        dir.path().join("ja-JP/bridge.ftl"),
        "run-busy = 処理中です。\nno-such-id = x\n",
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
            .any(|w| w.contains("messages are missing in ja-JP")),
        "{warnings:?}"
    );
    std::fs::write(
        dir.path().join("ja-JP/bridge.ftl"),
        "goal-status-active = 目標: { $goal }\n",
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
