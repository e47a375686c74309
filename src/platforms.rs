//! The platform registry: the one place in the daemon that names chat platforms.
//!
//! Each adapter crate exports a [`Platform`]; this list holds the ones compiled in, one
//! line and one cargo feature each. Configuration validation, `check-config` and the
//! daemon's channel building (`crate::channels`) iterate it; nothing else in `src/` names a
//! platform (a test in `tests/source_rules.rs` checks that). The registry depends on no
//! other module of the daemon, so every module may read it.

use im_bridge_channel::Platform;

/// The platforms this build serves, in the order their channels start.
pub const PLATFORMS: &[&dyn Platform] = &[
    #[cfg(feature = "console")]
    &im_bridge_console::ConsolePlatform,
    #[cfg(feature = "telegram")]
    &im_bridge_telegram::PLATFORM,
    #[cfg(feature = "feishu")]
    &im_bridge_feishu::PLATFORM,
    #[cfg(feature = "dingtalk")]
    &im_bridge_dingtalk::PLATFORM,
    #[cfg(feature = "qq")]
    &im_bridge_qq::PLATFORM,
    #[cfg(feature = "discord")]
    &im_bridge_discord::PLATFORM,
    #[cfg(feature = "slack")]
    &im_bridge_slack::PLATFORM,
    #[cfg(feature = "wecom")]
    &im_bridge_wecom::PLATFORM,
    #[cfg(feature = "wechat")]
    &im_bridge_wechat::PLATFORM,
];

/// Every platform im-bridge has (or plans) an adapter for, compiled in or not: enabling one
/// this build lacks is an error that says so, instead of a silent no-op.
pub const KNOWN_PLATFORMS: &[&str] = &[
    "console", "telegram", "feishu", "dingtalk", "qq", "discord", "slack", "wecom", "wechat",
];

/// The compiled-in platform called `name`.
pub fn find(name: &str) -> Option<&'static dyn Platform> {
    PLATFORMS.iter().copied().find(|p| p.name() == name)
}

/// The platform `im-bridge demo` chats on: the terminal.
pub const DEMO_PLATFORM: &str = "console";

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::config::{Settings, load_str};

    fn load(text: &str) -> Result<(Settings, Vec<String>), Vec<String>> {
        load_str(text, &HashMap::<String, String>::new()).map_err(|e| e.errors())
    }

    #[test]
    fn issue_12_each_platform_is_listed_once_and_known() {
        let mut names: Vec<&str> = PLATFORMS.iter().map(|p| p.name()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a platform is listed twice: {names:?}");
        for name in names {
            assert!(
                KNOWN_PLATFORMS.contains(&name),
                "{name} is not in KNOWN_PLATFORMS"
            );
            assert!(find(name).is_some());
        }
        assert!(find("myspace").is_none());
    }

    #[test]
    fn issue_12_unknown_missing_and_disabled_platforms() {
        // A platform im-bridge has no adapter for at all: a warning, it does not start.
        let (settings, warnings) =
            load("channels:\n  console: {enabled: true}\n  myspace: {enabled: true}\n").unwrap();
        assert_eq!(settings.channels.len(), 1);
        assert!(
            warnings.iter().any(|w| w
                .starts_with("channels.myspace: enabled, but im-bridge has no myspace adapter")),
            "{warnings:?}"
        );
        // A platform this build lacks: an error naming the block and the feature (when a
        // build lacks one; `config::tests` checks the rule itself in every build).
        let Some(missing) = KNOWN_PLATFORMS.iter().find(|name| find(name).is_none()) else {
            return;
        };
        let errors = load(&format!(
            "channels:\n  console: {{enabled: true}}\n  {missing}: {{enabled: true}}\n"
        ))
        .unwrap_err();
        assert_eq!(
            errors,
            [format!(
                "channels.{missing}: this build of im-bridge has no {missing} adapter; rebuild with the {missing} feature, or set enabled: false"
            )]
        );
        // A disabled block is not validated: its keys are DeerFlow's business.
        let (settings, _) = load(&format!(
            "channels:\n  console: {{enabled: true}}\n  {missing}: {{enabled: false, app_id: [1, 2]}}\n"
        ))
        .unwrap();
        assert_eq!(settings.channels.len(), 1);
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn issue_12_an_adapters_issues_keep_their_key_paths() {
        let text = "channels:\n  telegram:\n    enabled: true\n    bot_token: not-a-token\n    mode: pigeon\n    surprise: 1\n    webhook: {listen: 3}\n";
        let errors = load(text).unwrap_err();
        let paths: Vec<&str> = errors
            .iter()
            .map(|e| e.split_once(':').map_or(e.as_str(), |(p, _)| p))
            .collect();
        assert_eq!(paths, ["channels.telegram.webhook.listen"], "{errors:?}");
        let text = "channels:\n  telegram:\n    enabled: true\n    bot_token: not-a-token\n    mode: pigeon\n    surprise: 1\n";
        let errors = load(text).unwrap_err();
        let paths: Vec<&str> = errors
            .iter()
            .map(|e| e.split_once(':').map_or(e.as_str(), |(p, _)| p))
            .collect();
        assert_eq!(
            paths,
            ["channels.telegram.bot_token", "channels.telegram.mode"],
            "{errors:?}"
        );
        let text = "channels:\n  telegram:\n    enabled: true\n    bot_token: \"123:abc\"\n    surprise: 1\n";
        let (settings, warnings) = load(text).unwrap();
        assert!(
            warnings.contains(&"channels.telegram.surprise: unknown key, ignored".to_owned()),
            "{warnings:?}"
        );
        // check-config prints what the adapter validated, its secret redacted.
        let printed = serde_yaml_ng::to_string(&settings).unwrap();
        assert!(
            printed.contains("api_url: https://api.telegram.org"),
            "{printed}"
        );
        assert!(!printed.contains("123:abc"), "{printed}");
    }
}
