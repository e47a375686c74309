//! What the fake iLink records and what a test scripts: messages pushed and sent, typing,
//! uploads, QR codes, scripted failures.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub use crate::skeleton::Trigger;

/// One HTTP request the fake received. Its `route` is the endpoint's last path segment
/// (`getupdates`, `sendmessage`, `getuploadurl`, `getconfig`, `sendtyping`,
/// `get_bot_qrcode`, `get_qrcode_status`, `notifystart`, `notifystop`), `cdn_upload` or
/// `cdn_download` for the CDN, `unknown` for anything else; `code` is the answer's
/// `errcode`, else its `ret`, when non-zero. iLink calls it a success when it is a 200 whose
/// body carries neither.
pub type Call = crate::skeleton::Call;

/// A scripted failure of an endpoint ([`FakeWechat::fail`](super::FakeWechat::fail)).
/// Failures fire after the body and the token were checked, so a call refused for those
/// uses none up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// HTTP 200 with `{"ret": -2, "errmsg": "rate limited"}`, as iLink throttles
    /// `sendmessage` (observed).
    RateLimited,
    /// HTTP 200 with `{"ret": ret, "errmsg": errmsg}`.
    Error {
        /// The `ret`.
        ret: i64,
        /// The `errmsg`.
        errmsg: String,
    },
    /// Ends the session as [`FakeWechat::expire_session`](super::FakeWechat::expire_session)
    /// does: this call and every later one are `{"errcode": -14, "errmsg": "session
    /// timeout"}` until a new QR login.
    SessionExpired,
    /// This HTTP status with no body (a 5xx of iLink's edge).
    Http(u16),
    /// Does what the call asks, but answers only after this long (a client timeout).
    Delay(Duration),
    /// Does what the call asks and answers at once, but the answer's body stops after its
    /// first byte and the rest comes only after this long: an answer over a slow link.
    SlowBody(Duration),
}

/// A QR code's login state, as `get_qrcode_status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QrStatus {
    /// Not scanned yet (`wait`).
    Wait,
    /// Scanned, not confirmed on the phone (`scaned`, iLink's spelling).
    Scaned,
    /// Confirmed: the answer carries the bot token (`confirmed`).
    Confirmed,
    /// Expired, or already used for a login (`expired`).
    Expired,
}

impl QrStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wait => "wait",
            Self::Scaned => "scaned",
            Self::Confirmed => "confirmed",
            Self::Expired => "expired",
        }
    }
}

/// A QR code the fake issued.
#[derive(Clone, Debug)]
pub struct QrCode {
    /// The `qrcode` id.
    pub qrcode: String,
    /// `qrcode_img_content`: the URL the QR image encodes.
    pub img_content: String,
    /// Its state now.
    pub status: QrStatus,
    /// The bot token its confirmation issued.
    pub bot_token: Option<String>,
    /// How many `get_qrcode_status` calls asked about it.
    pub polls: usize,
    /// The status its last poll answered.
    pub(super) reported: Option<String>,
}

/// An inbound message the fake queued for `getupdates`.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// Its position in the update log (what a cursor points after).
    pub seq: u64,
    /// Its `message_id`.
    pub message_id: u64,
    /// The sender (`…@im.wechat`).
    pub from_user_id: String,
    /// The `context_token` a reply to it must carry.
    pub context_token: String,
    /// The whole `WeixinMessage`, as `getupdates` returns it.
    pub body: Value,
}

/// What one accepted `sendmessage` carried (its one item).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SentItem {
    /// `text_item.text`.
    Text(String),
    /// An image: the plain bytes the user sees (decrypted from the upload).
    Image(Vec<u8>),
    /// A voice message's plain bytes.
    Voice(Vec<u8>),
    /// A file: `file_item.file_name` and the plain bytes.
    File {
        /// `file_name`.
        name: String,
        /// The plain bytes.
        bytes: Vec<u8>,
    },
    /// A video's plain bytes.
    Video(Vec<u8>),
}

/// One accepted `sendmessage`.
#[derive(Clone, Debug)]
pub struct Sent {
    /// `msg.to_user_id`.
    pub to_user_id: String,
    /// `msg.context_token`.
    pub context_token: String,
    /// `msg.client_id`.
    pub client_id: String,
    /// Its item.
    pub item: SentItem,
    /// Whether the user sees it: false when it was sent past [`REPLY_WINDOW`](super::REPLY_WINDOW)
    /// after the user's last message (iLink answers success and drops it, observed).
    pub delivered: bool,
    /// When it was accepted (real time).
    pub at: Instant,
    /// The request body.
    pub body: Value,
}

impl Sent {
    /// The text, for a text message.
    pub fn text(&self) -> Option<&str> {
        match &self.item {
            SentItem::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// One accepted `sendtyping`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Typing {
    /// `ilink_user_id`.
    pub user: String,
    /// `status`: 1 typing, 2 cancel.
    pub status: i64,
}

/// One accepted `getuploadurl`, and what the CDN then received for it.
#[derive(Clone, Debug)]
pub struct Upload {
    /// `filekey`.
    pub filekey: String,
    /// `media_type`: 1 image, 2 video, 3 file, 4 voice.
    pub media_type: i64,
    /// `to_user_id`.
    pub to_user_id: String,
    /// `rawsize`.
    pub rawsize: u64,
    /// `rawfilemd5` (hex).
    pub rawfilemd5: String,
    /// `filesize` (the ciphertext's size).
    pub filesize: u64,
    /// `aeskey`, decoded from hex.
    pub aeskey: [u8; 16],
    /// The `upload_param` the fake answered.
    pub upload_param: String,
    /// The plain bytes, once an upload to the CDN was accepted.
    pub plain: Option<Vec<u8>>,
    /// The download `encrypt_query_param` the CDN answered (`x-encrypted-param`).
    pub download_param: Option<String>,
    /// Why each refused CDN upload of it was refused (`x-error-message`), in order.
    pub refusals: Vec<String>,
}
