//! `im-bridge doctor` for DingTalk: an `accessToken` request (the client id and secret
//! work at `api_url`). Nothing is sent to a chat.

use im_bridge_channel::doctor::{BoxFuture, Check, Context, Credentials, Keys};

use crate::NAME;
use crate::api::Api;
use crate::config::DingTalkSettings;

const KEYS: Keys = Keys {
    url: "channels.dingtalk.api_url",
    secrets: "channels.dingtalk.client_id and channels.dingtalk.client_secret",
};

/// The check, its texts scrubbed of the client secret.
pub fn checks<'a>(settings: &'a DingTalkSettings, _: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        let api = Api::from_settings(settings);
        let issued = format!("accessToken issued to app {}", settings.client_id);
        let check = Credentials::new(NAME, &settings.api_url, KEYS)
            .token(api.as_ref().map(Api::tokens), issued)
            .await;
        vec![check.scrub(&[&settings.client_secret])]
    })
}
