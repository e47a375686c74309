//! Socket Mode frames: what is acknowledged, when, and what a frame asks of the connection.

use std::sync::Mutex;

use super::*;

#[derive(Default)]
struct Seen {
    kinds: Mutex<Vec<String>>,
    again: bool,
}

impl Envelopes for Seen {
    fn needs_identity(&self) -> bool {
        false
    }
    fn identity(&self, _: String, _: String) {}
    fn handle(&self, envelope: Envelope) -> Verdict {
        self.kinds.lock().unwrap().push(envelope.kind);
        if self.again {
            Verdict::Again
        } else {
            Verdict::Ack
        }
    }
    fn connected(&self, _: bool) {}
}

#[test]
fn envelopes_are_acked_by_id_after_the_handler_and_frames_sorted() {
    let seen = Seen::default();
    let (ack, next) = receive(
        r#"{"envelope_id":"e-1","type":"events_api","payload":{},"retry_attempt":0}"#,
        &seen,
    );
    assert_eq!(ack.as_deref(), Some(r#"{"envelope_id":"e-1"}"#));
    assert_eq!(next, Next::Continue);
    let (ack, _) = receive(r#"{"envelope_id":"e-2","type":"brand_new"}"#, &seen);
    assert_eq!(ack.as_deref(), Some(r#"{"envelope_id":"e-2"}"#));
    assert_eq!(*seen.kinds.lock().unwrap(), ["events_api", "brand_new"]);
    assert_eq!(receive(r#"{"type":"hello"}"#, &seen), (None, Next::Ready));
    assert_eq!(
        receive(r#"{"type":"disconnect","reason":"warning"}"#, &seen),
        (None, Next::Disconnect("warning".into()))
    );
    for garbage in ["", "[1]", "{", "\"x\"", r#"{"type":"disconnect"}"#] {
        assert_eq!(receive(garbage, &seen), (None, Next::Continue), "{garbage}");
    }
}

#[test]
fn an_envelope_not_admitted_is_left_for_slack_to_deliver_again() {
    let seen = Seen {
        again: true,
        ..Seen::default()
    };
    let (ack, _) = receive(r#"{"envelope_id":"e-1","type":"events_api"}"#, &seen);
    assert_eq!(ack, None);
}
