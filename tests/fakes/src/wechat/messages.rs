//! Inbound messages as `getupdates` returns them (SDK `types.ts`, `WeixinMessage`): built by
//! [`Inbound`], queued by [`FakeWechat::push`](super::FakeWechat::push) (or several at once,
//! one batch, by [`FakeWechat::push_all`](super::FakeWechat::push_all)), which hosts their
//! media on the CDN and gives each its `context_token`.
//!
//! A message: `{seq, message_id, from_user_id, to_user_id, client_id, create_time_ms,
//! session_id, message_type: 1 (USER), message_state: 2 (FINISH), item_list, context_token}`.
//! Items (SDK): `{type: 1, text_item: {text}}`; `{type: 2, image_item: {media, aeskey,
//! mid_size}}`; `{type: 3, voice_item: {media, encode_type: 6 (silk), playtime, text}}` (the
//! transcript in `text`); `{type: 4, file_item: {media, file_name, md5, len}}` (`len` a
//! string); `{type: 5, video_item: {media, video_size, play_length, video_md5}}`. `media` is
//! `{encrypt_query_param, aes_key, encrypt_type: 1, full_url}`; an image's `aes_key` is
//! base64 of the raw key and its `image_item.aeskey` the hex key, the other types' `aes_key`
//! base64 of the hex key (SDK `pic-decrypt.ts`: both encodings are seen). An image may
//! come unencrypted ([`Inbound::plain_image`]): its `media` names no key.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::cdn::{hex, md5_hex};
use super::records::Pushed;
use super::{BOT_ID, Context, Wechat};

/// One item of an inbound message.
#[derive(Clone, Debug)]
enum Item {
    Text(String),
    Image(Vec<u8>),
    PlainImage(Vec<u8>),
    Voice {
        bytes: Vec<u8>,
        transcript: Option<String>,
        playtime_ms: u64,
    },
    File {
        name: String,
        bytes: Vec<u8>,
    },
    Video(Vec<u8>),
}

/// An inbound message a test builds, from a user (`…@im.wechat`) to the bot.
#[derive(Clone, Debug)]
pub struct Inbound {
    from: String,
    items: Vec<Item>,
    ago: Duration,
}

impl Inbound {
    fn one(from: &str, item: Item) -> Self {
        Self {
            from: from.to_owned(),
            items: vec![item],
            ago: Duration::ZERO,
        }
    }

    /// Sent `ago` before it is pushed (its `create_time_ms`): what iLink holds for a
    /// daemon that was down. Default: when pushed.
    pub fn sent_ago(mut self, ago: Duration) -> Self {
        self.ago = ago;
        self
    }

    /// How long before it is pushed it was sent.
    pub(super) fn ago(&self) -> Duration {
        self.ago
    }

    /// A text message.
    pub fn text(from: &str, text: &str) -> Self {
        Self::one(from, Item::Text(text.to_owned()))
    }

    /// An image whose plain bytes are `bytes` (hosted encrypted on the CDN when pushed).
    pub fn image(from: &str, bytes: &[u8]) -> Self {
        Self::one(from, Item::Image(bytes.to_vec()))
    }

    /// An image hosted unencrypted: its `media` names no key (no `aes_key`, no
    /// `image_item.aeskey`, no `encrypt_type`), and the CDN serves `bytes` as they are
    /// (SDK `media-download.ts`: an image without a key is downloaded plain; iLink's exact
    /// shape of one is not known).
    pub fn plain_image(from: &str, bytes: &[u8]) -> Self {
        Self::one(from, Item::PlainImage(bytes.to_vec()))
    }

    /// A voice message (silk bytes) with WeChat's transcript, when it has one.
    pub fn voice(from: &str, bytes: &[u8], transcript: Option<&str>) -> Self {
        Self::one(
            from,
            Item::Voice {
                bytes: bytes.to_vec(),
                transcript: transcript.map(str::to_owned),
                playtime_ms: 2_000,
            },
        )
    }

    /// A file named `name`.
    pub fn file(from: &str, name: &str, bytes: &[u8]) -> Self {
        Self::one(
            from,
            Item::File {
                name: name.to_owned(),
                bytes: bytes.to_vec(),
            },
        )
    }

    /// A video.
    pub fn video(from: &str, bytes: &[u8]) -> Self {
        Self::one(from, Item::Video(bytes.to_vec()))
    }

    /// The same message with a text item after its items (a caption).
    pub fn and_text(mut self, text: &str) -> Self {
        self.items.push(Item::Text(text.to_owned()));
        self
    }

    /// The sender.
    pub fn from(&self) -> &str {
        &self.from
    }
}

impl Wechat {
    /// The `media` object of `plain`, hosted now; `raw_key`: `aes_key` as base64 of the raw
    /// key (images), else of its hex.
    fn media(&mut self, plain: &[u8], raw_key: bool) -> (Value, [u8; 16], usize) {
        let (param, key) = self.host(plain);
        let aes_key = if raw_key {
            STANDARD.encode(key)
        } else {
            STANDARD.encode(hex(&key))
        };
        let mut media = Map::new();
        media.insert("encrypt_query_param".into(), json!(param));
        media.insert("aes_key".into(), json!(aes_key));
        media.insert("encrypt_type".into(), json!(1));
        if self.media_full_url {
            media.insert("full_url".into(), json!(self.download_url(&param)));
        }
        let size = super::cdn::padded_size(plain.len() as u64) as usize;
        (Value::Object(media), key, size)
    }

    fn item(&mut self, item: &Item) -> Value {
        match item {
            Item::Text(text) => json!({"type": 1, "text_item": {"text": text}}),
            Item::Image(bytes) => {
                let (media, key, size) = self.media(bytes, true);
                json!({"type": 2, "image_item": {"media": media, "aeskey": hex(&key),
                                                 "mid_size": size}})
            }
            Item::PlainImage(bytes) => {
                let param = self.host_plain(bytes);
                let mut media = Map::new();
                media.insert("encrypt_query_param".into(), json!(param));
                if self.media_full_url {
                    media.insert("full_url".into(), json!(self.download_url(&param)));
                }
                json!({"type": 2, "image_item": {"media": media, "mid_size": bytes.len()}})
            }
            Item::Voice {
                bytes,
                transcript,
                playtime_ms,
            } => {
                let (media, _, _) = self.media(bytes, false);
                let mut voice = json!({"media": media, "encode_type": 6, "sample_rate": 16000,
                                       "bits_per_sample": 16, "playtime": playtime_ms});
                if let Some(t) = transcript {
                    voice["text"] = json!(t);
                }
                json!({"type": 3, "voice_item": voice})
            }
            Item::File { name, bytes } => {
                let (media, _, _) = self.media(bytes, false);
                json!({"type": 4, "file_item": {"media": media, "file_name": name,
                                                "md5": md5_hex(bytes),
                                                "len": bytes.len().to_string()}})
            }
            Item::Video(bytes) => {
                let (media, _, size) = self.media(bytes, false);
                json!({"type": 5, "video_item": {"media": media, "video_size": size,
                                                 "play_length": 3, "video_md5": md5_hex(bytes)}})
            }
        }
    }

    /// The `WeixinMessage` of `inbound`, number `seq`, its media hosted now.
    pub(super) fn message(
        &mut self,
        inbound: &Inbound,
        seq: u64,
        message_id: u64,
        context_token: &str,
        created_ms: u64,
    ) -> Value {
        let items: Vec<Value> = inbound.items.iter().map(|i| self.item(i)).collect();
        json!({
            "seq": seq,
            "message_id": message_id,
            "from_user_id": inbound.from,
            "to_user_id": BOT_ID,
            "client_id": format!("wx-client-{message_id}"),
            "create_time_ms": created_ms,
            "update_time_ms": created_ms,
            "session_id": format!("session-{}", inbound.from),
            "group_id": "",
            "message_type": 1,
            "message_state": 2,
            "item_list": items,
            "context_token": context_token,
        })
    }

    /// Queues `inbound` for `getupdates`, hosting its media and giving it a
    /// `context_token`.
    pub(super) fn queue(&mut self, inbound: &Inbound) -> Pushed {
        self.seq += 1;
        let seq = self.seq;
        let message_id = 7_000_000_000_000_000_000 + seq;
        let n = self.next();
        let context_token = STANDARD.encode(format!("fake-context-{n}:{}", inbound.from()));
        let created = self.now();
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let sent = (since_epoch + self.clock_offset).saturating_sub(inbound.ago());
        let created_ms = sent.as_millis() as u64;
        let body = self.message(inbound, seq, message_id, &context_token, created_ms);
        self.contexts.insert(
            context_token.clone(),
            Context {
                user: inbound.from().to_owned(),
                replies: 0,
            },
        );
        self.last_inbound.insert(inbound.from().to_owned(), created);
        let pushed = Pushed {
            seq,
            message_id,
            from_user_id: inbound.from().to_owned(),
            context_token,
            body,
        };
        self.log.push(pushed.clone());
        pushed
    }
}
