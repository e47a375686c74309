//! `im-bridge doctor` for Telegram: `getMe` (the bot token works) and `getWebhookInfo`
//! (where Telegram delivers updates matches the configured mode), plus, in webhook mode,
//! whether the local listen address is free. Reads only: nothing is set or deleted.
//!
//! Webhook state: in polling mode a webhook that is set means updates go somewhere else
//! (another deployment of this bot); the transport would delete it at start and take the
//! updates away, so it fails the check. In webhook mode no webhook yet is fine (the
//! transport registers `public_url` at start); one pointing elsewhere fails.

use im_bridge_channel::doctor::{self, BoxFuture, Check, Context, Credentials, Failure};

use crate::NAME;
use crate::api::Api;
use crate::config::{TelegramSettings, Transport};
use crate::error::TelegramError;
use crate::model::WebhookInfo;

/// The checks, in order; every text is scrubbed of the bot token and the webhook secret.
pub fn checks<'a>(settings: &'a TelegramSettings, _: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        let mut checks = run(settings).await;
        if let Transport::Webhook(hook) = &settings.transport {
            checks.push(doctor::address_free(
                format!("{NAME} webhook address"),
                hook.listen,
                "channels.telegram.webhook.listen",
            ));
        }
        let mut secrets = vec![&settings.bot_token];
        if let Transport::Webhook(hook) = &settings.transport {
            secrets.push(&hook.secret_token);
        }
        checks.into_iter().map(|c| c.scrub(&secrets)).collect()
    })
}

async fn run(settings: &TelegramSettings) -> Vec<Check> {
    let webhook = format!("{NAME} webhook");
    let keys = Credentials {
        name: NAME,
        url: &settings.api_url,
        url_key: "channels.telegram.api_url",
        secret_keys: "channels.telegram.bot_token (from @BotFather)",
    };
    let api = match Api::new(&settings.api_url, settings.bot_token.clone()) {
        Ok(api) => api,
        Err(error) => {
            let check = keys.check(Err((Failure::Unexpected, doctor::reason(&error))));
            return vec![check, Check::skip(webhook, "no HTTP client")];
        }
    };
    let me = api.get_me().await.map(|me| match me.username {
        Some(name) => format!("bot @{name} (id {})", me.id),
        None => format!("bot id {}", me.id),
    });
    let identified = me.is_ok();
    let mut checks = vec![keys.check(me.map_err(sort))];
    if !identified {
        checks.push(Check::skip(webhook, "getMe failed"));
        return checks;
    }
    checks.push(match api.get_webhook_info().await {
        Ok(info) => webhook_check(webhook, &settings.transport, &info),
        Err(error) => Credentials {
            name: &webhook,
            ..keys
        }
        .check(Err(sort(error))),
    });
    checks
}

/// Whether the webhook Telegram has matches the configured transport.
fn webhook_check(name: String, transport: &Transport, info: &WebhookInfo) -> Check {
    let set = doctor::display_url(&info.url);
    match transport {
        Transport::Polling { .. } if info.url.is_empty() => {
            Check::ok(name, "none set, as polling needs")
        }
        Transport::Polling { .. } => Check::fail(
            name,
            format!("a webhook is set ({set}), so updates go there, not to polling"),
            "if nothing else serves this bot, deleteWebhook; or set channels.telegram.mode: webhook",
        ),
        Transport::Webhook(hook) if info.url.is_empty() => Check::ok(
            name,
            format!(
                "none set yet; im-bridge sets {} at start",
                doctor::display_url(&hook.public_url)
            ),
        ),
        Transport::Webhook(hook) if info.url == hook.public_url => Check::ok(
            name,
            format!(
                "set to {set}, {} updates pending",
                info.pending_update_count
            ),
        ),
        Transport::Webhook(_) => Check::fail(
            name,
            format!("the webhook points elsewhere ({set})"),
            "check channels.telegram.webhook.public_url; im-bridge replaces the webhook at start",
        ),
    }
}

/// How a call failed, for the credential check: the wire's failures as the core sorts
/// them, the Bot API's refusals here. A malformed token gets 404 from the Bot API, a wrong
/// one 401.
fn sort(error: TelegramError) -> (Failure, String) {
    let failure = match &error {
        TelegramError::Unauthorized => return (Failure::Refused, "401 Unauthorized".into()),
        TelegramError::Api { code: 404, .. } => {
            return (
                Failure::Refused,
                "404 Not Found (a malformed token?)".into(),
            );
        }
        TelegramError::Http(http) => Failure::from(http),
        _ => Failure::Unexpected,
    };
    (failure, doctor::reason(&error))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use im_bridge_channel::Secret;

    use super::*;
    use crate::config::WebhookSettings;

    fn info(url: &str) -> WebhookInfo {
        WebhookInfo {
            url: url.to_owned(),
            has_custom_certificate: false,
            pending_update_count: 2,
            last_error_date: None,
            last_error_message: None,
        }
    }

    #[test]
    fn the_webhook_must_match_the_mode() {
        let polling = Transport::Polling {
            timeout: Duration::from_secs(30),
        };
        let hook = Transport::Webhook(WebhookSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            public_url: "https://bot.example.com/hook".into(),
            path: "/hook".into(),
            secret_token: Secret::new("s"),
        });
        let name = || "telegram webhook".to_owned();
        assert!(!webhook_check(name(), &polling, &info("")).failed());
        let stolen = webhook_check(name(), &polling, &info("https://other.example.com/x?k=v"));
        assert!(stolen.failed());
        let text = stolen.to_string();
        assert!(text.contains("deleteWebhook"), "{text}");
        assert!(!text.contains("k=v"), "{text}");
        assert!(!webhook_check(name(), &hook, &info("")).failed());
        assert!(!webhook_check(name(), &hook, &info("https://bot.example.com/hook")).failed());
        let elsewhere = webhook_check(name(), &hook, &info("https://other.example.com/x"));
        assert!(elsewhere.failed());
        assert!(elsewhere.to_string().contains("public_url"), "{elsewhere}");
    }
}
