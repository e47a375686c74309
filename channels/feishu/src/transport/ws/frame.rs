//! The long connection's binary frame (`pbbp2.Frame`) and the reassembly of split payloads.
//!
//! Every WebSocket message of the Feishu long connection is one protobuf `Frame` (proto2).
//! The messages are written by hand with prost's derive (no `build.rs`, no protoc): the
//! schema is nine fields and the tests pin each field number against hand-built wire bytes.
//! The `required` fields are always encoded, even when zero: the official SDK's decoder
//! rejects a frame or header that lacks one.
//!
//! A data frame whose header `sum` is above 1 carries one part of a larger payload; the
//! parts share the header `message_id` and are ordered by the header `seq` (0-based).
//! [`Reassembler`] joins them, bounded in time ([`PART_TTL`]), in count ([`MAX_PENDING`],
//! [`MAX_PARTS`]) and in memory ([`MAX_PAYLOAD`]); what exceeds a bound is dropped with a
//! warn log and reported as a [`Dropped`] the caller counts.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

/// `Frame::method` of a control frame (ping, pong).
pub const METHOD_CONTROL: i32 = 0;
/// `Frame::method` of a data frame (an event or a card callback).
pub const METHOD_DATA: i32 = 1;

/// The largest payload accepted, whole or reassembled (4 MiB). A larger one is dropped.
pub const MAX_PAYLOAD: usize = 4 * 1024 * 1024;
/// How long the parts of a split payload wait for the rest (as the SDK: 5 s, counted from
/// the latest part). After that the message is forgotten; Feishu pushes it again when its
/// ack does not come.
pub const PART_TTL: Duration = Duration::from_secs(5);
/// At most this many split messages wait for parts at once; a part of a further message
/// is dropped until one completes or expires.
pub const MAX_PENDING: usize = 64;
/// The largest `sum` believed: it sizes a vector, so a hostile value must not.
pub const MAX_PARTS: usize = 1024;

/// One frame header (`pbbp2.Header`): both fields required.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Header {
    /// The header's name (`type`, `message_id`, `sum`, `seq`, `trace_id`, `biz_rt`, …).
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// Its value, always a string on the wire (numbers in decimal).
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// One WebSocket message of the long connection (`pbbp2.Frame`).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Frame {
    /// `SeqID`.
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    /// `LogID`.
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    /// The service number (the `service_id` of the connection URL).
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    /// [`METHOD_CONTROL`] or [`METHOD_DATA`].
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    /// The headers, in wire order.
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    /// `payload_encoding`.
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    /// `payload_type`.
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    /// The payload: event JSON in data frames, a `ClientConfig` JSON in a pong, the ack's
    /// `{"code":…}` going back.
    #[prost(bytes = "bytes", optional, tag = "8")]
    pub payload: Option<Bytes>,
    /// `LogIDNew`.
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

impl Frame {
    /// The first header named `key`, if any.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// The client's keep-alive: a control frame with header `type=ping` for `service`.
    pub fn ping(service: i32) -> Frame {
        Frame {
            service,
            method: METHOD_CONTROL,
            headers: vec![Header {
                key: "type".into(),
                value: "ping".into(),
            }],
            ..Frame::default()
        }
    }

    /// The answer to this data frame: the same frame sent back, its payload replaced by
    /// `{"code":<code>}` (200 accepted, 500 refused) and a header `biz_rt` added with the
    /// handling time in milliseconds.
    pub fn ack(&self, code: u16, biz_rt: Duration) -> Frame {
        let mut ack = self.clone();
        ack.headers.push(Header {
            key: "biz_rt".into(),
            value: biz_rt.as_millis().to_string(),
        });
        ack.payload = Some(Bytes::from(format!("{{\"code\":{code}}}")));
        ack
    }

    /// The payload, empty when absent.
    pub fn payload_bytes(&self) -> Bytes {
        self.payload.clone().unwrap_or_default()
    }
}

/// Why a data frame was dropped instead of delivered. Each has already been logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    /// The payload (whole, or the parts so far) exceeds [`MAX_PAYLOAD`].
    #[error("the payload exceeds {MAX_PAYLOAD} bytes")]
    TooLarge,
    /// [`MAX_PENDING`] split messages already wait for parts.
    #[error("too many split messages are pending")]
    TooManyPending,
    /// `sum`/`seq`/`message_id` are missing or out of range.
    #[error("the frame's sum, seq or message_id headers are invalid")]
    BadParts,
    /// The WebSocket message is not a `Frame` (reported by the client, never by
    /// [`Reassembler`]).
    #[error("the message is not a pbbp2 frame")]
    Undecodable,
}

/// The parts received so far of one split message.
struct Pending {
    /// Indexed by `seq`; `None` until that part arrives.
    parts: Vec<Option<Bytes>>,
    /// Sum of the lengths of the parts received (bounded by [`MAX_PAYLOAD`]).
    len: usize,
    /// When the message is forgotten: [`PART_TTL`] after its latest part.
    expires: Instant,
}

/// Joins split data frames by `message_id`, in `seq` order. Bounded: see the module doc.
#[derive(Default)]
pub struct Reassembler {
    /// At most [`MAX_PENDING`] entries, each at most [`MAX_PAYLOAD`] bytes.
    pending: HashMap<String, Pending>,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many split messages wait for parts.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Takes one data frame. A frame that is not split (`sum` absent or ≤ 1) gives its payload
    /// back at once; a part gives `Ok(None)` until its message is complete, then the joined
    /// payload. Expired messages are forgotten first.
    pub fn push(&mut self, frame: &Frame, now: Instant) -> Result<Option<Bytes>, Dropped> {
        self.pending.retain(|_, p| p.expires > now);
        let payload = frame.payload_bytes();
        let sum = match frame.header("sum") {
            None => 1,
            Some(s) => s.trim().parse::<usize>().map_err(|_| bad_parts("sum"))?,
        };
        if sum <= 1 {
            if payload.len() > MAX_PAYLOAD {
                tracing::warn!(len = payload.len(), "Dropped an oversized Feishu frame.");
                return Err(Dropped::TooLarge);
            }
            return Ok(Some(payload));
        }
        if sum > MAX_PARTS {
            return Err(bad_parts("sum"));
        }
        let seq = frame
            .header("seq")
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|&seq| seq < sum)
            .ok_or_else(|| bad_parts("seq"))?;
        let message_id = frame
            .header("message_id")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| bad_parts("message_id"))?;

        if !self.pending.contains_key(message_id) && self.pending.len() >= MAX_PENDING {
            tracing::warn!(
                message_id,
                pending = self.pending.len(),
                "Dropped a part of a split Feishu frame: too many split messages pending."
            );
            return Err(Dropped::TooManyPending);
        }
        let entry = self
            .pending
            .entry(message_id.to_owned())
            .or_insert_with(|| Pending {
                parts: vec![None; sum],
                len: 0,
                expires: now + PART_TTL,
            });
        if entry.parts.len() != sum {
            // The parts disagree about their number: the message cannot be trusted.
            self.pending.remove(message_id);
            return Err(bad_parts("sum"));
        }
        entry.expires = now + PART_TTL;
        let Some(slot) = entry.parts.get_mut(seq) else {
            return Err(bad_parts("seq"));
        };
        if slot.is_some() {
            // A duplicate (a re-push of the same part): the first copy stays.
            tracing::debug!(
                message_id,
                seq,
                "Ignored a duplicate part of a Feishu frame."
            );
            return Ok(None);
        }
        entry.len += payload.len();
        if entry.len > MAX_PAYLOAD {
            self.pending.remove(message_id);
            tracing::warn!(
                message_id,
                "Dropped a split Feishu frame: its parts exceed the payload limit."
            );
            return Err(Dropped::TooLarge);
        }
        *slot = Some(payload);
        if entry.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let Some(done) = self.pending.remove(message_id) else {
            return Ok(None);
        };
        let mut joined = Vec::with_capacity(done.len);
        for part in done.parts.into_iter().flatten() {
            joined.extend_from_slice(&part);
        }
        Ok(Some(Bytes::from(joined)))
    }
}

fn bad_parts(header: &'static str) -> Dropped {
    tracing::warn!(
        header,
        "Dropped a Feishu data frame with an invalid split header."
    );
    Dropped::BadParts
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn h(key: &str, value: &str) -> Header {
        Header {
            key: key.into(),
            value: value.into(),
        }
    }

    fn part(id: &str, sum: usize, seq: usize, payload: &'static [u8]) -> Frame {
        Frame {
            method: METHOD_DATA,
            headers: vec![
                h("type", "event"),
                h("message_id", id),
                h("sum", &sum.to_string()),
                h("seq", &seq.to_string()),
            ],
            payload: Some(Bytes::from_static(payload)),
            ..Frame::default()
        }
    }

    /// The wire bytes, built by hand from the proto2 encoding: key = field << 3 | wire type.
    fn hand_built() -> Vec<u8> {
        let mut v = vec![
            0x08, 0xAC, 0x02, // 1: seq_id = 300 (varint)
            0x10, 0x07, // 2: log_id = 7
            0x18, 0x02, // 3: service = 2
            0x20, 0x01, // 4: method = 1 (data)
            0x2A, 0x0D, // 5: header, 13 bytes
            0x0A, 0x04, // 1: key, 4 bytes
        ];
        v.extend_from_slice(b"type");
        v.extend_from_slice(&[0x12, 0x05]); // 2: value, 5 bytes
        v.extend_from_slice(b"event");
        v.extend_from_slice(&[0x32, 0x04]); // 6: payload_encoding
        v.extend_from_slice(b"json");
        v.extend_from_slice(&[0x3A, 0x01]); // 7: payload_type
        v.extend_from_slice(b"t");
        v.extend_from_slice(&[0x42, 0x02]); // 8: payload
        v.extend_from_slice(b"{}");
        v.extend_from_slice(&[0x4A, 0x03]); // 9: log_id_new
        v.extend_from_slice(b"abc");
        v
    }

    fn expected() -> Frame {
        Frame {
            seq_id: 300,
            log_id: 7,
            service: 2,
            method: METHOD_DATA,
            headers: vec![h("type", "event")],
            payload_encoding: Some("json".into()),
            payload_type: Some("t".into()),
            payload: Some(Bytes::from_static(b"{}")),
            log_id_new: Some("abc".into()),
        }
    }

    #[test]
    fn decodes_and_encodes_the_hand_built_wire_bytes() {
        let decoded = Frame::decode(hand_built().as_slice()).unwrap();
        assert_eq!(decoded, expected());
        assert_eq!(expected().encode_to_vec(), hand_built());
        assert_eq!(decoded.header("type"), Some("event"));
        assert_eq!(decoded.header("sum"), None);
    }

    /// Recorded frames (`tests/fixtures/ws_frame_*.bin`) decode to what they carry and
    /// encode back to the same bytes; the ping and the ack are what the client writes.
    #[test]
    fn recorded_frames_round_trip() {
        macro_rules! fixture {
            ($name:literal) => {
                &im_bridge_channel::fixture_bytes!($name)[..]
            };
        }
        let round_trip = |bytes: &[u8]| {
            let frame = Frame::decode(bytes).unwrap();
            assert_eq!(frame.encode_to_vec(), bytes, "{frame:?}");
            frame
        };
        let event = round_trip(fixture!("ws_frame_event.bin"));
        assert_eq!(
            (event.method, event.header("type")),
            (METHOD_DATA, Some("event"))
        );
        let json: serde_json::Value = serde_json::from_slice(&event.payload_bytes()).unwrap();
        assert_eq!(json["header"]["event_type"], "im.message.receive_v1");
        let mut reassembler = Reassembler::new();
        let now = Instant::now();
        let first = round_trip(fixture!("ws_frame_event_part_0.bin"));
        assert_eq!(reassembler.push(&first, now), Ok(None));
        let second = round_trip(fixture!("ws_frame_event_part_1.bin"));
        let joined = reassembler.push(&second, now).unwrap().unwrap();
        assert_eq!(joined, event.payload_bytes());
        let pong = round_trip(fixture!("ws_frame_pong.bin"));
        assert_eq!(
            (pong.method, pong.header("type")),
            (METHOD_CONTROL, Some("pong"))
        );
        assert_eq!(
            Frame::ping(event.service).encode_to_vec(),
            fixture!("ws_frame_ping.bin")
        );
        let ack = event.ack(200, Duration::from_millis(3));
        assert_eq!(ack.encode_to_vec(), fixture!("ws_frame_ack.bin"));
    }

    #[test]
    fn required_fields_are_encoded_even_when_zero() {
        // The SDK's decoder rejects a frame without SeqID, LogID, service or method.
        let ping = Frame::ping(0).encode_to_vec();
        let mut want = vec![0x08, 0x00, 0x10, 0x00, 0x18, 0x00, 0x20, 0x00, 0x2A, 0x0C];
        want.extend_from_slice(&[0x0A, 0x04]);
        want.extend_from_slice(b"type");
        want.extend_from_slice(&[0x12, 0x04]);
        want.extend_from_slice(b"ping");
        assert_eq!(ping, want);
    }

    #[test]
    fn ping_is_a_control_frame_for_the_service() {
        let ping = Frame::ping(42);
        assert_eq!(ping.method, METHOD_CONTROL);
        assert_eq!(ping.service, 42);
        assert_eq!(ping.header("type"), Some("ping"));
        assert_eq!(ping.payload, None);
    }

    #[test]
    fn ack_is_the_same_frame_with_code_and_biz_rt() {
        let frame = expected();
        let ack = frame.ack(200, Duration::from_millis(12));
        assert_eq!(ack.seq_id, frame.seq_id);
        assert_eq!(ack.log_id, frame.log_id);
        assert_eq!(ack.service, frame.service);
        assert_eq!(ack.method, frame.method);
        assert_eq!(ack.headers[..1], frame.headers[..]);
        assert_eq!(ack.header("biz_rt"), Some("12"));
        assert_eq!(ack.payload.as_deref(), Some(&b"{\"code\":200}"[..]));
        let refused = frame.ack(500, Duration::ZERO);
        assert_eq!(refused.payload.as_deref(), Some(&b"{\"code\":500}"[..]));
        // The ack survives the wire.
        assert_eq!(Frame::decode(ack.encode_to_vec().as_slice()).unwrap(), ack);
    }

    #[test]
    fn malformed_bytes_are_a_decode_error() {
        let full = hand_built();
        for cut in 1..full.len() {
            // No prefix panics: most are errors, those ending on a field boundary decode.
            let _ = Frame::decode(&full[..cut]);
        }
        assert!(Frame::decode(&full[..full.len() - 1]).is_err());
        assert!(Frame::decode(&[0x2A, 0x7F, 0x01][..]).is_err()); // length beyond the end
        assert!(Frame::decode(&[0x08][..]).is_err()); // a key without its value
        assert!(Frame::decode(&[0x0D, 0x00][..]).is_err()); // seq_id with the wrong wire type
        assert!(Frame::decode(&[0xFF; 12][..]).is_err()); // an endless varint
    }

    #[test]
    fn unsplit_frames_pass_through() {
        let mut r = Reassembler::new();
        let now = Instant::now();
        let one = part("m", 1, 0, b"whole");
        assert_eq!(r.push(&one, now), Ok(Some(Bytes::from_static(b"whole"))));
        let mut bare = one.clone();
        bare.headers.clear();
        assert_eq!(r.push(&bare, now), Ok(Some(Bytes::from_static(b"whole"))));
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn reassembles_in_order() {
        let mut r = Reassembler::new();
        let now = Instant::now();
        assert_eq!(r.push(&part("m", 3, 0, b"ab"), now), Ok(None));
        assert_eq!(r.push(&part("m", 3, 1, b"cd"), now), Ok(None));
        assert_eq!(
            r.push(&part("m", 3, 2, b"ef"), now),
            Ok(Some(Bytes::from_static(b"abcdef")))
        );
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn reassembles_out_of_order_and_interleaved() {
        let mut r = Reassembler::new();
        let now = Instant::now();
        assert_eq!(r.push(&part("a", 3, 2, b"ef"), now), Ok(None));
        assert_eq!(r.push(&part("b", 2, 1, b"YZ"), now), Ok(None));
        assert_eq!(r.push(&part("a", 3, 0, b"ab"), now), Ok(None));
        assert_eq!(
            r.push(&part("b", 2, 0, b"WX"), now),
            Ok(Some(Bytes::from_static(b"WXYZ")))
        );
        assert_eq!(
            r.push(&part("a", 3, 1, b"cd"), now),
            Ok(Some(Bytes::from_static(b"abcdef")))
        );
    }

    #[test]
    fn duplicate_parts_are_ignored() {
        let mut r = Reassembler::new();
        let now = Instant::now();
        assert_eq!(r.push(&part("m", 2, 0, b"ab"), now), Ok(None));
        assert_eq!(r.push(&part("m", 2, 0, b"XX"), now), Ok(None));
        assert_eq!(
            r.push(&part("m", 2, 1, b"cd"), now),
            Ok(Some(Bytes::from_static(b"abcd")))
        );
        // A late duplicate after completion starts a new (incomplete) message, then expires.
        assert_eq!(r.push(&part("m", 2, 1, b"cd"), now), Ok(None));
        assert_eq!(r.pending(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn parts_expire_after_the_ttl() {
        let mut r = Reassembler::new();
        assert_eq!(r.push(&part("m", 2, 0, b"ab"), Instant::now()), Ok(None));
        tokio::time::advance(PART_TTL - Duration::from_millis(1)).await;
        assert_eq!(r.push(&part("other", 2, 0, b"x"), Instant::now()), Ok(None));
        assert_eq!(r.pending(), 2);
        tokio::time::advance(Duration::from_millis(2)).await;
        // "m" expired: its second part starts over instead of completing.
        assert_eq!(r.push(&part("m", 2, 1, b"cd"), Instant::now()), Ok(None));
        assert_eq!(r.pending(), 2);
        tokio::time::advance(PART_TTL).await;
        assert_eq!(
            r.push(&part("z", 1, 0, b"z"), Instant::now()),
            Ok(Some(Bytes::from_static(b"z")))
        );
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn at_most_max_pending_messages_wait() {
        let mut r = Reassembler::new();
        let now = Instant::now();
        for i in 0..MAX_PENDING {
            assert_eq!(r.push(&part(&format!("m{i}"), 2, 0, b"a"), now), Ok(None));
        }
        assert_eq!(
            r.push(&part("one-too-many", 2, 0, b"a"), now),
            Err(Dropped::TooManyPending)
        );
        // Parts of messages already pending still complete.
        assert_eq!(
            r.push(&part("m0", 2, 1, b"b"), now),
            Ok(Some(Bytes::from_static(b"ab")))
        );
        assert_eq!(r.push(&part("now-fits", 2, 0, b"a"), now), Ok(None));
    }

    #[test]
    fn oversized_payloads_are_dropped() {
        let big: &'static [u8] = Box::leak(vec![b'x'; MAX_PAYLOAD / 2 + 1].into_boxed_slice());
        let mut r = Reassembler::new();
        let now = Instant::now();
        assert_eq!(r.push(&part("m", 3, 0, big), now), Ok(None));
        assert_eq!(r.push(&part("m", 3, 1, big), now), Err(Dropped::TooLarge));
        assert_eq!(r.pending(), 0, "the whole message is forgotten");
        let whole: &'static [u8] = Box::leak(vec![b'x'; MAX_PAYLOAD + 1].into_boxed_slice());
        assert_eq!(r.push(&part("w", 1, 0, whole), now), Err(Dropped::TooLarge));
    }

    #[test]
    fn invalid_split_headers_are_dropped() {
        let mut r = Reassembler::new();
        let now = Instant::now();
        assert_eq!(r.push(&part("m", 2, 2, b"a"), now), Err(Dropped::BadParts));
        assert_eq!(r.push(&part("", 2, 0, b"a"), now), Err(Dropped::BadParts));
        assert_eq!(
            r.push(&part("m", MAX_PARTS + 1, 0, b"a"), now),
            Err(Dropped::BadParts)
        );
        let mut bad_sum = part("m", 2, 0, b"a");
        bad_sum.headers[2].value = "two".into();
        assert_eq!(r.push(&bad_sum, now), Err(Dropped::BadParts));
        let mut no_seq = part("m", 2, 0, b"a");
        no_seq.headers.retain(|h| h.key != "seq");
        assert_eq!(r.push(&no_seq, now), Err(Dropped::BadParts));
        // Parts that disagree about `sum` drop the message.
        assert_eq!(r.push(&part("m", 2, 0, b"a"), now), Ok(None));
        assert_eq!(r.push(&part("m", 3, 1, b"b"), now), Err(Dropped::BadParts));
        assert_eq!(r.pending(), 0);
    }
}
