//! `im-bridge doctor` for Feishu / Lark: a `tenant_access_token` request (the app id and
//! secret work at `domain`) and, in webhook mode, whether the listen address is free.
//! Nothing is sent to a chat.

use im_bridge_channel::doctor::{self, BoxFuture, Check, Credentials, Failure};

use crate::NAME;
use crate::api::Api;
use crate::config::{FeishuSettings, Transport};
use crate::error::ApiError;

/// The checks, every text scrubbed of the app secret and the webhook keys.
pub fn checks(settings: &FeishuSettings) -> BoxFuture<'_, Vec<Check>> {
    Box::pin(async move {
        let keys = Credentials {
            name: NAME,
            url: &settings.domain,
            url_key: "channels.feishu.domain",
            secret_keys: "channels.feishu.app_id and channels.feishu.app_secret",
        };
        let api = Api::new(
            &settings.domain,
            &settings.app_id,
            settings.app_secret.clone(),
        );
        let mut checks = vec![
            keys.token(
                api.as_ref().map(Api::tokens),
                format!("tenant_access_token issued to app {}", settings.app_id),
                sort,
            )
            .await,
        ];
        let mut secrets = vec![&settings.app_secret];
        if let Transport::Webhook(hook) = &settings.transport {
            checks.push(doctor::address_free(
                format!("{NAME} webhook address"),
                hook.place.listen,
                "channels.feishu.webhook.listen",
            ));
            secrets.push(&hook.verification_token);
            secrets.extend(&hook.encrypt_key);
        }
        checks.into_iter().map(|c| c.scrub(&secrets)).collect()
    })
}

/// How the token request failed.
fn sort(error: &ApiError) -> Failure {
    match error {
        ApiError::Http(e) => Failure::from(e),
        ApiError::Api { status, .. } => Failure::refusal(*status),
        ApiError::TokenInvalid { .. } => Failure::Refused,
        _ => Failure::Unexpected,
    }
}
