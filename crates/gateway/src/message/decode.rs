//! How [`Message`], [`ChunkMetadata`] and [`Snapshot`] are decoded in one pass over the JSON,
//! building only the fields the bridge reads (see the parent module).
//!
//! Each value states which keys it keeps ([`Object`]) or how it folds a list's entries
//! ([`List`]); the `lenient` building blocks do the walking. Only `id`, `content` and a
//! content block accept a JSON string as well, so they keep their own visitors.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::lenient::{
    LenientBool, LenientStr, LenientU32, List, Listed, Object, Strings, deserialize_with,
    ignore_others, list, object, read_object, skip,
};
use super::{ChunkMetadata, Fields, Message, PresentCall, Snapshot};

deserialize_with!(object: Fields, KwargFlags, ToolCall, Args, ChunkMetadata, Snapshot, Progress, ThreadData);
deserialize_with!(list: ToolCalls, History);

impl Object for Fields {
    const EXPECTING: &'static str = "a message";
    const FIELDS: &'static [&'static str] = &[
        "type",
        "id",
        "message_id",
        "content",
        "additional_kwargs",
        "name",
        "tool_calls",
        "kwargs",
        "tool_call_id",
        "status",
    ];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.kind = map.next_value::<LenientStr>()?.0.map(kind_name),
            1 => {
                let id = map.next_value::<IdField>()?;
                (self.id, self.class) = (id.text, id.class);
            }
            2 => self.message_id = map.next_value::<LenientStr>()?.0,
            3 => self.text = map.next_value::<Content>()?.0,
            4 => {
                let flags = map.next_value::<KwargFlags>()?;
                (self.hide_from_ui, self.goal_continuation) = (flags.hidden, flags.continuation);
            }
            5 => self.name = map.next_value::<LenientStr>()?.0,
            6 => {
                let calls = map.next_value::<ToolCalls>()?;
                (self.tool_calls, self.present_calls) = (calls.count, calls.presented);
            }
            7 => self.kwargs = map.next_value::<Option<Fields>>()?.map(Box::new),
            8 => self.tool_call_id = map.next_value::<LenientStr>()?.0,
            9 => self.status = map.next_value::<LenientStr>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Fields::deserialize(deserializer).map(Message)
    }
}

/// The type names every frame repeats, without allocating.
fn kind_name(kind: String) -> Cow<'static, str> {
    match kind.as_str() {
        "ai" => Cow::Borrowed("ai"),
        "AIMessageChunk" => Cow::Borrowed("AIMessageChunk"),
        "human" => Cow::Borrowed("human"),
        "tool" => Cow::Borrowed("tool"),
        "system" => Cow::Borrowed("system"),
        "constructor" => Cow::Borrowed("constructor"),
        _ => Cow::Owned(kind),
    }
}

/// `id`: a string, or a class path whose last element is kept.
#[derive(Default)]
struct IdField {
    text: Option<String>,
    class: Option<String>,
}

impl<'de> Deserialize<'de> for IdField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IdField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an id")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IdField, E> {
                Ok(IdField {
                    text: Some(v.to_owned()),
                    class: None,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IdField, A::Error> {
                let mut last = None;
                while let Some(item) = seq.next_element::<LenientStr>()? {
                    last = Some(item.0);
                }
                Ok(IdField {
                    text: None,
                    class: last.flatten(),
                })
            }
            ignore_others!(bool num unit map);
        }
        deserializer.deserialize_any(V)
    }
}

/// The text of a `content`: a string, or a list of strings and `{"type": "text", "text"}`
/// blocks (a block without a string `type` counts as text).
#[derive(Default)]
struct Content(String);

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("message content")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut out = String::new();
                while let Some(block) = seq.next_element::<Block>()? {
                    if let Some(text) = block.text() {
                        out.push_str(&text);
                    }
                }
                Ok(Content(out))
            }
            ignore_others!(bool num unit map);
        }
        deserializer.deserialize_any(V)
    }
}

/// One content block: a string, or an object with a `type` and a `text`.
#[derive(Default)]
struct Block {
    kind: Option<String>,
    text: Option<String>,
}

impl Block {
    /// The block's text, when it is a text block.
    fn text(self) -> Option<String> {
        let is_text = self.kind.as_deref().is_none_or(|k| k == "text");
        self.text.filter(|_| is_text)
    }
}

impl Object for Block {
    const EXPECTING: &'static str = "a content block";
    const FIELDS: &'static [&'static str] = &["type", "text"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.kind = map.next_value::<LenientStr>()?.0,
            1 => self.text = map.next_value::<LenientStr>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Block;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(Block::EXPECTING)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Block, E> {
                Ok(Block {
                    kind: None,
                    text: Some(v.to_owned()),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Block, A::Error> {
                read_object(map)
            }
            ignore_others!(bool num unit seq);
        }
        deserializer.deserialize_any(V)
    }
}

/// The two `additional_kwargs` flags the bridge honours.
#[derive(Default)]
struct KwargFlags {
    hidden: bool,
    continuation: bool,
}

impl Object for KwargFlags {
    const EXPECTING: &'static str = "additional_kwargs";
    const FIELDS: &'static [&'static str] = &["hide_from_ui", "deerflow_goal_continuation"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.hidden = map.next_value::<LenientBool>()?.0,
            1 => self.continuation = map.next_value::<LenientBool>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// `tool_calls`: how many, and the `present_files` calls.
#[derive(Default)]
struct ToolCalls {
    count: usize,
    presented: Vec<PresentCall>,
}

impl List for ToolCalls {
    const EXPECTING: &'static str = "tool calls";
    type Item = ToolCall;

    fn push(&mut self, call: ToolCall) {
        self.count += 1;
        if call.name.as_deref() == Some("present_files") {
            self.presented.push(PresentCall {
                id: call.id,
                filepaths: call.filepaths,
            });
        }
    }
}

/// One tool call: its `name`, `id` and `args.filepaths`.
#[derive(Default)]
struct ToolCall {
    name: Option<String>,
    id: Option<String>,
    filepaths: Vec<String>,
}

impl Object for ToolCall {
    const EXPECTING: &'static str = "a tool call";
    const FIELDS: &'static [&'static str] = &["name", "args", "id"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.name = map.next_value::<LenientStr>()?.0,
            1 => self.filepaths = map.next_value::<Args>()?.0,
            2 => self.id = map.next_value::<LenientStr>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// A tool call's `args.filepaths` strings.
#[derive(Default)]
struct Args(Vec<String>);

impl Object for Args {
    const EXPECTING: &'static str = "tool call arguments";
    const FIELDS: &'static [&'static str] = &["filepaths"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.0 = map.next_value::<Strings>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl Object for ChunkMetadata {
    const EXPECTING: &'static str = "chunk metadata";
    const FIELDS: &'static [&'static str] = &["id", "message_id"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.id = map.next_value::<LenientStr>()?.0,
            1 => self.message_id = map.next_value::<LenientStr>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl Object for Snapshot {
    const EXPECTING: &'static str = "state values";
    const FIELDS: &'static [&'static str] = &["messages", "goal", "goal_outcome", "thread_data"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => {
                let history = map.next_value::<Listed<History>>()?.0;
                self.has_messages = history.is_some();
                let history = history.unwrap_or_default();
                (self.message_count, self.turn) = (history.count, history.turn);
            }
            1 => self.goal = map.next_value::<Progress>()?.counts(),
            2 => self.outcome = map.next_value::<Progress>()?.counts(),
            3 => self.outputs_path = map.next_value::<ThreadData>()?.outputs_path,
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// `messages`: counted, keeping only the current turn.
#[derive(Default)]
struct History {
    count: usize,
    turn: Vec<Message>,
}

impl List for History {
    const EXPECTING: &'static str = "a message list";
    type Item = Message;

    fn push(&mut self, message: Message) {
        self.count += 1;
        if message.starts_turn() {
            self.turn.clear();
        } else {
            self.turn.push(message);
        }
    }
}

/// `thread_data`: only its `outputs_path` is read.
#[derive(Default)]
struct ThreadData {
    outputs_path: Option<String>,
}

impl Object for ThreadData {
    const EXPECTING: &'static str = "thread data";
    const FIELDS: &'static [&'static str] = &["outputs_path"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.outputs_path = map.next_value::<LenientStr>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// `continuation_count` and `max_continuations` of a goal or outcome object.
#[derive(Default)]
struct Progress {
    count: Option<u32>,
    max: Option<u32>,
}

impl Progress {
    /// Both counts, when both were read.
    fn counts(self) -> Option<(u32, u32)> {
        self.count.zip(self.max)
    }
}

impl Object for Progress {
    const EXPECTING: &'static str = "a goal";
    const FIELDS: &'static [&'static str] = &["continuation_count", "max_continuations"];

    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error> {
        match index {
            0 => self.count = map.next_value::<LenientU32>()?.0,
            1 => self.max = map.next_value::<LenientU32>()?.0,
            _ => skip(map)?,
        }
        Ok(())
    }
}
