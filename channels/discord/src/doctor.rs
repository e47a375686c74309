//! `im-bridge doctor` for Discord: `GET /users/@me` (the bot token works at `api_url`).
//! Nothing is sent to a channel and no gateway session is opened.

use im_bridge_channel::doctor::{self, BoxFuture, Check, Credentials, Failure};

use crate::NAME;
use crate::api::DiscordApi;
use crate::config::DiscordSettings;
use crate::error::ApiError;

/// The check, its texts scrubbed of the bot token.
pub fn checks(settings: &DiscordSettings) -> BoxFuture<'_, Vec<Check>> {
    Box::pin(async move {
        let keys = Credentials {
            name: NAME,
            url: &settings.api_url,
            url_key: "channels.discord.api_url",
            secret_keys: "channels.discord.bot_token (Developer Portal, Bot)",
        };
        let answer = match DiscordApi::new(settings) {
            Ok(api) => api.current_user_id().await,
            Err(error) => Err(error),
        };
        let answer = answer
            .map(|id| format!("bot user {id}"))
            .map_err(|error| (sort(&error), doctor::reason(&error)));
        vec![keys.check(answer).scrub(&[&settings.bot_token])]
    })
}

/// How `/users/@me` failed.
fn sort(error: &ApiError) -> Failure {
    match error {
        ApiError::Http(e) => e.into(),
        ApiError::RateLimited { .. } => Failure::Throttled,
        ApiError::Unauthorized { .. } => Failure::Refused,
        ApiError::Api { status, .. } => Failure::refusal(*status),
    }
}
