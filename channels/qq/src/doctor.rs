//! `im-bridge doctor` for QQ: an app access token request (the app id and secret work at
//! `token_url`) and, in webhook mode, whether the listen address is free. Nothing is sent
//! to a chat.

use im_bridge_channel::doctor::{self, BoxFuture, Check, Credentials, Failure};

use crate::NAME;
use crate::api::Api;
use crate::config::{QqSettings, Transport};
use crate::error::ApiError;

/// The checks, every text scrubbed of the client secret.
pub fn checks(settings: &QqSettings) -> BoxFuture<'_, Vec<Check>> {
    Box::pin(async move {
        let keys = Credentials {
            name: NAME,
            url: &settings.token_url,
            url_key: "channels.qq.token_url",
            secret_keys: "channels.qq.app_id and channels.qq.client_secret",
        };
        let api = Api::new(
            &settings.api_url,
            &settings.token_url,
            &settings.app_id,
            settings.client_secret.clone(),
        );
        let mut checks = vec![
            keys.token(
                api.as_ref().map(Api::tokens),
                format!("access token issued to bot {}", settings.app_id),
                sort,
            )
            .await,
        ];
        if let Transport::Webhook(hook) = &settings.transport {
            checks.push(doctor::address_free(
                format!("{NAME} webhook address"),
                hook.listen,
                "channels.qq.webhook.listen",
            ));
        }
        checks
            .into_iter()
            .map(|c| c.scrub(&[&settings.client_secret]))
            .collect()
    })
}

/// How the token request failed; QQ refuses wrong credentials under HTTP 200 too.
fn sort(error: &ApiError) -> Failure {
    match error {
        ApiError::Http(e) => e.into(),
        ApiError::Api { status, .. } => Failure::refusal(*status),
        ApiError::TokenRefused { .. } => Failure::Refused,
        ApiError::WindowClosed | ApiError::RepliesExhausted => Failure::Unexpected,
    }
}
