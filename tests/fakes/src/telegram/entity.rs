//! Telegram's `MessageEntity` as the fake keeps it: what a formatted text's parse
//! produced, in UTF-16 units of the visible text, and how the Bot API answers it.

use serde_json::{Value, json};

/// One formatting entity of a message, as Telegram's `MessageEntity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entity {
    /// Telegram's type name: `bold`, `italic`, `underline`, `strikethrough`, `spoiler`,
    /// `text_link`, `code`, `pre`, `blockquote`, `expandable_blockquote` or `custom_emoji`.
    pub kind: &'static str,
    /// Start in UTF-16 code units of the visible text.
    pub offset: usize,
    /// Length in UTF-16 code units.
    pub length: usize,
    /// For `text_link`: the link.
    pub url: Option<String>,
    /// For `pre`: the language of `<pre><code class="language-…">`, if given.
    pub language: Option<String>,
    /// For `custom_emoji`: its `emoji-id`.
    pub custom_emoji_id: Option<String>,
}

impl Entity {
    /// An entity of `kind` over `length` UTF-16 units from `offset`, without arguments.
    pub fn new(kind: &'static str, offset: usize, length: usize) -> Self {
        Self {
            kind,
            offset,
            length,
            url: None,
            language: None,
            custom_emoji_id: None,
        }
    }

    /// This entity with `url` (for `text_link`).
    pub fn with_url(mut self, url: &str) -> Self {
        self.url = Some(url.to_owned());
        self
    }

    /// This entity with `language` (for `pre`).
    pub fn with_language(mut self, language: &str) -> Self {
        self.language = Some(language.to_owned());
        self
    }

    /// This entity with `custom_emoji_id` (for `custom_emoji`).
    pub fn with_custom_emoji_id(mut self, id: &str) -> Self {
        self.custom_emoji_id = Some(id.to_owned());
        self
    }

    /// The entity as the Bot API answers it (`type`, `offset`, `length` and its argument).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"type": self.kind, "offset": self.offset, "length": self.length});
        if let Some(url) = &self.url {
            v["url"] = json!(url);
        }
        if let Some(language) = &self.language {
            v["language"] = json!(language);
        }
        if let Some(id) = &self.custom_emoji_id {
            v["custom_emoji_id"] = json!(id);
        }
        v
    }

    /// tdlib's order among entities with the same span (lower first).
    fn priority(&self) -> u8 {
        match self.kind {
            "blockquote" | "expandable_blockquote" => 0,
            "pre" => 11,
            "code" => 20,
            "text_link" => 49,
            "bold" => 90,
            "italic" => 91,
            "underline" => 92,
            "strikethrough" => 93,
            "spoiler" => 94,
            _ => 99,
        }
    }
}

/// Sorts as Telegram answers: by offset, the longer first, then by tdlib's type priority.
pub(crate) fn sort(entities: &mut [Entity]) {
    entities.sort_by_key(|e| (e.offset, std::cmp::Reverse(e.length), e.priority()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entity_answers_as_the_bot_api_with_its_argument_only() {
        assert_eq!(
            Entity::new("bold", 1, 2).to_json(),
            json!({"type": "bold", "offset": 1, "length": 2})
        );
        assert_eq!(
            Entity::new("text_link", 0, 1).with_url("u").to_json(),
            json!({"type": "text_link", "offset": 0, "length": 1, "url": "u"})
        );
        assert_eq!(
            Entity::new("pre", 0, 3).with_language("rust").to_json(),
            json!({"type": "pre", "offset": 0, "length": 3, "language": "rust"})
        );
        assert_eq!(
            Entity::new("custom_emoji", 0, 2)
                .with_custom_emoji_id("5")
                .to_json(),
            json!({"type": "custom_emoji", "offset": 0, "length": 2, "custom_emoji_id": "5"})
        );
    }

    #[test]
    fn entities_sort_by_offset_then_longer_first_then_priority() {
        let mut entities = [
            Entity::new("strikethrough", 2, 1),
            Entity::new("italic", 2, 1),
            Entity::new("bold", 0, 1),
            Entity::new("code", 0, 4),
        ];
        sort(&mut entities);
        let kinds: Vec<_> = entities.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["code", "bold", "italic", "strikethrough"]);
    }
}
