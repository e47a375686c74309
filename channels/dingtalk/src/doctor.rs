//! `im-bridge doctor` for DingTalk: an `accessToken` request (the client id and secret
//! work at `api_url`). Nothing is sent to a chat.

use im_bridge_channel::doctor::{BoxFuture, Check, Credentials, Failure};

use crate::NAME;
use crate::api::Api;
use crate::config::DingTalkSettings;
use crate::error::ApiError;

/// The check, its texts scrubbed of the client secret.
pub fn checks(settings: &DingTalkSettings) -> BoxFuture<'_, Vec<Check>> {
    Box::pin(async move {
        let keys = Credentials {
            name: NAME,
            url: &settings.api_url,
            url_key: "channels.dingtalk.api_url",
            secret_keys: "channels.dingtalk.client_id and channels.dingtalk.client_secret",
        };
        let api = Api::new(
            &settings.api_url,
            &settings.oapi_url,
            &settings.client_id,
            settings.client_secret.clone(),
        );
        let check = keys
            .token(
                api.as_ref().map(Api::tokens),
                format!("accessToken issued to app {}", settings.client_id),
                sort,
            )
            .await;
        vec![check.scrub(&[&settings.client_secret])]
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
