//! Unit tests of the command helpers.

use super::*;

#[test]
fn req_ids_are_shaped_as_the_sdks_shape_theirs() {
    let id = req_id("aibot_send_msg");
    let parts: Vec<&str> = id.rsplitn(3, '_').collect();
    assert_eq!(parts.len(), 3, "{id}");
    assert_eq!(parts[0].len(), 8, "{id}");
    assert!(parts[1].parse::<u128>().is_ok(), "{id}");
    assert_eq!(parts[2], "aibot_send_msg");
}

/// A refusal naming no request goes to the connection's only waiting command, and to none
/// when several wait (each then waits out its own timeout).
#[tokio::test(start_paused = true)]
async fn a_refusal_naming_no_request_fails_only_a_lone_waiting_command() {
    let link = Link::new();
    let mut outbox = link.attach(1);
    let unnamed: Frame =
        serde_json::from_str(r#"{"errcode": 40058, "errmsg": "invalid Request Parameter"}"#)
            .unwrap();
    let send = |link: &Link| {
        let link = link.clone();
        tokio::spawn(async move {
            link.send_markdown("zhangsan", "hi")
                .await
                .map_err(|e| e.to_string())
        })
    };
    let lone = send(&link);
    outbox.recv().await.unwrap();
    assert!(
        !link.refuse_only_waiting(2, unnamed.clone()),
        "another connection's"
    );
    assert!(link.refuse_only_waiting(1, unnamed.clone()));
    let refused = lone.await.unwrap().unwrap_err();
    assert!(refused.contains("errcode 40058"), "{refused}");
    let (a, b) = (send(&link), send(&link));
    outbox.recv().await.unwrap();
    outbox.recv().await.unwrap();
    assert!(!link.refuse_only_waiting(1, unnamed));
    for waited in [a.await.unwrap(), b.await.unwrap()] {
        let error = waited.unwrap_err();
        assert!(error.contains("no answer in time"), "{error}");
    }
}
