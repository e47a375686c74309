//! The client against the fake QQ over loopback: the reply body and headers, the reply
//! budget (seqs never reused, replies given back only when nothing was delivered), the
//! one retry on a refused token, rate limits, the windows, downloads.

use im_bridge_fakes::qq::{self as fake, Event, Failure, FakeQq};

use serde_json::json;

use super::*;

async fn start() -> (FakeQq, Api) {
    let fake = FakeQq::start().await.unwrap();
    let api = Api::new(
        &fake.api_url(),
        &fake.token_url(),
        fake::APP_ID,
        Secret::new(fake::CLIENT_SECRET),
    )
    .unwrap()
    .with_file_hosts(FileHosts::new(["127.0.0.1"]).unwrap());
    (fake, api)
}

/// A pushed event and the reply budget of its message.
fn source(fake: &FakeQq, event: &Event) -> ReplyContext {
    fake.push(event);
    let target = Target::from_chat_id(&im_bridge_channel::ChatId::new(event.chat_id())).unwrap();
    ReplyContext::new(
        target,
        MessageId::new(event.message_id()),
        SystemTime::now(),
    )
}

#[tokio::test]
async fn a_reply_names_its_source_and_seq_with_the_bots_headers() {
    let (fake, api) = start().await;
    let group = Event::group_at("G1", "M1", "hi");
    let mut ctx = source(&fake, &group);
    let sent = api.reply(&mut ctx, "你好 there", None).await.unwrap();
    assert_eq!(sent.msg_seq, 1);
    assert!(sent.id.as_str().starts_with("ROBOT1.0_"));
    let call = &fake.calls_to("group_reply")[0];
    assert_eq!(call.path, "/v2/groups/G1/messages");
    assert_eq!(
        call.body,
        json!({"msg_type": 0, "content": "你好 there", "msg_id": group.message_id(), "msg_seq": 1})
    );
    assert_eq!(
        call.authorization.as_deref(),
        Some(format!("QQBot {}", fake.tokens()[0]).as_str())
    );
    assert_eq!(call.app_id.as_deref(), Some(fake::APP_ID));
    let c2c = Event::c2c("U1", "hi");
    let mut ctx = source(&fake, &c2c);
    api.reply(&mut ctx, "a", None).await.unwrap();
    assert_eq!(fake.calls_to("c2c_reply")[0].path, "/v2/users/U1/messages");
    assert_eq!(fake.replies().len(), 2);
}

#[tokio::test]
async fn five_replies_then_none_without_a_request() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    for n in 1..=5 {
        assert_eq!(api.reply(&mut ctx, "part", None).await.unwrap().msg_seq, n);
    }
    let calls = fake.calls().len();
    assert!(matches!(
        api.reply(&mut ctx, "one more", None).await,
        Err(ApiError::RepliesExhausted)
    ));
    assert_eq!(fake.calls().len(), calls, "nothing was sent");
    let mut old = ReplyContext::new(
        ctx.target().clone(),
        ctx.source().clone(),
        SystemTime::now() - C2C_WINDOW,
    );
    assert!(matches!(
        api.reply(&mut old, "late", None).await,
        Err(ApiError::WindowClosed)
    ));
    assert_eq!(fake.calls().len(), calls);
}

#[tokio::test]
async fn a_refused_token_is_replaced_once_and_the_retry_takes_a_new_seq() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::group_at("G1", "M1", "hi"));
    api.reply(&mut ctx, "first", None).await.unwrap();
    fake.make_token_stale();
    let sent = api.reply(&mut ctx, "second", None).await.unwrap();
    assert_eq!(sent.msg_seq, 3, "seq 2 went with the refused token");
    let statuses = fake.statuses("group_reply");
    assert_eq!(statuses, [200, 401, 200]);
    assert_eq!(fake.tokens().len(), 2);
    assert_eq!(ctx.used(), 2, "the refused attempt gave its reply back");
}

#[tokio::test]
async fn a_rate_limit_is_a_retry_hint_and_sends_nothing() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    for failure in [Failure::Code(22009), Failure::CodeOk(22009)] {
        fake.fail_next("c2c_reply", failure);
        let error = api.reply(&mut ctx, "x", None).await.unwrap_err();
        assert!(
            matches!(error, ApiError::Http(HttpError::RetryAfter(_))),
            "{error:?}"
        );
        assert!(matches!(
            im_bridge_channel::ChannelError::from(error),
            im_bridge_channel::ChannelError::RetryAfter(_)
        ));
        assert_eq!(ctx.used(), 0);
    }
    assert_eq!(api.reply(&mut ctx, "x", None).await.unwrap().msg_seq, 3);
}

#[tokio::test]
async fn a_window_closed_on_the_platform_is_not_retried() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::group_at("G1", "M1", "hi"));
    fake.advance_clock(GROUP_WINDOW);
    let error = api.reply(&mut ctx, "late", None).await.unwrap_err();
    // QQ's own refusal reads as the window closed: the daemon holds the answer.
    assert!(matches!(error, ApiError::WindowClosed), "{error:?}");
    assert!(matches!(
        im_bridge_channel::ChannelError::from(ApiError::WindowClosed),
        im_bridge_channel::ChannelError::ReplyWindow(_)
    ));
    let calls = fake.calls_to("group_reply");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].code, Some(fake::code::REPLY_EXPIRED));
    assert_eq!(ctx.used(), 0);
    // The budget knows now: the next reply is refused without a call.
    let again = api.reply(&mut ctx, "later", None).await.unwrap_err();
    assert!(matches!(again, ApiError::WindowClosed), "{again:?}");
    assert_eq!(fake.calls_to("group_reply").len(), 1);
    let text = format!("{error} {error:?}");
    assert!(
        !text.contains("late") && !text.contains("fake-token"),
        "{text}"
    );
}

#[tokio::test]
async fn a_server_error_may_have_posted_so_its_reply_counts() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    fake.fail_next("c2c_reply", Failure::Http(502));
    let error = api.reply(&mut ctx, "maybe", None).await.unwrap_err();
    assert!(error.may_have_delivered(), "{error:?}");
    assert_eq!(ctx.used(), 1);
    assert_eq!(fake.calls_to("c2c_reply").len(), 1, "never sent twice");
}

#[tokio::test]
async fn downloads_are_bounded_and_carry_no_token() {
    let (fake, api) = start().await;
    let url = fake.put_file("a.png", vec![7u8; 1000], "image/png");
    let bytes = api.download(&url, 1000).await.unwrap();
    assert_eq!(bytes.len(), 1000);
    let call = fake.calls_to("file").pop().unwrap();
    assert_eq!(call.authorization, None);
    assert!(matches!(
        api.download(&url, 999).await,
        Err(ApiError::Http(HttpError::TooLarge { limit: 999 }))
    ));
    for bad in ["ftp://h/x", "https://user:pw@h/x", "http://"] {
        assert!(
            matches!(
                api.download(bad, 10).await,
                Err(ApiError::Http(HttpError::BadUrl))
            ),
            "{bad}"
        );
    }
    let missing = format!("{}/files/nope", fake.api_url());
    assert!(matches!(
        api.download(&missing, 10).await,
        Err(ApiError::Http(HttpError::Status { status: 404, .. }))
    ));
    assert_eq!(
        attachment_url("//h/x").map(String::from).as_deref(),
        Some("https://h/x")
    );
    // A host `file_hosts` does not list is refused before any request.
    let before = fake.calls_to("file").len();
    let port = reqwest::Url::parse(&url).unwrap().port().unwrap();
    let elsewhere = format!("http://localhost:{port}/files/a.png");
    assert!(matches!(
        api.download(&elsewhere, 1000).await,
        Err(ApiError::Http(HttpError::HostNotAllowed))
    ));
    let other_port = api
        .clone()
        .with_file_hosts(FileHosts::new([format!("127.0.0.1:{}", port + 1)]).unwrap());
    assert!(matches!(
        other_port.download(&url, 1000).await,
        Err(ApiError::Http(HttpError::HostNotAllowed))
    ));
    let qq_only = api.with_file_hosts(FileHosts::new(FILE_HOSTS).unwrap());
    assert!(matches!(
        qq_only.download(&url, 1000).await,
        Err(ApiError::Http(HttpError::HostNotAllowed))
    ));
    assert_eq!(fake.calls_to("file").len(), before, "nothing was fetched");
}

#[tokio::test]
async fn discovery_answers_the_gateway_url() {
    let (fake, api) = start().await;
    assert_eq!(
        api.gateway_url().await.unwrap(),
        format!("ws://{}/websocket", fake.addr())
    );
    fake.fail_next("gateway", Failure::CodeOk(40034001));
    assert!(matches!(
        api.gateway_url().await,
        Err(ApiError::Api { code: 40034001, .. })
    ));
    let debug = format!("{api:?}");
    assert!(
        !debug.contains(fake::CLIENT_SECRET) && !debug.contains("fake-token"),
        "{debug}"
    );
}

#[tokio::test]
async fn redirects_are_not_followed() {
    // An API base that redirects elsewhere (with the token): the answer is a refusal.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::TEMPORARY_REDIRECT,
            [("location", "http://127.0.0.1:9/elsewhere")],
        )
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    let fake = FakeQq::start().await.unwrap();
    let api = Api::new(
        &format!("http://{addr}"),
        &fake.token_url(),
        fake::APP_ID,
        Secret::new(fake::CLIENT_SECRET),
    )
    .unwrap();
    assert!(matches!(
        api.gateway_url().await,
        Err(ApiError::Api { status: 307, .. })
    ));
}

#[tokio::test]
async fn a_keyed_reply_sent_again_is_shown_once_and_answered_as_sent() {
    let (fake, api) = start().await;
    let c2c = Event::c2c("U1", "hi");
    let mut ctx = source(&fake, &c2c);
    let seq = keyed_seq(0x0123_4567_89ab_cdef);
    let first = api.reply(&mut ctx, "the answer", Some(seq)).await.unwrap();
    assert_eq!(first.msg_seq, seq);
    // The same reply again (its answer was lost, or the bridge restarted): QQ refuses
    // the repeated seq, and the reply counts as the one that landed.
    let again = api.reply(&mut ctx, "the answer", Some(seq)).await.unwrap();
    assert_eq!(again.msg_seq, seq);
    assert_eq!(fake.replies().len(), 1, "{:#?}", fake.replies());
    // Counted seqs go on as before, apart from the keyed one.
    assert_eq!(api.reply(&mut ctx, "other", None).await.unwrap().msg_seq, 1);
    // An unkeyed reply refused as a duplicate is no success.
    fake.fail_next("c2c_reply", Failure::Code(fake::code::DUPLICATE_SEQ));
    assert!(api.reply(&mut ctx, "x", None).await.is_err());
}

#[tokio::test]
async fn a_reply_refused_for_a_link_goes_again_with_the_link_defanged_under_a_new_seq() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    let text = "See the docs (https://docs.example.org/a/b.html).";
    let sent = api.reply(&mut ctx, text, None).await.unwrap();
    assert_eq!(sent.msg_seq, 2, "the refused seq 1 is not used again");
    let calls = fake.calls_to("c2c_reply");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].code, Some(fake::code::URL_NOT_ALLOWED));
    let replies = fake.replies();
    assert_eq!(replies.len(), 1);
    assert_eq!(
        replies[0].content,
        "See the docs (docs[.]example[.]org/a/b[.]html)."
    );
    assert_eq!(ctx.used(), 1, "the refused attempt is given back");
    // A group reply alike, and a refusal with nothing to defang stays a refusal.
    let mut group = source(&fake, &Event::group_at("G1", "M1", "hi"));
    let sent = api
        .reply(&mut group, "at www.example.com", None)
        .await
        .unwrap();
    assert_eq!(fake.replies()[1].content, "at www[.]example[.]com");
    assert_eq!(sent.msg_seq, 2);
    fake.fail_next("group_reply", Failure::Code(fake::code::URL_NOT_ALLOWED));
    let refused = api.reply(&mut group, "no link", None).await;
    assert!(
        matches!(refused, Err(ApiError::Api { code: 40054010, .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_keyed_reply_refused_for_a_link_lands_once_under_its_defanged_seq() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    let seq = keyed_seq(0x0123_4567_89ab_cdef);
    let text = "read https://example.com/x";
    let sent = api.reply(&mut ctx, text, Some(seq)).await.unwrap();
    assert_eq!(sent.msg_seq, reply::defanged_seq(seq));
    // The same reply again (its answer was lost): it goes defanged under the same seq,
    // which QQ refuses as a duplicate; it is shown once, counted once.
    let calls = fake.calls_to("c2c_reply").len();
    let again = api.reply(&mut ctx, text, Some(seq)).await.unwrap();
    assert_eq!(again.msg_seq, reply::defanged_seq(seq));
    assert_eq!(fake.calls_to("c2c_reply").len(), calls + 1, "one request");
    let replies = fake.replies();
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_eq!(replies[0].content, "read example[.]com/x");
    assert_eq!(ctx.used(), 1);
}

/// A reply at the budget, every word of it a domain: defanged, it outgrows the budget.
fn full_of_domains() -> String {
    let mut text = String::new();
    while text.len() + "docs.example.org ".len() <= MAX_REPLY_BYTES {
        text.push_str("docs.example.org ");
    }
    text
}

#[tokio::test]
async fn a_defanged_reply_over_the_budget_goes_in_parts_within_it() {
    let (fake, api) = start().await;
    let text = full_of_domains();
    let defanged = links::defang(&text).unwrap();
    assert!(
        defanged.len() > MAX_REPLY_BYTES,
        "the case is the one it tests"
    );
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    let sent = api.reply(&mut ctx, &text, None).await.unwrap();
    assert_eq!(sent.msg_seq, 2, "the first part, after the refused seq 1");
    let replies = fake.replies();
    assert_eq!(replies.len(), 2, "{replies:#?}");
    assert!(replies.iter().all(|r| r.content.len() <= MAX_REPLY_BYTES));
    let seqs: Vec<u64> = replies.iter().map(|r| r.msg_seq).collect();
    assert_eq!(seqs, [2, 3]);
    assert_eq!(sent.id.as_str(), replies[0].id);
    let joined: String = replies.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(joined, defanged, "nothing lost, nothing added");
    assert_eq!(ctx.used(), 2, "each part is a reply");
    // A keyed reply alike: its first part under the defanged seq, the rest under seqs
    // drawn from it.
    let mut ctx = source(&fake, &Event::group_at("G1", "M1", "hi"));
    let seq = keyed_seq(0x0123_4567_89ab_cdef);
    let sent = api.reply(&mut ctx, &text, Some(seq)).await.unwrap();
    let defanged_seq = reply::defanged_seq(seq);
    assert_eq!(sent.msg_seq, defanged_seq);
    let replies = fake.replies_to(ctx.source().as_str());
    let seqs: Vec<u64> = replies.iter().map(|r| r.msg_seq).collect();
    let second = reply::defanged_part_seq(defanged_seq, 1);
    assert_eq!(seqs, [u64::from(defanged_seq), u64::from(second)]);
    assert!(replies.iter().all(|r| r.content.len() <= MAX_REPLY_BYTES));
}

#[tokio::test]
async fn a_keyed_defanged_reply_in_parts_tried_again_shows_each_part_once() {
    let (fake, api) = start().await;
    let text = full_of_domains();
    let defanged = links::defang(&text).unwrap();
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    let seq = keyed_seq(0x0123_4567_89ab_cdef);
    // Refused for its links, sent again defanged in two parts: QQ takes the second part
    // and its answer is lost (a timeout, as far as the bridge can tell).
    fake.fail("c2c_reply", fake::Trigger::Nth(3), Failure::AnswerLost);
    {
        let reply = api.reply(&mut ctx, &text, Some(seq));
        let taken = fake.wait_replies(2, std::time::Duration::from_secs(10));
        tokio::select! {
            taken = taken => { taken.unwrap(); }
            sent = reply => panic!("the second part's answer was lost: {sent:?}"),
        }
    }
    // The daemon tries the reply again: both parts land once, nothing is shown twice.
    api.reply(&mut ctx, &text, Some(seq)).await.unwrap();
    let replies = fake.replies();
    assert_eq!(replies.len(), 2, "each part shown once");
    let joined: String = replies.iter().map(|r| r.content.as_str()).collect();
    assert!(joined == defanged, "nothing lost, nothing added");
    assert_eq!(ctx.used(), 2, "each part counted once");
}

#[tokio::test]
async fn a_keyed_reply_whose_defanged_send_was_lost_is_sent_again_defanged() {
    let (fake, api) = start().await;
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    let seq = keyed_seq(0x0123_4567_89ab_cdef);
    let text = "read https://example.com/x";
    // The defanged send is refused with a 5xx: it may have landed, and it did not.
    fake.fail("c2c_reply", fake::Trigger::Nth(2), Failure::Http(502));
    assert!(api.reply(&mut ctx, text, Some(seq)).await.is_err());
    assert!(fake.replies().is_empty());
    // Tried again, it goes defanged at once (the refused seq may be spent) and lands.
    let sent = api.reply(&mut ctx, text, Some(seq)).await.unwrap();
    assert_eq!(sent.msg_seq, reply::defanged_seq(seq));
    assert_eq!(fake.replies().len(), 1);
    assert_eq!(ctx.used(), 1);
}

#[tokio::test]
async fn a_link_on_a_registered_domain_is_sent_as_written() {
    let (fake, api) = start().await;
    fake.register_domains(&["example.com"]);
    let mut ctx = source(&fake, &Event::c2c("U1", "hi"));
    let text = "read https://docs.example.com/x.html";
    api.reply(&mut ctx, text, None).await.unwrap();
    assert_eq!(fake.calls_to("c2c_reply").len(), 1);
    assert_eq!(fake.replies()[0].content, text);
}
