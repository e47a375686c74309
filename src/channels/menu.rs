//! The localized command menu adapters show in their platform's command picker.
//!
//! The entries are the commands of `manager::commands`' table that have a menu
//! description, in table order; this module only localizes them. It reads the table (plain
//! data) rather than the table calling into localization, and lives with channel building
//! rather than in `i18n` (where it was), so the catalogs depend on no part of the daemon
//! (issue 34: the manager localizes its replies through them).

use im_bridge_channel::{CommandMenu, MenuEntry};

use crate::i18n::{Catalogs, Locale};
use crate::manager::commands::TABLE;

fn entries(catalogs: &Catalogs, locale: &Locale) -> Vec<MenuEntry> {
    TABLE
        .iter()
        .filter_map(|command| {
            command.menu.map(|id| MenuEntry {
                command: command.name.to_owned(),
                description: catalogs.text(locale, id, &[]),
            })
        })
        .collect()
}

/// The menu in `en-US` by default and once per ISO 639-1 language code (two letters) of
/// the supported locales. A code stands for the locale it negotiates to, so one language
/// written two ways gets one menu: `zh` is Simplified Chinese (`zh-CN`), as a bare `zh`
/// tag is; a language without a two-letter code has no menu of its own.
pub fn command_menu(catalogs: &Catalogs) -> CommandMenu {
    let default = entries(catalogs, &catalogs.default_locale());
    let mut by_language: Vec<(String, Vec<MenuEntry>)> = Vec::new();
    for locale in catalogs.supported() {
        let language = locale.language();
        if language.len() != 2 || by_language.iter().any(|(code, _)| code == language) {
            continue;
        }
        let chosen = catalogs
            .negotiate(language)
            .unwrap_or_else(|| locale.clone());
        by_language.push((language.to_owned(), entries(catalogs, &chosen)));
    }
    CommandMenu {
        default,
        by_language,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_menu_is_localized_per_language() {
        let catalogs = Catalogs::embedded().unwrap();
        let menu = command_menu(&catalogs);
        let commands: Vec<&str> = menu.default.iter().map(|e| e.command.as_str()).collect();
        assert_eq!(
            commands,
            [
                "new",
                "goal",
                "status",
                "stop",
                "compact",
                "models",
                "memory",
                "lang",
                "bootstrap",
                "help"
            ],
            "the table's menu commands in table order; /context stays out"
        );
        assert_eq!(menu.default[0].description, "Start a fresh conversation");
        let codes: Vec<&str> = menu.by_language.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            codes,
            ["en", "zh", "ja"],
            "one menu per two-letter code: zh-CN and zh-TW share zh"
        );
        let first = |code: &str| {
            let (_, entries) = menu.by_language.iter().find(|(c, _)| c == code).unwrap();
            entries[0].description.clone()
        };
        assert_eq!(first("zh"), "开始新的对话", "zh is Simplified Chinese");
        assert_eq!(first("ja"), "新しい会話を始める");
        for (_, entries) in &menu.by_language {
            assert_eq!(entries.len(), menu.default.len());
            for e in entries {
                assert!((3..=256).contains(&e.description.chars().count()), "{e:?}");
            }
        }
    }
}
