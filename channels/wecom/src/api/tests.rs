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
