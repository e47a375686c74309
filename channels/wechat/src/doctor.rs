//! `im-bridge doctor` for WeChat: where the login stands, and whether iLink takes the token.
//!
//! The token checked is the configured `bot_token`, else the one a QR login stored in the
//! channel's state (read with `IM_BRIDGE_SECRET_KEY`); the stored one also when the
//! configured one is the token iLink ended in an earlier run, which the channel no longer
//! uses (`token::configured_token_ended`). Checking it is one `getconfig` (a
//! read, nothing sent to anyone): any answer but `-14` passed iLink's token check; `-14`
//! says the session ended. Without a token the check says what the next start does (a QR
//! code in its log) and where the last run stood (`waiting_for_scan`, `session_expired`,
//! stored by the channel), and whether the token will be kept.

use std::sync::Arc;

use im_bridge_channel::doctor::{BoxFuture, Check, Context, Credentials, Keys};
use im_bridge_channel::{Secret, StateError};

use crate::NAME;
use crate::api::Api;
use crate::config::WechatSettings;
use crate::error::ApiError;
use crate::token::{STATUS_KEY, Status, TOKEN_KEY, configured_token_ended};

const KEYS: Keys = Keys {
    url: "channels.wechat.api_url",
    secrets: "channels.wechat.bot_token (a new one from a QR login, or qrcode_login_enabled: true)",
};

/// What the stored QR login's token shows: what to say when iLink ended its session.
const STORED_KEYS: Keys = Keys {
    url: "channels.wechat.api_url",
    secrets: "nothing: the session of the stored QR login ended; the next start shows a new QR code in the log to scan",
};

/// The checks, their texts scrubbed of the token.
pub fn checks<'a>(settings: &'a WechatSettings, ctx: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        if let Some(token) = settings.bot_token.clone()
            && !configured_token_ended(settings, ctx.state.as_ref()).await
        {
            return vec![accepted(settings, &token, KEYS, "the configured bot token").await];
        }
        let last = match ctx.state.get(STATUS_KEY).await {
            Ok(Some(value)) => Status::parse(&value),
            _ => None,
        };
        let what = match settings.bot_token {
            Some(_) => {
                "logged in by QR code: the stored bot token (the configured bot_token ended in an earlier run; set a new one to use it again)"
            }
            None => "logged in by QR code: the stored bot token",
        };
        match ctx.state.get_secret(TOKEN_KEY).await {
            Ok(Some(token)) => vec![accepted(settings, &token, STORED_KEYS, what).await],
            Ok(None) => vec![Check::skip(NAME, not_logged_in(last))],
            Err(StateError::NoKey) => vec![Check::skip(
                NAME,
                "IM_BRIDGE_SECRET_KEY is not set: a QR login's token is not kept, so every start shows a QR code in its log to scan",
            )],
            Err(StateError::Unreadable | StateError::WrongKind) => vec![Check::fail(
                NAME,
                "the stored bot token cannot be read with this IM_BRIDGE_SECRET_KEY",
                "set IM_BRIDGE_SECRET_KEY to the key the daemon ran with, or scan the new QR code the next start shows",
            )],
            Err(error) => vec![Check::skip(
                NAME,
                format!("the login kept in the store cannot be read ({error})"),
            )],
        }
    })
}

/// Why no token is there, with where the last run stood.
fn not_logged_in(last: Option<Status>) -> &'static str {
    match last {
        Some(Status::WaitingForScan) => {
            "not logged in: the last run was waiting for its QR code to be scanned; the next start shows a new one in its log"
        }
        Some(Status::SessionExpired) => {
            "not logged in: iLink ended the last session (errcode -14); the next start shows a new QR code in its log"
        }
        _ => {
            "not logged in yet: at start the daemon shows a QR code in its log (and its URL) to scan with WeChat"
        }
    }
}

/// Whether iLink takes `token` (`what` names it in the line).
async fn accepted(settings: &WechatSettings, token: &Secret, keys: Keys, what: &str) -> Check {
    let answer = match Api::new(Arc::new(WechatSettings {
        bot_token: Some(token.clone()),
        ..settings.clone()
    })) {
        Ok(api) => {
            let user = settings
                .ilink_bot_id
                .as_deref()
                .unwrap_or("im-bridge-doctor");
            match api.typing_ticket(user, None).await {
                // Any answer but -14 passed the token check.
                Ok(_) | Err(ApiError::Api { .. }) => Ok(format!("{what} is accepted by iLink")),
                Err(error) => Err(error),
            }
        }
        Err(error) => Err(error),
    };
    Credentials::new(NAME, &settings.api_url, keys)
        .answer(answer)
        .scrub(&[token])
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::{ChannelState, Issues, MemoryState};
    use im_bridge_fakes::wechat::{BOT_TOKEN, FakeWechat};
    use serde_json::json;

    use super::*;
    use crate::token::ENDED_CONFIG_KEY;

    fn settings(fake: &FakeWechat, token: Option<&str>) -> WechatSettings {
        let mut block = json!({"qrcode_login_enabled": true, "base_url": fake.base_url()});
        if let Some(token) = token {
            block["bot_token"] = json!(token);
        }
        crate::config::validate(block, &mut Issues::new("channels.wechat")).unwrap()
    }

    async fn line(settings: &WechatSettings, state: Arc<dyn ChannelState>) -> String {
        let checks = checks(settings, &Context::new(state)).await;
        assert_eq!(checks.len(), 1);
        checks[0].to_string()
    }

    #[tokio::test]
    async fn doctor_says_where_the_login_stands() {
        let fake = FakeWechat::start().await.unwrap();
        let empty = || Arc::new(MemoryState::new());
        let configured = line(&settings(&fake, Some(BOT_TOKEN)), empty()).await;
        assert!(
            configured.starts_with("ok   wechat: the configured bot token is accepted"),
            "{configured}"
        );
        let qr = settings(&fake, None);
        assert!(line(&qr, empty()).await.contains("not logged in yet"));
        let state = empty();
        state.put(STATUS_KEY, b"waiting_for_scan").await.unwrap();
        assert!(
            line(&qr, state.clone())
                .await
                .contains("waiting for its QR code to be scanned")
        );
        state
            .put_secret(TOKEN_KEY, &Secret::new(BOT_TOKEN))
            .await
            .unwrap();
        let stored = line(&qr, state.clone()).await;
        assert!(
            stored.starts_with("ok   wechat: logged in by QR code"),
            "{stored}"
        );
        fake.expire_session();
        let ended = line(&qr, state).await;
        assert!(
            ended.starts_with("FAIL wechat: the credentials were refused"),
            "{ended}"
        );
        assert!(
            ended.contains("the next start shows a new QR code"),
            "{ended}"
        );
        assert!(!ended.contains(BOT_TOKEN));
        let keyless = line(&qr, Arc::new(MemoryState::without_secrets())).await;
        assert!(
            keyless.contains("IM_BRIDGE_SECRET_KEY is not set"),
            "{keyless}"
        );
    }

    /// A configured token iLink ended in an earlier run is not what the channel uses: the
    /// check is of the QR login's stored token, as the channel's.
    #[tokio::test]
    async fn a_configured_token_that_ended_is_passed_over_for_the_stored_one() {
        let fake = FakeWechat::start().await.unwrap();
        let state: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
        let ended = Secret::new("an-ended-configured-token");
        state.put_secret(ENDED_CONFIG_KEY, &ended).await.unwrap();
        state
            .put_secret(TOKEN_KEY, &Secret::new(BOT_TOKEN))
            .await
            .unwrap();
        let configured = settings(&fake, Some(ended.expose()));
        let said = line(&configured, state.clone()).await;
        assert!(
            said.starts_with("ok   wechat: logged in by QR code"),
            "{said}"
        );
        assert!(said.contains("the configured bot_token ended"), "{said}");
        // Without a QR login kept, the configured token is checked again (and refused).
        let bare: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
        bare.put_secret(ENDED_CONFIG_KEY, &ended).await.unwrap();
        let said = line(&configured, bare).await;
        assert!(said.contains("credentials were refused"), "{said}");
        // A new token in the configuration is checked itself.
        let said = line(&settings(&fake, Some(BOT_TOKEN)), state).await;
        assert!(
            said.contains("the configured bot token is accepted"),
            "{said}"
        );
    }
}
