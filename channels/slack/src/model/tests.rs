//! Every wire type against its recorded payloads: read, written back, nothing lost or
//! invented; and the sorting of frames and bodies, unknown kinds included.

use im_bridge_channel::fixture;
use im_bridge_channel::fixtures::round_trip;

use super::*;

#[test]
fn socket_mode_frames_round_trip() {
    let hello: Hello = round_trip(fixture!("socket_hello.json"));
    assert_eq!(hello.connection_info.unwrap().app_id, "A0ABCDEF12");
    assert_eq!(
        hello.debug_info.unwrap().approximate_connection_time,
        Some(18060)
    );
    let bye: Disconnect = round_trip(fixture!("socket_disconnect.json"));
    assert_eq!(bye.reason, "warning");
    let envelope: Envelope = round_trip(fixture!("socket_envelope_events_api.json"));
    assert_eq!(envelope.kind, envelope_kind::EVENTS_API);
    assert_eq!(envelope.retry_attempt, Some(0));
    // The payload is the same event callback the HTTP mode reads.
    let callback: EventCallback = round_trip(&envelope.payload.to_string());
    assert_eq!(callback, round_trip(fixture!("event_message_im.json")));
    let envelope: Envelope = round_trip(fixture!("socket_envelope_slash_commands.json"));
    assert!(envelope.accepts_response_payload);
    let command: SlashCommand = round_trip(&envelope.payload.to_string());
    assert_eq!(command, round_trip(fixture!("slash_command.json")));
    let ack: Ack = round_trip(fixture!("socket_ack.json"));
    assert_eq!(ack.envelope_id, envelope.envelope_id);
}

#[test]
fn frames_are_sorted_and_every_envelope_is_one_to_acknowledge() {
    let read = |text: &str| SocketFrame::read(text.as_bytes()).unwrap();
    assert!(matches!(
        read(fixture!("socket_hello.json")),
        SocketFrame::Hello(_)
    ));
    assert!(matches!(
        read(fixture!("socket_disconnect.json")),
        SocketFrame::Disconnect(d) if d.reason == "warning"
    ));
    assert!(matches!(
        read(fixture!("socket_envelope_events_api.json")),
        SocketFrame::Envelope(e) if e.envelope_id == "dbdd0ef3-1543-4f94-bfb4-133d0e6c1545"
    ));
    // An envelope of a kind nobody knows yet, with fields nobody knows, is still one.
    assert!(matches!(
        read(fixture!("parse_only_socket_envelope_unknown.json")),
        SocketFrame::Envelope(e) if e.kind == "future_kind" && e.envelope_id == "a1b2c3"
    ));
    assert_eq!(
        read(r#"{"type":"ping","x":1}"#),
        SocketFrame::Other("ping".into())
    );
    assert_eq!(read("{}"), SocketFrame::Other(String::new()));
    assert!(SocketFrame::read(b"[1]").is_err());
    assert!(SocketFrame::read(br#"{"envelope_id": 7}"#).is_err());
    assert!(SocketFrame::read(b"not json").is_err());
}

#[test]
fn events_api_bodies_round_trip() {
    let check: UrlVerification = round_trip(fixture!("event_url_verification.json"));
    assert!(check.challenge.starts_with("3eZbrw1a"));
    let im: EventCallback = round_trip(fixture!("event_message_im.json"));
    let Event::Message(message) = &im.event else {
        panic!("{:?}", im.event);
    };
    assert_eq!(message.channel_type.as_deref(), Some("im"));
    assert_eq!(im.authorizations[0].user_id.as_deref(), Some("U0BOT0001"));
    let mention: EventCallback = round_trip(fixture!("event_app_mention.json"));
    assert!(matches!(&mention.event, Event::AppMention(m) if m.thread_ts.is_some()));
    let share: EventCallback = round_trip(fixture!("event_message_file_share.json"));
    let Event::Message(message) = &share.event else {
        panic!("{:?}", share.event);
    };
    assert_eq!(message.files[0].size, Some(48213));
    assert_eq!(message.files[0].mimetype.as_deref(), Some("image/png"));
    assert!(!message.files[0].needs_file_info());
    // Over Slack Connect a file comes as its id alone; files.info tells the rest.
    let connect: EventCallback = round_trip(fixture!("event_message_file_share_connect.json"));
    let Event::Message(message) = &connect.event else {
        panic!("{:?}", connect.event);
    };
    assert!(message.files[0].needs_file_info() && message.files[0].url_private.is_none());
    let info: FilesInfo = round_trip(fixture!("response_files_info.json"));
    assert_eq!(info.file.id, message.files[0].id);
    assert!(info.file.url_private_download.is_some() && !info.file.needs_file_info());
    let bot: EventCallback = round_trip(fixture!("event_message_bot.json"));
    assert!(matches!(&bot.event, Event::Message(m) if m.bot_id.is_some()));
    let edit: EventCallback = round_trip(fixture!("event_message_changed.json"));
    assert!(
        matches!(&edit.event, Event::Message(m) if m.subtype.as_deref() == Some("message_changed"))
    );
}

#[test]
fn unknown_fields_and_event_types_do_not_fail_the_body() {
    let full = EventBody::read(fixture!("parse_only_event_full.json").as_bytes()).unwrap();
    let EventBody::EventCallback(callback) = full else {
        panic!("{full:?}");
    };
    assert!(matches!(&callback.event, Event::Message(m) if m.text.as_deref() == Some("hi there")));
    let unknown = EventBody::read(fixture!("parse_only_event_unknown_type.json").as_bytes());
    let Ok(EventBody::EventCallback(callback)) = unknown else {
        panic!("{unknown:?}");
    };
    assert_eq!(callback.event, Event::Other);
    assert_eq!(callback.event_id, "Ev0REACT001");
    assert!(matches!(
        EventBody::read(fixture!("event_url_verification.json").as_bytes()),
        Ok(EventBody::UrlVerification(_))
    ));
    assert_eq!(
        EventBody::read(br#"{"type":"app_rate_limited","minute_rate_limited":1}"#).unwrap(),
        EventBody::Other("app_rate_limited".into())
    );
    assert!(EventBody::read(b"\"text\"").is_err());
    assert!(EventBody::read(br#"{"type":"event_callback"}"#).is_err());
}

#[test]
fn a_slash_command_reads_from_its_form_body() {
    let form = "token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&team_domain=example&channel_id=C2147483705&channel_name=test&user_id=U2147483697&user_name=Steve&command=%2Fgoal&text=ship+the+%3Crelease%3E&api_app_id=A0ABCDEF12&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1234%2F5678&trigger_id=13345224609.738474920.8088930838d88f008e0";
    let command = SlashCommand::from_form(form.as_bytes()).unwrap();
    assert_eq!(command.command, "/goal");
    assert_eq!(command.text, "ship the <release>");
    assert_eq!(command.channel_id, "C2147483705");
    assert_eq!(
        command.trigger_id.as_deref(),
        Some("13345224609.738474920.8088930838d88f008e0")
    );
    assert!(SlashCommand::from_form(b"text=no+command").is_err());
}

#[test]
fn web_api_answers_and_requests_round_trip() {
    let limited: Status = round_trip(fixture!("response_error_ratelimited.json"));
    assert_eq!(
        (limited.ok, limited.error.as_deref()),
        (false, Some("ratelimited"))
    );
    let refused: Status = round_trip(fixture!("response_error_invalid_auth.json"));
    assert_eq!(refused.response_metadata.unwrap().messages.len(), 1);
    let posted: Posted = round_trip(fixture!("response_post_message.json"));
    assert_eq!(
        (posted.channel.as_str(), posted.ts.as_str()),
        ("C0LAN2Q65", "1503435956.000247")
    );
    assert_eq!(posted.status.warning.as_deref(), Some("missing_charset"));
    let me: AuthTest = round_trip(fixture!("response_auth_test.json"));
    assert_eq!(
        (me.user_id.as_str(), me.team_id.as_str()),
        ("U0BOT0001", "T0LAN2Q3S")
    );
    let open: ConnectionsOpen = round_trip(fixture!("response_connections_open.json"));
    assert!(open.url.starts_with("wss://"));
    let upload: UploadUrl = round_trip(fixture!("response_upload_url.json"));
    assert_eq!(upload.file_id, "F0UPLOAD0001");
    let response: CommandResponse = round_trip(fixture!("request_command_response.json"));
    assert_eq!(response.response_type, "in_channel");
    let post: PostMessage = round_trip(fixture!("request_post_message.json"));
    assert!(!post.unfurl_links);
    let _: UpdateMessage = round_trip(fixture!("request_update_message.json"));
    let reaction: AddReaction = round_trip(fixture!("request_add_reaction.json"));
    assert_eq!(reaction.name, "eyes");
    let complete: CompleteUpload = round_trip(fixture!("request_complete_upload.json"));
    assert_eq!(complete.files[0].id, upload.file_id);
}
