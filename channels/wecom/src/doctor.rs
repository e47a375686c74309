//! `im-bridge doctor` for WeCom: a subscribe round trip (open the long connection, send
//! `aibot_subscribe` with the BotID and Secret, read the answer, close). Nothing is sent
//! to a chat; but WeCom keeps one connection per bot, so the check's subscribe replaces
//! the connection of a daemon already running with this bot (which comes back by itself,
//! see `WeComChannel::run`).

use im_bridge_channel::doctor::{BoxFuture, Check, Context, Credentials, Keys};

use crate::NAME;
use crate::config::WeComSettings;
use crate::transport::ws;

const KEYS: Keys = Keys {
    url: "channels.wecom.ws_url",
    secrets: "channels.wecom.bot_id and channels.wecom.bot_secret",
};

/// The check, its texts scrubbed of the Secret.
pub fn checks<'a>(settings: &'a WeComSettings, _: &'a Context) -> BoxFuture<'a, Vec<Check>> {
    Box::pin(async move {
        let answer = ws::probe(&settings.ws_url, &settings.bot_id, &settings.bot_secret)
            .await
            .map(|()| format!("bot {} subscribed to the long connection", settings.bot_id));
        let check = Credentials::new(NAME, &settings.ws_url, KEYS).answer(answer);
        vec![check.scrub(&[&settings.bot_secret])]
    })
}
