//! The gateway's JSON payloads `{op, d, s, t, id}` (the wire types are in
//! [`crate::model`]): reading a frame under the size bound, Hello and READY, and writing
//! Identify, Resume and heartbeats.

use std::time::Duration;

use im_bridge_channel::Secret;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Dropped, Ready};
use crate::api::authorization;
use crate::model::{Hello, Identify, Outgoing, ReadyData, Resume};

pub(crate) use crate::model::Payload;

/// op 0: an event (READY, RESUMED, messages).
pub(crate) const OP_DISPATCH: u8 = 0;
/// op 1: a heartbeat (sent by the client; a server's asks for one at once).
pub(crate) const OP_HEARTBEAT: u8 = 1;
/// op 2: Identify.
pub(crate) const OP_IDENTIFY: u8 = 2;
/// op 6: Resume.
pub(crate) const OP_RESUME: u8 = 6;
/// op 7: the server asks the client to reconnect (and resume).
pub(crate) const OP_RECONNECT: u8 = 7;
/// op 9: the session is invalid; `d: true` means it may still be resumed.
pub(crate) const OP_INVALID_SESSION: u8 = 9;
/// op 10: Hello, with the heartbeat interval.
pub(crate) const OP_HELLO: u8 = 10;
/// op 11: a heartbeat's ACK.
pub(crate) const OP_HEARTBEAT_ACK: u8 = 11;

/// The interval used when Hello names none (QQ's usual 41.25 s).
pub(crate) const DEFAULT_HEARTBEAT: Duration = Duration::from_millis(41_250);
/// The shortest interval believed (a zero would be a heartbeat storm).
pub(crate) const MIN_HEARTBEAT: Duration = Duration::from_millis(100);
/// The longest interval believed (a dead connection must be noticed).
pub(crate) const MAX_HEARTBEAT: Duration = Duration::from_secs(5 * 60);

/// Reads one frame, refused over `max` bytes or when it is not a payload.
pub(crate) fn decode(bytes: &[u8], max: usize) -> Result<Payload, Dropped> {
    if bytes.len() > max {
        return Err(Dropped::TooLarge);
    }
    serde_json::from_slice(bytes).map_err(|_| Dropped::Malformed)
}

/// Hello's `heartbeat_interval` (ms), within [`MIN_HEARTBEAT`]..=[`MAX_HEARTBEAT`].
pub(crate) fn heartbeat_interval(d: &Value) -> Duration {
    Hello::deserialize(d)
        .ok()
        .and_then(|hello| hello.heartbeat_interval)
        .map_or(DEFAULT_HEARTBEAT, Duration::from_millis)
        .clamp(MIN_HEARTBEAT, MAX_HEARTBEAT)
}

/// READY's session and bot.
pub(crate) fn ready(d: &Value) -> Option<Ready> {
    let text = |v: &Value| match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let data = ReadyData::deserialize(d).ok()?;
    Some(Ready {
        session_id: text(&data.session_id)?,
        bot_id: text(&data.user.id)?,
        username: data
            .user
            .username
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    })
}

/// A frame the adapter writes, as text.
fn write<D: Serialize>(op: u8, d: D) -> String {
    serde_json::to_string(&Outgoing { op, d }).unwrap_or_default()
}

/// op 2 with `token: "QQBot <t>"`, `intents` and the single shard `[0, 1]`.
pub(crate) fn identify(token: &Secret, intents: u64) -> String {
    let identify = Identify {
        token: authorization(token),
        intents,
        shard: [0, 1],
        properties: serde_json::Map::new(),
    };
    write(OP_IDENTIFY, identify)
}

/// op 6 with the session and the last sequence number seen.
pub(crate) fn resume(token: &Secret, session_id: &str, seq: u64) -> String {
    let resume = Resume {
        token: authorization(token),
        session_id: session_id.to_owned(),
        seq,
    };
    write(OP_RESUME, resume)
}

/// op 1 with the last sequence number seen (`null` before any).
pub(crate) fn heartbeat(seq: Option<u64>) -> String {
    write(OP_HEARTBEAT, seq)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn frames_are_bounded_and_read() {
        let p = decode(
            br#"{"op":0,"s":7,"t":"C2C_MESSAGE_CREATE","id":"e","d":{"id":"m"}}"#,
            1024,
        )
        .unwrap();
        assert_eq!(
            (p.op, p.s, p.t.as_deref(), p.id.as_deref()),
            (0, Some(7), Some("C2C_MESSAGE_CREATE"), Some("e"))
        );
        assert_eq!(decode(br#"{"op":11}"#, 1024).unwrap().op, OP_HEARTBEAT_ACK);
        assert!(matches!(
            decode(&[b' '; 2048], 1024),
            Err(Dropped::TooLarge)
        ));
        assert!(matches!(decode(b"{\"op\":", 1024), Err(Dropped::Malformed)));
        assert!(matches!(
            decode(br#"{"op":-1}"#, 1024),
            Err(Dropped::Malformed)
        ));
    }

    #[test]
    fn hello_and_ready_are_read() {
        assert_eq!(
            heartbeat_interval(&json!({"heartbeat_interval": 45000})),
            Duration::from_secs(45)
        );
        assert_eq!(heartbeat_interval(&json!({})), DEFAULT_HEARTBEAT);
        assert_eq!(
            heartbeat_interval(&json!({"heartbeat_interval": 0})),
            MIN_HEARTBEAT
        );
        assert_eq!(
            heartbeat_interval(&json!({"heartbeat_interval": u64::MAX})),
            MAX_HEARTBEAT
        );
        let fixture: Value =
            serde_json::from_str(im_bridge_channel::fixture!("gateway_ready.json")).unwrap();
        let r = ready(&fixture["d"]).unwrap();
        assert_eq!(r.session_id, "082ee18c-0be3-491b-9d8b-fbd95c51673a");
        assert_eq!(
            (r.bot_id.as_str(), r.username.as_str()),
            ("3889001234", "im-bridge")
        );
        assert!(ready(&json!({"user": {"id": "1"}})).is_none());
    }

    #[test]
    fn identify_resume_and_heartbeat_are_written_as_qq_reads_them() {
        let token = Secret::new("tok");
        let id: Value = serde_json::from_str(&identify(&token, 1 << 25)).unwrap();
        assert_eq!(
            id,
            json!({"op": 2, "d": {"token": "QQBot tok", "intents": 33554432, "shard": [0, 1], "properties": {}}})
        );
        let r: Value = serde_json::from_str(&resume(&token, "s1", 42)).unwrap();
        assert_eq!(
            r,
            json!({"op": 6, "d": {"token": "QQBot tok", "session_id": "s1", "seq": 42}})
        );
        let beat = |seq| serde_json::from_str::<Value>(&heartbeat(seq)).unwrap();
        assert_eq!(beat(None), json!({"op": 1, "d": null}));
        assert_eq!(beat(Some(3)), json!({"op": 1, "d": 3}));
    }
}
