//! Building the configured channels: each enabled channel of the settings through its
//! platform in the registry ([`crate::platforms`]), handed the daemon's command
//! vocabulary, the localized command menu, the shared webhook host and its own persistent
//! state; and the console channel of `im-bridge demo`.
//!
//! A module of its own (issue 34): the configuration reads the registry to validate the
//! channel blocks, and building reads the validated settings, so neither the registry nor
//! the configuration depends on the other's users.
//!
//! Child: `menu`, the command menu adapters show in their platform's command picker.

mod menu;

use std::sync::Arc;

use im_bridge_channel::{BuildContext, Channel, ChannelError, Issues, WebhookHost};

pub use menu::command_menu;

use crate::config::Settings;
use crate::i18n::Catalogs;
use crate::platforms::{DEMO_PLATFORM, find};
use crate::state::ChannelStates;

/// Why a channel could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// This build lacks the platform (its cargo feature is off).
    #[error("this build of im-bridge has no {0} channel")]
    Missing(&'static str),
    /// The catalogs for the command menu could not be loaded.
    #[error("loading the message catalogs for the command menus failed: {0}")]
    Catalogs(#[from] crate::i18n::I18nError),
    /// A key names something the channel does not have (a rate budget it does not declare).
    #[error("{0}")]
    Config(crate::config::ConfigError),
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
/// daemon's command vocabulary, the localized menu, the shared webhook host and its own
/// persistent state from `states`.
pub fn build_channels(
    settings: &Settings,
    webhooks: &WebhookHost,
    states: &ChannelStates,
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
            )
            .with_state(states.for_channel(&channel.name));
            let built = channel
                .platform
                .build(&ctx)
                .map_err(|source| BuildError::Channel {
                    channel: channel.name.clone(),
                    source,
                })?;
            crate::config::check_rate_budgets(built.as_ref(), &channel.rate_budgets)
                .map_err(BuildError::Config)?;
            Ok(built)
        })
        .collect()
}

/// The channel `im-bridge demo` runs: the [`DEMO_PLATFORM`] with no settings, classifying
/// lines with the daemon's commands.
pub fn demo_channel() -> Result<Arc<dyn Channel>, BuildError> {
    let missing = || BuildError::Missing(DEMO_PLATFORM);
    let platform = find(DEMO_PLATFORM).ok_or_else(missing)?;
    let mut issues = Issues::new(DEMO_PLATFORM);
    let configured = platform
        .validate(serde_json::Value::Null, &mut issues)
        .ok_or_else(missing)?;
    let mut ctx = BuildContext::default();
    ctx.commands = crate::manager::commands::vocabulary();
    configured
        .build(&ctx)
        .map_err(|source| BuildError::Channel {
            channel: DEMO_PLATFORM.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::config::load_str;

    #[test]
    fn issue_12_channels_are_built_through_the_registry() {
        let (settings, _) = load_str(
            "channels:\n  console: {enabled: true}\n",
            &HashMap::<String, String>::new(),
        )
        .unwrap();
        let channels =
            build_channels(&settings, &WebhookHost::new(), &ChannelStates::default()).unwrap();
        assert_eq!(
            channels.iter().map(|c| c.name()).collect::<Vec<_>>(),
            [DEMO_PLATFORM]
        );
        assert_eq!(demo_channel().unwrap().name(), DEMO_PLATFORM);
    }
}
