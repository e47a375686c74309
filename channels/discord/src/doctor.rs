//! `im-bridge doctor` for Discord: `GET /users/@me` (the bot token works at `api_url`).
//! Nothing is sent to a channel and no gateway session is opened.

use im_bridge_channel::doctor::{BoxFuture, Check, Context, Credentials, Keys};

use crate::NAME;
use crate::api::DiscordApi;
use crate::config::DiscordSettings;

const KEYS: Keys = Keys {
    url: "channels.discord.api_url",
    secrets: "channels.discord.bot_token (Developer Portal, Bot)",
};

/// The check, its texts scrubbed of the bot token.
pub fn checks<'a>(settings: &'a DiscordSettings, _: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        let answer = match DiscordApi::new(settings) {
            Ok(api) => api.current_user_id().await,
            Err(error) => Err(error),
        };
        let answer = answer.map(|id| format!("bot user {id}"));
        let check = Credentials::new(NAME, &settings.api_url, KEYS).answer(answer);
        vec![check.scrub(&[&settings.bot_token])]
    })
}
