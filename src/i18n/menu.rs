//! The localized command menu adapters show in their platform's command picker.

use im_bridge_channel::{CommandMenu, MenuEntry};

use super::{Catalogs, Locale, msg};

/// Menu commands in display order, with their description ids.
const MENU: &[(&str, &str)] = &[
    ("new", msg::MENU_NEW),
    ("goal", msg::MENU_GOAL),
    ("status", msg::MENU_STATUS),
    ("compact", msg::MENU_COMPACT),
    ("models", msg::MENU_MODELS),
    ("memory", msg::MENU_MEMORY),
    ("lang", msg::MENU_LANG),
    ("bootstrap", msg::MENU_BOOTSTRAP),
    ("help", msg::MENU_HELP),
];

fn entries(catalogs: &Catalogs, locale: &Locale) -> Vec<MenuEntry> {
    MENU.iter()
        .map(|(command, id)| MenuEntry {
            command: (*command).to_owned(),
            description: catalogs.text(locale, id, &[]),
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
        assert_eq!(menu.default.len(), MENU.len());
        assert_eq!(menu.default[0].description, "Start a fresh conversation");
        let zh = menu
            .by_language
            .iter()
            .find(|(lang, _)| lang == "zh")
            .unwrap();
        assert_eq!(zh.1[0].description, "开始新的对话");
        assert!(menu.default.iter().any(|e| e.command == "compact"));
        for (_, entries) in &menu.by_language {
            for e in entries {
                assert!((3..=256).contains(&e.description.chars().count()), "{e:?}");
            }
        }
    }
}
