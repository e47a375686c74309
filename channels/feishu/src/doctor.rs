//! `im-bridge doctor` for Feishu / Lark: a `tenant_access_token` request (the app id and
//! secret work at `domain`) and, in webhook mode, whether the listen address is free.
//! Nothing is sent to a chat.

use im_bridge_channel::doctor::{self, BoxFuture, Check, Context, Credentials, Keys};

use crate::NAME;
use crate::api::Api;
use crate::config::{FeishuSettings, Transport};

const KEYS: Keys = Keys {
    url: "channels.feishu.domain",
    secrets: "channels.feishu.app_id and channels.feishu.app_secret",
};

/// The checks, every text scrubbed of the app secret and the webhook keys.
pub fn checks<'a>(settings: &'a FeishuSettings, _: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        let api = Api::from_settings(settings);
        let issued = format!("tenant_access_token issued to app {}", settings.app_id);
        let credentials = Credentials::new(NAME, &settings.domain, KEYS);
        let mut checks = vec![
            credentials
                .token(api.as_ref().map(Api::tokens), issued)
                .await,
        ];
        let mut secrets = vec![&settings.app_secret];
        if let Transport::Webhook(hook) = &settings.transport {
            checks.push(doctor::webhook_address(NAME, hook.place.listen));
            secrets.push(&hook.verification_token);
            secrets.extend(&hook.encrypt_key);
        }
        doctor::scrubbed(checks, &secrets)
    })
}
