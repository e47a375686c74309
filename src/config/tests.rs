//! Unit tests of configuration loading: DeerFlow compatibility, `$NAME` expansion,
//! environment fallbacks, validation messages and redaction.

use std::collections::HashMap;

use super::*;

const DEERFLOW: &str = include_str!("../../tests/fixtures/deerflow-channels.yaml");

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn with_console(text: &str) -> String {
    text.replace("channels:\n", "channels:\n  console:\n    enabled: true\n")
}

fn errors_of(text: &str, env: &HashMap<String, String>) -> Vec<String> {
    match load_str(text, env) {
        Ok(_) => Vec::new(),
        Err(e) => e.errors(),
    }
}

#[test]
fn deerflow_example_block_parses_unchanged() {
    let parsed = parse(DEERFLOW, &env(&[])).unwrap();
    assert!(
        parsed.ignored.is_empty(),
        "nothing in DeerFlow's own blocks is unknown at parse level: {:?}",
        parsed.ignored
    );
    assert_eq!(
        parsed.raw.channels.langgraph_url.as_deref(),
        Some("http://localhost:8001/api")
    );
    assert_eq!(parsed.raw.channels.blocks.len(), 7);
    // Every channel is disabled, so the file is valid but has nothing to start.
    let errors = errors_of(DEERFLOW, &env(&[]));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("channels: no channel is enabled"),
        "{errors:?}"
    );
}

#[test]
fn deerflow_example_with_a_channel_enabled_is_valid() {
    let (settings, warnings) = load_str(
        &with_console(DEERFLOW),
        &env(&[("DEER_FLOW_INTERNAL_AUTH_TOKEN", "tok")]),
    )
    .unwrap();
    assert_eq!(settings.channels.len(), 1);
    assert_eq!(settings.channels[0].name, "console");
    assert_eq!(settings.session.assistant_id.as_deref(), Some("lead_agent"));
    assert_eq!(settings.session.config["recursion_limit"], 100);
    assert_eq!(settings.intake.inbound_queue_maxsize.get(), 1000);
    assert_eq!(settings.intake.max_concurrency.get(), 64);
    assert_eq!(settings.notification_locale, "en-US");
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn dollar_names_expand_and_unset_ones_matter_only_where_used() {
    let text = "channels:\n  gateway_url: ${GW}\n  console:\n    enabled: true\n    locale: $LOC\n  telegram:\n    enabled: false\n    bot_token: $NOT_SET\nbridge:\n  internal_token: $TOKEN\n";
    let (settings, _) = load_str(
        text,
        &env(&[
            ("GW", "http://gw:8001/"),
            ("LOC", "zh-CN"),
            ("TOKEN", "s3cret"),
        ]),
    )
    .unwrap();
    assert_eq!(settings.gateway.gateway_url, "http://gw:8001");
    assert_eq!(settings.channels[0].locale.as_deref(), Some("zh-CN"));
    assert_eq!(
        settings.gateway.internal_token.as_ref().map(|t| t.expose()),
        Some("s3cret")
    );

    let errors = errors_of(text, &env(&[("GW", "http://gw:8001")]));
    assert!(
        errors
            .contains(&"channels.console.locale: environment variable $LOC is not set".to_owned()),
        "{errors:?}"
    );
    assert!(
        errors
            .contains(&"bridge.internal_token: environment variable $TOKEN is not set".to_owned()),
        "{errors:?}"
    );
    assert!(
        !errors.iter().any(|e| e.contains("NOT_SET")),
        "a disabled channel's variable does not matter: {errors:?}"
    );
}

#[test]
fn a_literal_dollar_inside_a_value_is_not_a_reference() {
    let text = "channels:\n  console:\n    enabled: true\nbridge:\n  internal_token: pa$$word\n";
    let (settings, _) = load_str(text, &env(&[])).unwrap();
    assert_eq!(
        settings.gateway.internal_token.unwrap().expose(),
        "pa$$word"
    );
}

#[test]
fn config_beats_env_and_env_beats_defaults() {
    let text = "channels:\n  langgraph_url: http://config:1/api\n  console:\n    enabled: true\n";
    let e = env(&[
        ("DEER_FLOW_CHANNELS_LANGGRAPH_URL", "http://env:2/api"),
        ("DEER_FLOW_CHANNELS_GATEWAY_URL", "http://env:2"),
        ("DEER_FLOW_INTERNAL_AUTH_TOKEN", "from-env"),
    ]);
    let (s, warnings) = load_str(text, &e).unwrap();
    assert_eq!(s.gateway.langgraph_url, "http://config:1/api");
    assert_eq!(s.gateway.gateway_url, "http://env:2");
    assert_eq!(s.gateway.internal_token.unwrap().expose(), "from-env");
    assert!(warnings.is_empty());
    let (s, warnings) = load_str("channels:\n  console: {enabled: true}\n", &env(&[])).unwrap();
    assert_eq!(s.gateway.gateway_url, "http://localhost:8001");
    assert!(s.gateway.internal_token.is_none());
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("bridge.internal_token")),
        "{warnings:?}"
    );
}

#[test]
fn unknown_keys_warn_in_deerflow_blocks_and_fail_in_ours() {
    let text = "channels:\n  console:\n    enabled: true\n    colour: blue\n  session:\n    assistnt_id: x\n";
    let (_, warnings) = load_str(text, &env(&[])).unwrap();
    assert!(
        warnings.contains(&"channels.console.colour: unknown key, ignored".to_owned()),
        "{warnings:?}"
    );
    assert!(
        warnings.contains(&"channels.session.assistnt_id: unknown key, ignored".to_owned()),
        "{warnings:?}"
    );
    // A slip directly under `channels:` is no platform: warned of and ignored, as DeerFlow
    // ignores it; DeerFlow's own channels pass in silence until one is enabled.
    let text = "channels:\n  console: {enabled: true}\n  max_concurency: 8\n  sesion: {assistant_id: x}\n  buzz: {enabled: false, relay_url: wss://r}\n  github: {}\n";
    let (_, warnings) = load_str(text, &env(&[("DEER_FLOW_INTERNAL_AUTH_TOKEN", "t")])).unwrap();
    assert_eq!(
        warnings,
        [
            "channels.max_concurency: unknown key, ignored",
            "channels.sesion: unknown key, ignored",
        ]
    );
    // A known platform's block of the wrong shape is still an error.
    let errors = errors_of(
        "channels:\n  console: {enabled: true}\n  telegram: yes\n",
        &env(&[]),
    );
    assert!(errors[0].starts_with("channels.telegram: "), "{errors:?}");
    let errors = errors_of(
        "channels:\n  console: {enabled: true}\nbridge:\n  stor: x\n",
        &env(&[]),
    );
    assert!(
        errors[0].starts_with("bridge.stor: unknown field `stor`, expected one of `store`"),
        "{errors:?}"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = "channels:\n  inbound_queue_maxsize: -3\n  max_concurrency: 0\n  console: {enabled: true}\nbridge:\n  admin_listen: nowhere\n";
    let errors = errors_of(text, &env(&[]));
    assert_eq!(
        errors,
        vec![
            "channels.inbound_queue_maxsize: expected a positive integer no larger than 1000000, got -3",
            "channels.max_concurrency: expected a positive integer no larger than 10000, got 0",
            "bridge.admin_listen: expected an address such as 127.0.0.1:9464, got \"nowhere\"",
        ]
    );
}

#[test]
fn allowed_users_that_are_not_a_list_of_ids_are_refused() {
    // Issue 27: each used to pass (the first allowing nobody, the others one odd id).
    for value in ["[{id: 1}]", "12345", "abc"] {
        let text =
            format!("channels:\n  console:\n    enabled: true\n    allowed_users: {value}\n");
        let error = load_str(&text, &env(&[])).unwrap_err();
        assert!(
            error
                .errors()
                .iter()
                .any(|e| e.starts_with("channels.console.allowed_users:")),
            "{value}: {:?}",
            error.errors()
        );
    }
    let text = "channels:\n  console:\n    enabled: true\n    allowed_users: [12345, u2]\n";
    let (s, warnings) = load_str(text, &env(&[])).unwrap();
    assert!(s.channels[0].allowed_users.allows("12345"));
    assert!(!s.channels[0].allowed_users.allows("1"));
    // The console does not check it: said, not silently ignored.
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("channels.console.allowed_users:") && w.contains("no effect")),
        "{warnings:?}"
    );
}

#[test]
fn secrets_never_appear_in_debug_or_printed_config() {
    let text = "channels:\n  console: {enabled: true}\nbridge:\n  internal_token: TOPSECRET-123\n  store: postgres://user:PGPASS@db/x\n";
    let raw = format!("{:?}", crate::config::parse(text, &env(&[])).unwrap().raw);
    assert!(!raw.contains("TOPSECRET"), "{raw}");
    let (settings, _) = load_str(text, &env(&[])).unwrap();
    let debug = format!("{settings:?}");
    let printed = serde_yaml_ng::to_string(&settings).unwrap();
    for out in [&debug, &printed] {
        assert!(!out.contains("TOPSECRET"), "{out}");
        assert!(!out.contains("PGPASS"), "{out}");
        assert!(out.contains("<redacted>"), "{out}");
    }
}

#[test]
fn an_empty_or_null_section_is_empty() {
    let (s, _) = load_str(
        "channels:\n  console: {enabled: true}\nbridge:\nchannel_connections:\n",
        &env(&[]),
    )
    .unwrap();
    assert_eq!(s.admin_listen.to_string(), "127.0.0.1:9464");
}

#[test]
fn traditional_chinese_and_japanese_tags_are_valid_locales() {
    for tag in [
        "zh-TW",
        "zh-Hant",
        "zh-Hant-HK",
        "zh-HK",
        "zh_TW",
        "ja",
        "ja-JP",
    ] {
        let text = format!(
            "channels:\n  console: {{enabled: true, locale: {tag}}}\nchannel_connections:\n  notification_locale: {tag}\n"
        );
        let (settings, _) =
            load_str(&text, &env(&[])).unwrap_or_else(|errors| panic!("{tag}: {errors:?}"));
        assert_eq!(settings.notification_locale, tag);
        assert_eq!(settings.channels[0].locale.as_deref(), Some(tag));
    }
}

#[test]
fn locales_must_have_a_catalog_and_a_catalog_directory_is_checked() {
    let errors = errors_of(
        "channels:\n  console: {enabled: true, locale: fr-FR}\nchannel_connections:\n  notification_locale: de-DE\n",
        &env(&[]),
    );
    assert!(errors.contains(&"channel_connections.notification_locale: there is no catalog for \"de-DE\"; supported: en-US, zh-CN, zh-TW, ja-JP".to_owned()), "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("channels.console.locale: there is no catalog for \"fr-FR\"")),
        "{errors:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("de-DE")).unwrap();
    std::fs::write(
        dir.path().join("de-DE/bridge.ftl"),
        "run-busy = Beschäftigt.\n",
    )
    .unwrap();
    let text = format!(
        "channels:\n  console: {{enabled: true}}\nchannel_connections:\n  notification_locale: de\nbridge:\n  locales_dir: {}\n",
        dir.path().display()
    );
    let (settings, warnings) = load_str(&text, &env(&[])).unwrap();
    assert_eq!(settings.notification_locale, "de");
    assert!(
        warnings.iter().any(|w| w.contains("missing in de-DE")),
        "{warnings:?}"
    );
    std::fs::write(dir.path().join("de-DE/bridge.ftl"), "run-busy = {\n").unwrap();
    let errors = errors_of(&text, &env(&[]));
    assert!(
        errors.iter().any(|e| e.starts_with("bridge.locales_dir: ")
            && e.contains("de-DE/bridge.ftl:2: Fluent syntax error")),
        "{errors:?}"
    );
}

#[test]
fn issue_13_auth_disabled_means_single_user_deerflow() {
    let text = with_console("channels:\n");
    let (s, _) = load_str(&text, &env(&[])).unwrap();
    assert!(!s.single_user);
    for on in ["1", "true"] {
        let (s, _) = load_str(&text, &env(&[("DEER_FLOW_AUTH_DISABLED", on)])).unwrap();
        assert!(s.single_user, "{on}");
    }
    let (s, _) = load_str(&text, &env(&[("DEER_FLOW_AUTH_DISABLED", "0")])).unwrap();
    assert!(!s.single_user);
}

#[test]
fn issue_13_busy_policy_and_queue_bound_per_channel() {
    let (s, _) = load_str(&with_console("channels:\n"), &env(&[])).unwrap();
    assert_eq!(s.channels[0].queueing, crate::policy::Queueing::default());
    let text = "channels:\n  console:\n    enabled: true\n    busy_policy: reject\n    max_queued_per_conversation: 0\n";
    let (s, _) = load_str(text, &env(&[])).unwrap();
    assert_eq!(
        s.channels[0].queueing,
        crate::policy::Queueing {
            policy: crate::policy::BusyPolicy::Reject,
            max_queued: 0
        }
    );
    let text = "channels:\n  console:\n    enabled: true\n    busy_policy: pigeon\n    max_queued_per_conversation: -1\n";
    let errors = errors_of(text, &env(&[]));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with("channels.console.busy_policy: expected queue or reject"));
    assert!(errors[1].starts_with(
        "channels.console.max_queued_per_conversation: expected a whole number from 0 to 1000"
    ));
}

#[test]
fn issue_13_conversation_ttl_days() {
    let (s, _) = load_str(&with_console("channels:\n"), &env(&[])).unwrap();
    assert_eq!(s.conversation_ttl, crate::retention::DEFAULT_TTL);
    let text = with_console("channels:\nbridge:\n  conversation_ttl_days: 0.5\n");
    let (s, _) = load_str(&text, &env(&[])).unwrap();
    assert_eq!(s.conversation_ttl, std::time::Duration::from_secs(43_200));
    let text = with_console("channels:\nbridge:\n  conversation_ttl_days: 0\n");
    let errors = errors_of(&text, &env(&[]));
    assert_eq!(
        errors,
        [
            "bridge.conversation_ttl_days: expected a number of days from 0.042 (an hour) to 3650, got 0"
        ]
    );
}

#[test]
fn issue_33_the_admin_token_is_off_by_default_long_enough_and_never_printed() {
    let (s, _) = load_str(&with_console("channels:\n"), &env(&[])).unwrap();
    assert!(
        s.admin_token.is_none(),
        "no operator endpoints unless asked for"
    );
    let text = with_console("channels:\nbridge:\n  admin_token: $ADMIN\n");
    let (s, _) = load_str(&text, &env(&[("ADMIN", "0123456789abcdef-OPERATOR")])).unwrap();
    assert_eq!(
        s.admin_token.as_ref().map(|t| t.expose()),
        Some("0123456789abcdef-OPERATOR")
    );
    let printed = crate::config::printable(&s).unwrap();
    assert!(printed.contains("admin_token: <redacted>"), "{printed}");
    assert!(!printed.contains("OPERATOR"), "{printed}");
    let (s, _) = load_str(&text, &env(&[("ADMIN", "")])).unwrap();
    assert!(s.admin_token.is_none(), "an empty token is no token");
    let errors = errors_of(&text, &env(&[("ADMIN", "short-SECRET")]));
    assert_eq!(
        errors,
        ["bridge.admin_token: expected at least 16 characters (e.g. openssl rand -hex 32)"]
    );
}

#[test]
fn issue_33_max_event_age_with_a_channels_own() {
    use std::time::Duration;
    let (s, _) = load_str(&with_console("channels:\n"), &env(&[])).unwrap();
    assert_eq!(s.max_event_age, Duration::from_secs(3600));
    assert_eq!(s.channels[0].max_event_age, Duration::from_secs(3600));
    // The bridge's applies to every channel without its own; 0 turns the guard off.
    let text = "channels:\n  console:\n    enabled: true\n    max_event_age_seconds: 0\nbridge:\n  max_event_age_seconds: 600\n";
    let (s, _) = load_str(text, &env(&[])).unwrap();
    assert_eq!(s.max_event_age, Duration::from_secs(600));
    assert_eq!(s.channels[0].max_event_age, Duration::ZERO);
    let text = with_console("channels:\nbridge:\n  max_event_age_seconds: 90.5\n");
    let (s, _) = load_str(&text, &env(&[])).unwrap();
    assert_eq!(s.channels[0].max_event_age, Duration::from_secs_f64(90.5));
    let text = "channels:\n  console:\n    enabled: true\n    max_event_age_seconds: 30\nbridge:\n  max_event_age_seconds: -1\n";
    assert_eq!(
        errors_of(text, &env(&[])),
        [
            "bridge.max_event_age_seconds: expected 0 (off) or a number of seconds from 60 to 604800, got -1",
            "channels.console.max_event_age_seconds: expected 0 (off) or a number of seconds from 60 to 604800, got 30",
        ]
    );
}

#[test]
fn issue_19_final_retry_hours() {
    let (s, _) = load_str(&with_console("channels:\n"), &env(&[])).unwrap();
    assert_eq!(s.final_retry, std::time::Duration::from_secs(6 * 3600));
    let text = with_console("channels:\nbridge:\n  final_retry_hours: 0.5\n");
    let (s, _) = load_str(&text, &env(&[])).unwrap();
    assert_eq!(s.final_retry, std::time::Duration::from_secs(1800));
    for bad in ["0", "-1", "1000"] {
        let text = with_console(&format!("channels:\nbridge:\n  final_retry_hours: {bad}\n"));
        let errors = errors_of(&text, &env(&[]));
        assert_eq!(
            errors,
            [format!(
                "bridge.final_retry_hours: expected a number of hours from 0.017 (a minute) to 168, got {bad}"
            )]
        );
    }
}

/// A lease under 12 s is a warning where replicas share the store (PostgreSQL), and
/// nothing on SQLite, which one process opens.
#[test]
fn a_short_lease_on_a_shared_store_is_warned_about() {
    let warned = |store: &str, lease: &str| {
        let text = with_console(&format!(
            "channels:\nbridge:\n  store: {store}\n  store_lease_seconds: {lease}\n"
        ));
        let (_, warnings) = load_str(&text, &env(&[])).unwrap();
        let lease_warnings: Vec<String> = warnings
            .into_iter()
            .filter(|w| w.starts_with("bridge.store_lease_seconds:"))
            .collect();
        lease_warnings
    };
    let postgres = "postgres://bridge:hunter2@db.internal/bridge";
    let warnings = warned(postgres, "8");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("bridge.store_lease_seconds: 8 s on a shared store is under 12 s"),
        "{warnings:?}"
    );
    assert!(!warnings[0].contains("hunter2"), "{warnings:?}");
    assert_eq!(warned(postgres, "11.5").len(), 1);
    assert!(warned(postgres, "12").is_empty());
    assert!(warned("sqlite:///var/lib/im-bridge/state.db", "5").is_empty());
}

#[test]
fn the_store_lease_is_a_setting_from_5_to_300_seconds() {
    use std::time::Duration;
    let (s, _) = load_str(&with_console("channels:\n"), &env(&[])).unwrap();
    assert_eq!(s.store_lease, Duration::from_secs(15));
    for (value, lease) in [("5", 5.0), ("7.5", 7.5), ("300", 300.0)] {
        let text = with_console(&format!(
            "channels:\nbridge:\n  store_lease_seconds: {value}\n"
        ));
        let (s, _) = load_str(&text, &env(&[])).unwrap();
        assert_eq!(s.store_lease, Duration::from_secs_f64(lease));
    }
    for bad in ["4.9", "0", "-15", "301", ".inf"] {
        let text = with_console(&format!(
            "channels:\nbridge:\n  store_lease_seconds: {bad}\n"
        ));
        let got = if bad == ".inf" { "inf" } else { bad };
        assert_eq!(
            errors_of(&text, &env(&[])),
            [format!(
                "bridge.store_lease_seconds: expected a number of seconds from 5 to 300, got {got}"
            )]
        );
    }
    // A value of the wrong type is an error at the key, beside the file's other problems.
    let text = "channels:\n  console: {enabled: true}\nbridge:\n  store_lease_seconds: [15]\n  max_reply_messages: 0\n";
    let errors = errors_of(text, &env(&[]));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("bridge.store_lease_seconds: invalid type: sequence"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("bridge.max_reply_messages:"),
        "{errors:?}"
    );
}

#[test]
fn issue_27_printed_settings_hide_url_passwords() {
    let text = "channels:\n  gateway_url: https://ops:GWPASS@gateway.example:8001\n  langgraph_url: http://lg:LGPASS@gateway.example:8001/api\n  console: {enabled: true}\n";
    let (settings, _) = load_str(text, &env(&[])).unwrap();
    let printed = crate::config::printable(&settings).unwrap();
    for password in ["GWPASS", "LGPASS"] {
        assert!(!printed.contains(password), "{printed}");
    }
    // The rest of the URL stays, so the operator sees which Gateway it is.
    assert!(printed.contains("gateway.example:8001"), "{printed}");
    assert!(printed.contains("ops:"), "{printed}");
}

#[test]
fn issue_27_every_problem_is_reported_in_one_pass_type_errors_included() {
    // Two values of the wrong type, and two bad values of the right type: a type error
    // used to hide everything after it.
    let text = "channels:\n  max_concurrency: [1]\n  inbound_queue_maxsize: -3\n  console: {enabled: true}\nbridge:\n  admin_listen: nowhere\n  store: [1]\n";
    let errors = load_str(text, &env(&[])).unwrap_err().errors();
    for path in [
        "channels.max_concurrency:",
        "bridge.store:",
        "channels.inbound_queue_maxsize:",
        "bridge.admin_listen:",
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(path)),
            "{path} missing from {errors:#?}"
        );
    }
}

#[test]
fn issue_32_the_secret_key_is_read_from_the_environment_and_never_printed() {
    let text = with_console("channels:\n");
    let (s, _) = load_str(&text, &env(&[])).unwrap();
    assert!(s.secret_key.is_none());
    let key = "ZmFrZS1rZXktZm9yLXRlc3RzLW9ubHktMzItYnl0ZXM="; // 32 bytes
    let (s, _) = load_str(&text, &env(&[("IM_BRIDGE_SECRET_KEY", key)])).unwrap();
    assert!(s.secret_key.is_some());
    let printed = printable(&s).unwrap();
    assert!(!printed.contains(key), "{printed}");
    assert!(printed.contains("secret_key: <redacted>"), "{printed}");
    // A malformed key is an error naming the variable, never echoing it.
    for bad in ["c2hvcnQ=", "not base64 at all!"] {
        let errors = errors_of(&text, &env(&[("IM_BRIDGE_SECRET_KEY", bad)]));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("IM_BRIDGE_SECRET_KEY: expected the base64 of 32"),
            "{errors:?}"
        );
        assert!(!errors[0].contains(bad), "{errors:?}");
    }
}

#[test]
fn issue_12_an_enabled_platform_without_its_adapter_is_an_error_only_when_im_bridge_has_it() {
    let known = ["telegram", "wechat"];
    let error = super::settings::absent_adapter("channels.wechat", "wechat", &known).unwrap_err();
    assert_eq!(
        error.to_string(),
        "channels.wechat: this build of im-bridge has no wechat adapter; rebuild with the wechat feature, or set enabled: false"
    );
    let warning = super::settings::absent_adapter("channels.buzz", "buzz", &known).unwrap();
    assert_eq!(
        warning,
        "channels.buzz: enabled, but im-bridge has no buzz adapter; it will not start here"
    );
}

#[test]
fn issue_33_rate_budget_adjustments_per_channel() {
    let text = "channels:\n  console:\n    enabled: true\n    rate_budgets:\n      bot: {per_second: 10, burst: 4}\n      card_updates: {per_second: 0.5}\n";
    let (s, _) = load_str(text, &env(&[])).unwrap();
    assert_eq!(
        s.channels[0].rate_budgets,
        [
            crate::budgets::BudgetOverride {
                name: "bot".into(),
                burst: Some(4),
                per_second: Some(10.0),
            },
            crate::budgets::BudgetOverride {
                name: "card_updates".into(),
                burst: None,
                per_second: Some(0.5),
            },
        ]
    );
    let text = "channels:\n  console:\n    enabled: true\n    rate_budgets:\n      bot: {per_second: 0, burst: 0}\n      other: {per_minute: 3}\n";
    let errors = errors_of(text, &env(&[]));
    assert!(
        errors[0].starts_with(
            "channels.console.rate_budgets.other.per_minute: unknown field `per_minute`"
        ),
        "{errors:?}"
    );
    let text = "channels:\n  console:\n    enabled: true\n    rate_budgets:\n      bot: {per_second: 0, burst: 0}\n";
    let errors = errors_of(text, &env(&[]));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0]
            .starts_with("channels.console.rate_budgets.bot.per_second: expected writes a second"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with(
            "channels.console.rate_budgets.bot.burst: expected a whole number from 1 to 1000000"
        ),
        "{errors:?}"
    );
}
