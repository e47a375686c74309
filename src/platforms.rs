//! The platform registry: the one place in the daemon that names chat platforms.
//!
//! Each adapter crate exports a [`Platform`]; this list holds the ones compiled in, one
//! line and one cargo feature each. Configuration validation, `check-config` and the
//! daemon's channel building iterate it; nothing else in `src/` names a platform (a test
//! in `tests/source_rules.rs` checks that).

use std::sync::Arc;

use im_bridge_channel::{BuildContext, Channel, ChannelError, Platform, WebhookHost};

use crate::config::Settings;
use crate::i18n::{Catalogs, command_menu};

/// The platforms this build serves, in the order their channels start.
pub const PLATFORMS: &[&dyn Platform] = &[
    #[cfg(feature = "console")]
    &im_bridge_console::ConsolePlatform,
    #[cfg(feature = "telegram")]
    &im_bridge_telegram::TelegramPlatform,
];

/// Every platform im-bridge has (or plans) an adapter for, compiled in or not: enabling one
/// this build lacks is an error that says so, instead of a silent no-op.
pub const KNOWN_PLATFORMS: &[&str] = &[
    "console", "telegram", "feishu", "dingtalk", "qq", "discord", "slack", "wecom",
];

/// The compiled-in platform called `name`.
pub fn find(name: &str) -> Option<&'static dyn Platform> {
    PLATFORMS.iter().copied().find(|p| p.name() == name)
}

/// Why a channel could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The catalogs for the command menu could not be loaded.
    #[error("loading the message catalogs for the command menus failed: {0}")]
    Catalogs(#[from] crate::i18n::I18nError),
    /// An adapter refused to build.
    #[error("building the {channel} channel failed: {source}")]
    Channel {
        /// The channel.
        channel: String,
        /// Why (log-safe).
        source: ChannelError,
    },
}

/// Builds every enabled channel of `settings` through its platform, handing each the
/// daemon's command vocabulary, the localized menu and the shared webhook host.
pub fn build_channels(
    settings: &Settings,
    webhooks: &WebhookHost,
) -> Result<Vec<Arc<dyn Channel>>, BuildError> {
    let catalogs = Catalogs::load(settings.locales_dir.as_deref())?;
    let menu = command_menu(&catalogs);
    let commands = crate::manager::commands::vocabulary();
    settings
        .channels
        .iter()
        .map(|channel| {
            let ctx = BuildContext::new(
                channel.allowed_users.clone(),
                commands.clone(),
                menu.clone(),
                webhooks.clone(),
            );
            channel
                .platform
                .build(&ctx)
                .map_err(|source| BuildError::Channel {
                    channel: channel.name.clone(),
                    source,
                })
        })
        .collect()
}
