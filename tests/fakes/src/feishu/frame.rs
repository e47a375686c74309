//! The `pbbp2` frame of Feishu's long connection, defined here with prost so the fake does
//! not depend on the adapter it tests (the adapter has its own copy). Field numbers and
//! proto2 `required` markings follow the SDK's `pbbp2.proto`.
//!
//! Every WebSocket message either way is one binary [`Frame`]. `method` 0 is a control
//! frame (`type` header `ping` / `pong`), 1 a data frame (`type` `event` / `card`); the
//! client acknowledges a data frame by sending it back with a JSON payload
//! `{"code": 200}` and an added `biz_rt` header.

/// One `key: value` header of a [`Frame`].
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Header {
    /// Header name, e.g. `type`, `message_id`, `sum`.
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// Header value, always a string (numbers in decimal).
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// A `pbbp2.Frame`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Frame {
    /// Sequence id (the fake numbers the frames it sends).
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    /// Log id.
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    /// Service id, the `service_id` of the connection URL.
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    /// [`METHOD_CONTROL`] or [`METHOD_DATA`].
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    /// Headers in order.
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    /// Payload encoding (unused by Feishu today).
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    /// Payload type (unused by Feishu today).
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    /// The payload: event JSON (or one part of it), an ack's JSON, a pong's ClientConfig.
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    /// The new-style log id.
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

/// `method` of a control frame (ping, pong).
pub const METHOD_CONTROL: i32 = 0;
/// `method` of a data frame (event, card, and their acks).
pub const METHOD_DATA: i32 = 1;

impl Frame {
    /// A frame with `method` and `headers`, every other field zero or empty.
    pub fn new(method: i32, headers: &[(&str, &str)]) -> Self {
        Self {
            seq_id: 0,
            log_id: 0,
            service: 0,
            method,
            headers: headers
                .iter()
                .map(|(k, v)| Header {
                    key: (*k).to_owned(),
                    value: (*v).to_owned(),
                })
                .collect(),
            payload_encoding: None,
            payload_type: None,
            payload: None,
            log_id_new: None,
        }
    }

    /// The first header named `key`.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// Appends a header.
    pub fn push_header(&mut self, key: &str, value: &str) {
        self.headers.push(Header {
            key: key.to_owned(),
            value: value.to_owned(),
        });
    }

    /// The wire bytes.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        prost::Message::encode_to_vec(self)
    }

    /// Parses wire bytes; a malformed message is an error. (prost does not check proto2
    /// presence: an absent required number reads as 0.)
    pub fn decode_bytes(bytes: &[u8]) -> Result<Self, prost::DecodeError> {
        <Self as prost::Message>::decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips_with_every_field() {
        let mut frame = Frame::new(METHOD_DATA, &[("type", "event"), ("sum", "1")]);
        frame.seq_id = 7;
        frame.log_id = 9;
        frame.service = 1;
        frame.payload = Some(b"{\"a\":1}".to_vec());
        frame.payload_type = Some("json".into());
        frame.log_id_new = Some("log-1".into());
        let bytes = frame.encode_to_vec();
        let back = Frame::decode_bytes(&bytes).unwrap();
        assert_eq!(back, frame);
        assert_eq!(back.header("type"), Some("event"));
        assert_eq!(back.header("seq"), None);
    }

    #[test]
    fn required_fields_are_written_even_when_zero() {
        // proto2 `required`: a ping with every number 0 still carries fields 1-4.
        let bytes = Frame::new(METHOD_CONTROL, &[("type", "ping")]).encode_to_vec();
        assert_eq!(&bytes[..8], &[0x08, 0, 0x10, 0, 0x18, 0, 0x20, 0]);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic_and_missing_fields_read_as_zero() {
        assert!(Frame::decode_bytes(&[0xff, 0xff, 0xff]).is_err());
        // Truncated: a payload (field 8) announcing 5 bytes, holding 1.
        assert!(Frame::decode_bytes(&[0x42, 0x05, 0x01]).is_err());
        // prost does not check proto2 presence on decode: absent numbers are 0, as Go's
        // generated code leaves them.
        let only_seq = Frame::decode_bytes(&[0x08, 0x01]).unwrap();
        assert_eq!((only_seq.seq_id, only_seq.method), (1, METHOD_CONTROL));
    }
}
