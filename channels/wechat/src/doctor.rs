//! `im-bridge doctor` for WeChat: with a configured `bot_token`, one `getconfig` (a read,
//! nothing sent to anyone): iLink answering it with anything but `-14` accepted the token;
//! `-14` says the session ended. Without one (QR login), what the daemon will do: the
//! check cannot see the store, so it says where the login shows (the daemon's log, its QR
//! code and URL) and where its token is kept.

use std::sync::Arc;

use im_bridge_channel::doctor::{BoxFuture, Check, Credentials, Keys};

use crate::NAME;
use crate::api::Api;
use crate::config::WechatSettings;
use crate::error::ApiError;

const KEYS: Keys = Keys {
    url: "channels.wechat.api_url",
    secrets: "channels.wechat.bot_token (a new one from a QR login, or qrcode_login_enabled: true)",
};

/// The check, its texts scrubbed of the token.
pub fn checks(settings: &WechatSettings) -> BoxFuture<'_, Vec<Check>> {
    Box::pin(async move {
        let Some(token) = settings.bot_token.clone() else {
            return vec![Check::skip(
                NAME,
                "no bot_token: at start the daemon logs in by QR code (scan the code its log shows; the login URL is logged too) and keeps the token encrypted in its store when IM_BRIDGE_SECRET_KEY is set",
            )];
        };
        let answer = match Api::new(Arc::new(settings.clone())) {
            Ok(api) => {
                let user = settings
                    .ilink_bot_id
                    .as_deref()
                    .unwrap_or("im-bridge-doctor");
                match api.typing_ticket(user, None).await {
                    // Any answer but -14 passed the token check.
                    Ok(_) | Err(ApiError::Api { .. }) => {
                        Ok("bot token accepted by iLink".to_owned())
                    }
                    Err(error) => Err(error),
                }
            }
            Err(error) => Err(error),
        };
        let check = Credentials::new(NAME, &settings.api_url, KEYS).answer(answer);
        vec![check.scrub(&[&token])]
    })
}
