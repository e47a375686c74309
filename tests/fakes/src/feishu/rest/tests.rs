//! The rules of the REST fake, driven without sockets on a paused clock.
use tokio::time::advance;

use super::super::{MAX_CARD_BYTES, MAX_TEXT_BYTES, PATCHES_PER_SECOND, TOKEN_EXPIRE_SECS};
use super::*;

fn card(shared: bool, text: &str) -> String {
    json!({"config": {"wide_screen_mode": true, "update_multi": shared},
        "elements": [{"tag": "markdown", "content": text}]})
    .to_string()
}

fn code_of(a: &Answer) -> i64 {
    super::code_of(a).unwrap_or(-1)
}

fn body(a: Answer) -> Value {
    a.json_body().unwrap().clone()
}

/// A user message in `oc_1` and the bot's card replying to it.
fn with_card(inner: &mut Feishu, shared: bool) -> String {
    inner.user_messages.insert("om_user".into(), "oc_1".into());
    let a = reply(
        inner,
        "om_user",
        &json!({"msg_type": "interactive", "content": card(shared, "thinking...")}),
    );
    assert_eq!(code_of(&a), 0);
    body(a)["data"]["message_id"].as_str().unwrap().to_owned()
}

fn patch_to(inner: &mut Feishu, id: &str, text: &str) -> Answer {
    patch(inner, id, &json!({"content": card(true, text)}))
}

#[tokio::test(start_paused = true)]
async fn a_message_takes_five_patches_a_second_then_230020() {
    let mut inner = Feishu::new();
    let id = with_card(&mut inner, true);
    for i in 0..PATCHES_PER_SECOND {
        assert_eq!(code_of(&patch_to(&mut inner, &id, &format!("p{i}"))), 0);
        advance(Duration::from_millis(100)).await;
    }
    let refused = patch_to(&mut inner, &id, "too fast");
    assert_eq!(
        (refused.status, code_of(&refused)),
        (400, code::RATE_LIMITED)
    );
    // The first patch leaves the window 1 s after it was accepted.
    advance(Duration::from_millis(500)).await;
    assert_eq!(code_of(&patch_to(&mut inner, &id, "again")), 0);
    assert_eq!(
        code_of(&patch_to(&mut inner, &id, "too fast")),
        code::RATE_LIMITED
    );
    assert_eq!(inner.rate_limited, 2);
    let m = &inner.messages[0];
    assert_eq!(m.patches.len(), PATCHES_PER_SECOND + 1);
    assert_eq!(
        card_text(&serde_json::from_str(&m.content).unwrap()),
        "again"
    );
    // Another message has its own window.
    let other = with_card(&mut inner, true);
    assert_eq!(code_of(&patch_to(&mut inner, &other, "x")), 0);
}

#[test]
fn only_shared_cards_are_patchable_before_and_after() {
    let mut inner = Feishu::new();
    let unshared = with_card(&mut inner, false);
    assert_eq!(
        code_of(&patch_to(&mut inner, &unshared, "x")),
        code::CARD_CONTENT_FAILED
    );
    let shared = with_card(&mut inner, true);
    let to_unshared = patch(&mut inner, &shared, &json!({"content": card(false, "x")}));
    assert_eq!(code_of(&to_unshared), code::CARD_CONTENT_FAILED);
    assert!(inner.messages.iter().all(|m| m.patches.is_empty()));
}

#[test]
fn unknown_ids_users_messages_and_texts_cannot_be_patched() {
    let mut inner = Feishu::new();
    with_card(&mut inner, true);
    assert_eq!(
        code_of(&patch_to(&mut inner, "om_nope", "x")),
        code::INVALID_PARAMETER
    );
    assert_eq!(
        code_of(&patch_to(&mut inner, "om_user", "x")),
        code::NOT_SENDER
    );
    let text = reply(
        &mut inner,
        "om_user",
        &json!({"msg_type": "text", "content": "{\"text\":\"hi\"}"}),
    );
    let id = body(text)["data"]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        code_of(&patch_to(&mut inner, &id, "x")),
        code::INVALID_PARAMETER
    );
    assert_eq!(
        code_of(&reply(
            &mut inner,
            "om_nope",
            &json!({"msg_type": "text", "content": "{}"})
        )),
        code::INVALID_PARAMETER
    );
    assert_eq!(
        code_of(&patch(&mut inner, &id, &json!({}))),
        code::FIELD_VALIDATION
    );
}

#[test]
fn cards_are_limited_to_30_kb_and_texts_to_150_kb() {
    let mut inner = Feishu::new();
    let id = with_card(&mut inner, true);
    // The limit is on the request body, where the card is a JSON string: escaped again.
    let overhead = Value::from(card(true, "")).to_string().len();
    let fits = "a".repeat(MAX_CARD_BYTES - overhead);
    assert_eq!(code_of(&patch_to(&mut inner, &id, &fits)), 0);
    let over = fits.clone() + "a";
    assert_eq!(
        code_of(&patch_to(&mut inner, &id, &over)),
        code::CONTENT_TOO_LONG
    );
    let big = json!({"msg_type": "interactive", "content": card(true, &over)});
    assert_eq!(
        code_of(&reply(&mut inner, "om_user", &big)),
        code::CONTENT_TOO_LONG
    );
    // Quotes take four bytes there: a card of 8 KB of them is over.
    let quoted = "\"".repeat(8 * 1024);
    assert_eq!(
        code_of(&patch_to(&mut inner, &id, &quoted)),
        code::CONTENT_TOO_LONG
    );
    let text = |n: usize| json!({"text": "a".repeat(n)}).to_string();
    let ok = json!({"msg_type": "text", "content": text(MAX_TEXT_BYTES - 11)});
    assert_eq!(code_of(&reply(&mut inner, "om_user", &ok)), 0);
    let long = json!({"msg_type": "text", "content": text(MAX_TEXT_BYTES - 10)});
    assert_eq!(
        code_of(&reply(&mut inner, "om_user", &long)),
        code::CONTENT_TOO_LONG
    );
    let not_json = json!({"msg_type": "interactive", "content": "{not json"});
    assert_eq!(
        code_of(&reply(&mut inner, "om_user", &not_json)),
        code::CARD_CONTENT_FAILED
    );
}

#[tokio::test(start_paused = true)]
async fn a_stale_token_is_refused_once_and_a_fresh_one_works() {
    let mut inner = Feishu::new();
    let creds = json!({"app_id": APP_ID, "app_secret": APP_SECRET});
    let first = body(token(&mut inner, &creds));
    assert_eq!(first["expire"], TOKEN_EXPIRE_SECS);
    let t1 = first["tenant_access_token"].as_str().unwrap().to_owned();
    assert!(check_token(&mut inner, Some(&t1)).is_ok());
    // More than 30 minutes left: the same token comes back.
    let again = body(token(&mut inner, &creds));
    assert_eq!(again["tenant_access_token"], t1.as_str());

    inner.tokens.stale_next();
    let refused = check_token(&mut inner, Some(&t1)).err().unwrap();
    assert_eq!(code_of(&refused), code::TOKEN_INVALID);
    assert_eq!(
        code_of(&check_token(&mut inner, Some(&t1)).err().unwrap()),
        code::TOKEN_INVALID
    );
    let fresh = body(token(&mut inner, &creds));
    let t2 = fresh["tenant_access_token"].as_str().unwrap().to_owned();
    assert_ne!(t1, t2);
    assert!(
        check_token(&mut inner, Some(&t2)).is_ok(),
        "stale only once"
    );
    assert_eq!(
        code_of(&check_token(&mut inner, None).err().unwrap()),
        code::TOKEN_MISSING
    );
    assert_eq!(
        code_of(&check_token(&mut inner, Some("t-forged")).err().unwrap()),
        code::TOKEN_INVALID
    );
}

#[tokio::test(start_paused = true)]
async fn tokens_expire_and_near_expiry_a_new_one_is_issued_while_the_old_stays_valid() {
    let mut inner = Feishu::new();
    let creds = json!({"app_id": APP_ID, "app_secret": APP_SECRET});
    let t1 = body(token(&mut inner, &creds))["tenant_access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    advance(Duration::from_secs(TOKEN_EXPIRE_SECS - 20 * 60)).await;
    let t2 = body(token(&mut inner, &creds))["tenant_access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(t1, t2);
    assert!(check_token(&mut inner, Some(&t1)).is_ok());
    advance(Duration::from_secs(20 * 60)).await;
    assert_eq!(
        code_of(&check_token(&mut inner, Some(&t1)).err().unwrap()),
        code::TOKEN_INVALID
    );
    assert!(check_token(&mut inner, Some(&t2)).is_ok());
    let wrong = json!({"app_id": APP_ID, "app_secret": "nope"});
    assert_eq!(
        code_of(&token(&mut inner, &wrong)),
        code::APP_SECRET_INVALID
    );
    assert_eq!(code_of(&token(&mut inner, &json!({}))), code::INVALID_PARAM);
}

#[test]
fn reactions_are_kept_in_order_and_validated() {
    let mut inner = Feishu::new();
    with_card(&mut inner, true);
    for emoji in ["OK", "DONE"] {
        let body = json!({"reaction_type": {"emoji_type": emoji}});
        assert_eq!(code_of(&reaction(&mut inner, "om_user", &body)), 0);
    }
    let bad = json!({"reaction_type": {"emoji_type": "no way"}});
    assert_eq!(
        code_of(&reaction(&mut inner, "om_user", &bad)),
        code::REACTION_INVALID
    );
    assert_eq!(
        code_of(&reaction(&mut inner, "om_x", &json!({}))),
        code::INVALID_PARAMETER
    );
    let got: Vec<&str> = inner.reactions.iter().map(|(_, e)| e.as_str()).collect();
    assert_eq!(got, ["OK", "DONE"]);
}

#[test]
fn the_routes_are_recognised() {
    let r = |m: Method, p: &str| {
        let p = p.trim_matches('/').split('/').collect::<Vec<_>>();
        route_of(&m, &p)
    };
    assert_eq!(
        r(Method::POST, "/open-apis/im/v1/messages/om_1/reply"),
        "reply"
    );
    assert_eq!(r(Method::PATCH, "/open-apis/im/v1/messages/om_1"), "patch");
    assert_eq!(
        r(Method::GET, "/open-apis/im/v1/messages/om_1/resources/k"),
        "resource"
    );
    assert_eq!(r(Method::GET, "/open-apis/im/v1/messages/om_1"), "unknown");
    assert_eq!(r(Method::POST, "/callback/ws/endpoint"), "endpoint");
}

#[tokio::test(start_paused = true)]
async fn a_uuid_sends_one_message_an_hour() {
    let mut inner = Feishu::new();
    inner.user_messages.insert("om_user".into(), "oc_1".into());
    let named = |uuid: &str| json!({"msg_type": "interactive", "content": card(true, "the answer"), "uuid": uuid});
    let first = body(reply(&mut inner, "om_user", &named("u-1")));
    let again = body(reply(&mut inner, "om_user", &named("u-1")));
    assert_eq!(again["data"]["message_id"], first["data"]["message_id"]);
    assert_eq!(inner.messages.len(), 1);
    reply(&mut inner, "om_user", &named("u-2"));
    assert_eq!(inner.messages.len(), 2);
    // After the hour a uuid names nothing any more.
    advance(std::time::Duration::from_secs(3601)).await;
    reply(&mut inner, "om_user", &named("u-1"));
    assert_eq!(inner.messages.len(), 3);
    let long = "u".repeat(51);
    assert_ne!(code_of(&reply(&mut inner, "om_user", &named(&long))), 0);
}
