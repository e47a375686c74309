//! `CommandMenu`: the localized list of commands a platform shows in its command picker
//! (Telegram's `setMyCommands`, Discord's application commands).
//!
//! The daemon builds it from its catalogs and hands it to adapters as plain data, so an
//! adapter never needs the localization machinery.

/// One command in a menu.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MenuEntry {
    /// The command without its slash (`goal`).
    pub command: String,
    /// A short description in the menu's language.
    pub description: String,
}

/// The command menu in every language the daemon speaks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandMenu {
    /// The menu for users whose language has no menu of its own.
    pub default: Vec<MenuEntry>,
    /// `(ISO 639-1 language code, menu)` pairs, e.g. `("zh", …)`.
    pub by_language: Vec<(String, Vec<MenuEntry>)>,
}
