//! The localized command menu adapters show in their platform's command picker.
//!
//! The entries are the commands of `manager::commands`' table that have a menu
//! description, in table order; this module only localizes them. It reads the table (plain
//! data) rather than the table calling into localization, so `command_menu` stays where
//! the daemon and the tests already build the menu from the catalogs.

use im_bridge_channel::{CommandMenu, MenuEntry};

use super::{Catalogs, Locale};
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

/// The menu in `en-US` by default and in every supported locale by language code.
pub fn command_menu(catalogs: &Catalogs) -> CommandMenu {
    let default = entries(catalogs, &catalogs.default_locale());
    let by_language = catalogs
        .supported()
        .iter()
        .map(|l| (l.language().to_owned(), entries(catalogs, l)))
        .collect();
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
        let zh = menu
            .by_language
            .iter()
            .find(|(lang, _)| lang == "zh")
            .unwrap();
        assert_eq!(zh.1[0].description, "开始新的对话");
        for (_, entries) in &menu.by_language {
            assert_eq!(entries.len(), menu.default.len());
            for e in entries {
                assert!((3..=256).contains(&e.description.chars().count()), "{e:?}");
            }
        }
    }
}
