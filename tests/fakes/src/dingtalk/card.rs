//! AI cards: `POST /v1.0/card/instances/createAndDeliver` and `PUT /v1.0/card/streaming`.
//!
//! Rules enforced: the template is [`CARD_TEMPLATE_ID`]; an `outTrackId` is new; the
//! `openSpaceId` is `dtv1.card//IM_GROUP.<a group the robot is in>` with
//! `imGroupOpenDeliverModel.robotCode` the app's robot, or `dtv1.card//IM_ROBOT.<a
//! known user>` with `imRobotOpenDeliverModel.spaceType` `IM_ROBOT`; `cardParamMap`
//! values are strings. A streaming update names a card that exists and is not finalized,
//! the template's variable `content`, a `guid`, and boolean flags; the content sequence
//! and every `isFinalize` are recorded per card.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::rest::error;
use super::{CARD_TEMPLATE_ID, Card, CardUpdate, DingTalk, ROBOT_CODE, code};

/// The template's only variable.
const CONTENT_KEY: &str = "content";

/// Create and deliver; `not_delivered` (a scripted failure) creates the card but reports
/// its delivery as failed.
pub(super) fn create(inner: &mut DingTalk, body: &Value, not_delivered: bool) -> (u16, Value) {
    let str_at = |pointer: &str| body.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    if str_at("/cardTemplateId") != CARD_TEMPLATE_ID {
        return error(400, code::TEMPLATE_NOT_FOUND);
    }
    let out_track_id = str_at("/outTrackId");
    if out_track_id.is_empty() {
        return error(400, code::INVALID_PARAMETER);
    }
    if inner.cards.iter().any(|c| c.out_track_id == out_track_id) {
        return error(400, code::OUT_TRACK_ID_USED);
    }
    let params = body
        .pointer("/cardData/cardParamMap")
        .and_then(Value::as_object);
    let Some(params) = params.filter(|p| p.values().all(Value::is_string)) else {
        return error(400, code::INVALID_PARAMETER);
    };
    let open_space_id = str_at("/openSpaceId");
    let (space_type, space_id) =
        if let Some(cid) = open_space_id.strip_prefix("dtv1.card//IM_GROUP.") {
            let robot = str_at("/imGroupOpenDeliverModel/robotCode");
            if robot != ROBOT_CODE || !inner.groups.contains(cid) {
                return error(400, code::INVALID_OPEN_SPACE);
            }
            ("IM_GROUP", cid)
        } else if let Some(staff) = open_space_id.strip_prefix("dtv1.card//IM_ROBOT.") {
            let space = str_at("/imRobotOpenDeliverModel/spaceType");
            if space != "IM_ROBOT" || !inner.users.contains(staff) {
                return error(400, code::INVALID_OPEN_SPACE);
            }
            ("IM_ROBOT", staff)
        } else {
            return error(400, code::INVALID_OPEN_SPACE);
        };
    let initial = params
        .get(CONTENT_KEY)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let result = json!({
        "outTrackId": out_track_id,
        "deliverResults": [{
            "spaceType": space_type,
            "spaceId": space_id,
            "success": !not_delivered,
            "carrierId": format!("fake-carrier-{}", inner.next_id()),
            "errorMsg": if not_delivered { "the fake did not deliver it" } else { "" },
        }],
    });
    inner.cards.push(Card {
        out_track_id: out_track_id.to_owned(),
        template_id: CARD_TEMPLATE_ID.to_owned(),
        open_space_id: open_space_id.to_owned(),
        initial,
        updates: Vec::new(),
        refused_updates: 0,
        delivered: !not_delivered,
        at: Instant::now(),
    });
    (200, json!({ "success": true, "result": result }))
}

/// One streaming update: `{outTrackId, guid, key, content, isFull, isFinalize, isError}`.
pub(super) fn stream(inner: &mut DingTalk, body: &Value) -> (u16, Value) {
    let text = |key: &str| body.get(key).and_then(Value::as_str);
    let flag = |key: &str| body.get(key).and_then(Value::as_bool);
    let Some(card) =
        text("outTrackId").and_then(|id| inner.cards.iter_mut().find(|c| c.out_track_id == id))
    else {
        return error(400, code::CARD_NOT_FOUND);
    };
    if card.finalized() {
        card.refused_updates += 1;
        return error(400, code::CARD_FINALIZED);
    }
    if text("key") != Some(CONTENT_KEY) {
        card.refused_updates += 1;
        return error(400, code::CARD_KEY_UNKNOWN);
    }
    let (Some(guid), Some(content), Some(is_full), Some(finalize)) = (
        text("guid").filter(|g| !g.is_empty()),
        text("content"),
        flag("isFull"),
        flag("isFinalize"),
    ) else {
        card.refused_updates += 1;
        return error(400, code::INVALID_PARAMETER);
    };
    card.updates.push(CardUpdate {
        content: content.to_owned(),
        is_full,
        finalize,
        is_error: flag("isError").unwrap_or(false),
        guid: guid.to_owned(),
        at: Instant::now(),
    });
    (200, json!({ "success": true, "result": true }))
}
