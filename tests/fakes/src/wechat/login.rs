//! QR login (SDK `login-qr.ts`; DeerFlow's channel): no token, the common headers only.
//!
//! - `get_bot_qrcode?bot_type=3`: GET (DeerFlow, older SDKs) or POST with `{"local_token_list":
//!   […]}` (SDK 2.4) → `{"qrcode", "qrcode_img_content"}` (the id, and the URL the QR image
//!   encodes). `bot_type` is required (fake: refused with `ret -1` without it).
//! - `get_qrcode_status?qrcode=<id>`: GET, a long poll (SDK: client timeout 35 s) →
//!   `{"status": "wait" | "scaned" | "confirmed" | "expired"}`, `confirmed` with `bot_token`,
//!   `ilink_bot_id`, `baseurl`, `ilink_user_id`. The fake answers at once when the status
//!   changed since its last answer for that code, else holds the request until it changes
//!   or the long-poll hold passes (then the same status again). After `confirmed` was
//!   answered once the code is used up: later polls get `expired` (fake). An unknown code is
//!   `expired` (fake). The states `scaned_but_redirect`, `need_verifycode`,
//!   `verify_code_blocked`, `binded_redirect` (SDK 2.4) are not played.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::records::{QrCode, QrStatus};
use super::{BOT_ID, OWNER_ID, Shared, Wechat, code, hold};
use crate::skeleton::http::{Answer, Head};

impl Wechat {
    /// The newest QR code, or the one named.
    pub(super) fn qr(&mut self, qrcode: Option<&str>) -> Option<&mut QrCode> {
        match qrcode {
            Some(id) => self.qrcodes.iter_mut().find(|q| q.qrcode == id),
            None => self.qrcodes.last_mut(),
        }
    }

    /// Moves a QR code on; a confirmation issues a new bot token (ending the old session).
    pub(super) fn set_qr(&mut self, qrcode: Option<&str>, status: QrStatus) -> bool {
        let token = (status == QrStatus::Confirmed).then(|| {
            let n = self.next();
            format!("{BOT_ID}:fake{n:028x}")
        });
        let Some(qr) = self.qr(qrcode) else {
            return false;
        };
        let allowed = match status {
            QrStatus::Scaned => qr.status == QrStatus::Wait,
            QrStatus::Confirmed => qr.status == QrStatus::Scaned,
            QrStatus::Expired => matches!(qr.status, QrStatus::Wait | QrStatus::Scaned),
            QrStatus::Wait => false,
        };
        if !allowed {
            return false;
        }
        qr.status = status;
        if let Some(token) = token {
            qr.bot_token = Some(token.clone());
            self.tokens.stale_all();
            self.tokens
                .issue(token, Instant::now() + super::TOKEN_LIFETIME);
        }
        true
    }
}

/// `get_bot_qrcode`.
pub(super) fn bot_qrcode(state: &mut Wechat, head: &Head) -> Answer {
    if head.query.get("bot_type").is_none_or(String::is_empty) {
        return Answer::json(
            200,
            json!({"ret": code::INVALID_PARAM, "errmsg": "invalid bot_type"}),
        );
    }
    let n = state.next();
    let qrcode = format!("fakeqr{n:016x}");
    let img_content = format!("{}/qr/{qrcode}?bot_type=3", state.base);
    state.qrcodes.push(QrCode {
        qrcode: qrcode.clone(),
        img_content: img_content.clone(),
        status: QrStatus::Wait,
        bot_token: None,
        polls: 0,
        reported: None,
    });
    Answer::json(
        200,
        json!({"qrcode": qrcode, "qrcode_img_content": img_content}),
    )
}

/// What a status poll answers now, if it should answer now; `last`: the status the poll
/// already reported.
fn status_now(state: &mut Wechat, qrcode: &str, last: Option<QrStatus>) -> Option<Value> {
    let base = state.base.clone();
    let Some(qr) = state.qr(Some(qrcode)) else {
        return Some(json!({"status": "expired"}));
    };
    if Some(qr.status) == last {
        return None;
    }
    let mut answer = json!({"status": qr.status.as_str()});
    if qr.status == QrStatus::Confirmed {
        answer["bot_token"] = json!(qr.bot_token);
        answer["ilink_bot_id"] = json!(BOT_ID);
        answer["baseurl"] = json!(base);
        answer["ilink_user_id"] = json!(OWNER_ID);
        // Used up: the next poll finds it expired.
        qr.status = QrStatus::Expired;
        qr.bot_token = None;
    }
    Some(answer)
}

/// `get_qrcode_status`: the long poll.
pub(super) async fn qrcode_status(shared: &Shared, head: &Head) -> Answer {
    let qrcode = head.query.get("qrcode").cloned().unwrap_or_default();
    let (last, until) = shared.update(|state| {
        let until = Instant::now() + state.hold;
        let last = state.qr(Some(&qrcode)).map(|q| {
            q.polls += 1;
            q.last_reported()
        });
        (last.flatten(), until)
    });
    let answer = hold(shared, until, |s| status_now(s, &qrcode, last)).await;
    let answer = match answer {
        Some(a) => a,
        None => {
            let mut state = shared.lock();
            status_now(&mut state, &qrcode, None).unwrap_or_else(|| json!({"status": "wait"}))
        }
    };
    if let Some(status) = answer["status"].as_str() {
        let mut state = shared.lock();
        if let Some(qr) = state.qr(Some(&qrcode)) {
            qr.reported = Some(status.to_owned());
        }
    }
    Answer::json(200, answer)
}

impl QrCode {
    /// The status its last poll answered.
    fn last_reported(&self) -> Option<QrStatus> {
        match self.reported.as_deref() {
            Some("wait") => Some(QrStatus::Wait),
            Some("scaned") => Some(QrStatus::Scaned),
            // A confirmation or expiry was final: any status now is news.
            _ => None,
        }
    }
}
