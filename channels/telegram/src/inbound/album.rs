//! Albums (media groups), pure: Telegram delivers each photo, video or document of an
//! album as an update of its own, all carrying one `media_group_id`, and only one of them
//! (usually the first) the caption. The transports gather the parts (`transport/album.rs`
//! says how long and how many); this module says which album a part belongs to and how a
//! part joins the message the album becomes.

use im_bridge_channel::{CommandVocabulary, InboundMessage};

use crate::model::Update;

/// Parts one album holds at most: Telegram's own limit (an album has 2 to 10 items). A
/// part past it starts another album.
pub(crate) const MAX_ALBUM_PARTS: usize = 10;

/// Which album an update's message is a part of: its chat and its `media_group_id`
/// (Telegram does not promise the id is unique across chats).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AlbumKey {
    chat: i64,
    group: String,
}

/// The album `update`'s message is a part of, if any.
pub(crate) fn album_key(update: &Update) -> Option<AlbumKey> {
    let message = update.message.as_ref()?;
    let group = message
        .media_group_id
        .as_deref()
        .filter(|g| !g.is_empty())?;
    Some(AlbumKey {
        chat: message.chat.id,
        group: group.to_owned(),
    })
}

/// Joins a later part into `album`, the message of the album's first part (whose id,
/// topic, reply and redelivery key the album keeps): the part's files are appended, its
/// text (a caption) follows the album's after a blank line, and the album is classified
/// again, since the caption that makes it a command may come with any part. The part's
/// own redelivery key goes with the album, so Telegram delivering that part again alone
/// (a webhook delivery whose answer was lost) is known for answered.
pub(crate) fn join(album: &mut InboundMessage, part: InboundMessage, commands: &CommandVocabulary) {
    let text = part.text.trim();
    if !text.is_empty() {
        if album.text.trim().is_empty() {
            album.text = part.text;
        } else {
            album.text.push_str("\n\n");
            album.text.push_str(text);
        }
        album.msg_type = commands.classify(&album.text);
    }
    album.files.extend(part.files);
    album.redelivery_parts.extend(part.redelivery);
    if album.locale_hint.is_none() {
        album.locale_hint = part.locale_hint;
    }
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::{AllowedUsers, MsgType};

    use super::*;
    use crate::inbound::{InboundContext, Normalized, normalize};

    fn album() -> Vec<Update> {
        serde_json::from_str(include_str!("../../tests/fixtures/updates_album.json")).unwrap()
    }

    fn normalized(update: &Update, commands: &CommandVocabulary) -> InboundMessage {
        let ctx = InboundContext {
            bot_username: Some("DeerBridgeBot"),
            allowed_users: &AllowedUsers::Anyone,
            commands,
        };
        match normalize(update, &ctx) {
            Normalized::Message(m) => *m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_parts_of_an_album_share_a_key_per_chat() {
        let parts = album();
        let key = album_key(&parts[0]).unwrap();
        assert_eq!(album_key(&parts[1]), Some(key.clone()));
        let mut elsewhere = parts[1].clone();
        if let Some(m) = elsewhere.message.as_mut() {
            m.chat.id = 1;
        }
        assert_ne!(album_key(&elsewhere), Some(key));
        let mut lone = parts[0].clone();
        if let Some(m) = lone.message.as_mut() {
            m.media_group_id = Some(String::new());
        }
        assert_eq!(album_key(&lone), None);
    }

    #[test]
    fn an_album_is_its_first_part_with_every_file_and_the_caption() {
        let commands = CommandVocabulary::new(["new"]);
        let parts = album();
        let mut one = normalized(&parts[0], &commands);
        join(&mut one, normalized(&parts[1], &commands), &commands);
        assert_eq!(one.text, "Which of these two diagrams is right?");
        assert_eq!(one.thread_ts.as_ref().unwrap().as_str(), "4901");
        assert_eq!(one.metadata["message_id"], "4901");
        let ids: Vec<String> = one
            .files
            .iter()
            .map(|f| match &f.source {
                im_bridge_channel::FileSource::Handle { id } => id.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            ids,
            ["AgACAgIAAxkBAAIBt_a_large", "AgACAgIAAxkBAAIBt_b_large"]
        );
        // The second part is known by its own key too.
        let second = normalized(&parts[1], &commands).redelivery;
        assert!(second.is_some() && second != one.redelivery);
        assert_eq!(one.redelivery_parts, second.into_iter().collect::<Vec<_>>());

        // The caption may come with a later part; several captions are kept in order.
        let mut first = normalized(&parts[1], &commands);
        let mut captioned = normalized(&parts[0], &commands);
        captioned.text = "/new with these".into();
        join(&mut first, captioned, &commands);
        assert_eq!(first.text, "/new with these");
        assert_eq!(first.msg_type, MsgType::Command);
        let mut again = normalized(&parts[1], &commands);
        again.text = "and this one".into();
        join(&mut first, again, &commands);
        assert_eq!(first.text, "/new with these\n\nand this one");
        assert_eq!(first.files.len(), 3);
    }
}
