//! `im-bridge doctor` for Slack: `auth.test` with the bot token (it works at `api_url`,
//! and whose bot it is); in Socket Mode, `apps.connections.open` with the app-level token
//! (the URL it answers is single use and is not opened: no WebSocket is connected, so no
//! connection of the running daemon is disturbed); with `event_delivery: http`, whether the
//! listen address is free. Nothing is sent to a conversation.

use im_bridge_channel::doctor::{self, BoxFuture, Check, Context, Credentials, Keys};

use crate::NAME;
use crate::api::SlackApi;
use crate::config::{Delivery, SlackSettings};
use crate::error::ApiError;

const KEYS: Keys = Keys {
    url: "channels.slack.api_url",
    secrets: "channels.slack.bot_token (OAuth & Permissions, xoxb-…)",
};

const APP_KEYS: Keys = Keys {
    url: "channels.slack.api_url",
    secrets: "channels.slack.app_token (Basic Information → App-Level Tokens, xapp-… with connections:write) and that Socket Mode is on",
};

/// The checks, every text scrubbed of the tokens and the signing secret.
pub fn checks<'a>(settings: &'a SlackSettings, _: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        let credentials = Credentials::new(NAME, &settings.api_url, KEYS);
        let mut secrets = vec![&settings.bot_token];
        let api = match SlackApi::new(settings) {
            Ok(api) => api,
            Err(error) => {
                let failed = credentials.answer::<ApiError>(Err(error));
                return doctor::scrubbed(vec![failed], &secrets);
            }
        };
        let me = api
            .auth_test()
            .await
            .map(|me| format!("bot user {} in workspace {}", me.user_id, me.team_id));
        let mut checks = vec![credentials.answer(me)];
        match &settings.delivery {
            Delivery::Socket { app_token } => {
                secrets.push(app_token);
                let opened = api.open_connection(app_token).await.map(|_| {
                    "apps.connections.open answered a Socket Mode URL (not opened)".to_owned()
                });
                let name = format!("{NAME} socket mode");
                checks.push(Credentials::new(&name, &settings.api_url, APP_KEYS).answer(opened));
            }
            Delivery::Http {
                signing_secret,
                webhook,
            } => {
                secrets.push(signing_secret);
                checks.push(doctor::webhook_address(NAME, webhook.listen));
            }
        }
        doctor::scrubbed(checks, &secrets)
    })
}
