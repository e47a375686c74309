//! `im-bridge doctor` for QQ: an app access token request (the app id and secret work at
//! `token_url`) and, in webhook mode, whether the listen address is free. Nothing is sent
//! to a chat.

use im_bridge_channel::doctor::{self, BoxFuture, Check, Context, Credentials, Keys};

use crate::NAME;
use crate::api::Api;
use crate::config::{QqSettings, Transport};

const KEYS: Keys = Keys {
    url: "channels.qq.token_url",
    secrets: "channels.qq.app_id and channels.qq.client_secret",
};

/// The checks, every text scrubbed of the client secret. QQ refuses wrong credentials
/// under HTTP 200 too (`ApiError::TokenRefused`).
pub fn checks<'a>(settings: &'a QqSettings, _: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        let api = Api::from_settings(settings);
        let issued = format!("access token issued to bot {}", settings.app_id);
        let credentials = Credentials::new(NAME, &settings.token_url, KEYS);
        let mut checks = vec![
            credentials
                .token(api.as_ref().map(Api::tokens), issued)
                .await,
        ];
        if let Transport::Webhook(hook) = &settings.transport {
            checks.push(doctor::webhook_address(NAME, hook.listen));
        }
        doctor::scrubbed(checks, &[&settings.client_secret])
    })
}
