//! The visitors that decode [`Message`], [`ChunkMetadata`] and [`Snapshot`] in one pass
//! over the JSON, building only the fields the bridge reads (see the parent module).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::lenient::{
    FieldSeed, Ignore, LenientBool, LenientStr, LenientU32, Strings, ignore_others,
};
use super::{ChunkMetadata, Fields, Message, Snapshot};

const MESSAGE_FIELDS: &[&str] = &[
    "type",
    "id",
    "message_id",
    "content",
    "additional_kwargs",
    "name",
    "tool_calls",
    "kwargs",
];

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut out = Fields::default();
        while let Some(field) = map.next_key_seed(FieldSeed(MESSAGE_FIELDS))? {
            match field {
                Some(0) => out.kind = map.next_value::<LenientStr>()?.0.map(kind_name),
                Some(1) => {
                    let id = map.next_value::<IdField>()?;
                    (out.id, out.class) = (id.text, id.class);
                }
                Some(2) => out.message_id = map.next_value::<LenientStr>()?.0,
                Some(3) => out.text = map.next_value::<Content>()?.0,
                Some(4) => {
                    let flags = map.next_value::<KwargFlags>()?;
                    (out.hide_from_ui, out.goal_continuation) = (flags.hidden, flags.continuation);
                }
                Some(5) => out.name = map.next_value::<LenientStr>()?.0,
                Some(6) => {
                    let calls = map.next_value::<ToolCalls>()?;
                    (out.tool_calls, out.presented_files) = (calls.count, calls.presented);
                }
                Some(7) => out.kwargs = map.next_value::<Option<Fields>>()?.map(Box::new),
                _ => {
                    map.next_value::<Ignore>()?;
                }
            }
        }
        Ok(out)
    }

    ignore_others!(bool num str unit seq);
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
                    if let Some(text) = block.0 {
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

/// One content block's text, when it is text.
#[derive(Default)]
struct Block(Option<String>);

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Block;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Block, E> {
                Ok(Block(Some(v.to_owned())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
                let (mut kind, mut text) = (None, None);
                while let Some(field) = map.next_key_seed(FieldSeed(&["type", "text"]))? {
                    match field {
                        Some(0) => kind = map.next_value::<LenientStr>()?.0,
                        Some(1) => text = map.next_value::<LenientStr>()?.0,
                        _ => {
                            map.next_value::<Ignore>()?;
                        }
                    }
                }
                let is_text = kind.as_deref().is_none_or(|k| k == "text");
                Ok(Block(text.filter(|_| is_text)))
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

impl<'de> Deserialize<'de> for KwargFlags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KwargFlags;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("additional_kwargs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KwargFlags, A::Error> {
                let mut out = KwargFlags::default();
                let names = &["hide_from_ui", "deerflow_goal_continuation"];
                while let Some(field) = map.next_key_seed(FieldSeed(names))? {
                    match field {
                        Some(0) => out.hidden = map.next_value::<LenientBool>()?.0,
                        Some(1) => out.continuation = map.next_value::<LenientBool>()?.0,
                        _ => {
                            map.next_value::<Ignore>()?;
                        }
                    }
                }
                Ok(out)
            }
            ignore_others!(bool num str unit seq);
        }
        deserializer.deserialize_any(V)
    }
}

/// `tool_calls`: how many, and the paths of the `present_files` calls.
#[derive(Default)]
struct ToolCalls {
    count: usize,
    presented: Vec<String>,
}

impl<'de> Deserialize<'de> for ToolCalls {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ToolCalls;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("tool calls")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolCalls, A::Error> {
                let mut out = ToolCalls::default();
                while let Some(call) = seq.next_element::<ToolCall>()? {
                    out.count += 1;
                    if call.name.as_deref() == Some("present_files") {
                        out.presented.extend(call.filepaths);
                    }
                }
                Ok(out)
            }
            ignore_others!(bool num str unit map);
        }
        deserializer.deserialize_any(V)
    }
}

/// One tool call: its `name` and `args.filepaths`.
#[derive(Default)]
struct ToolCall {
    name: Option<String>,
    filepaths: Vec<String>,
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ToolCall;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool call")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolCall, A::Error> {
                let mut out = ToolCall::default();
                while let Some(field) = map.next_key_seed(FieldSeed(&["name", "args"]))? {
                    match field {
                        Some(0) => out.name = map.next_value::<LenientStr>()?.0,
                        Some(1) => out.filepaths = map.next_value::<Args>()?.0,
                        _ => {
                            map.next_value::<Ignore>()?;
                        }
                    }
                }
                Ok(out)
            }
            ignore_others!(bool num str unit seq);
        }
        deserializer.deserialize_any(V)
    }
}

/// A tool call's `args.filepaths` strings.
#[derive(Default)]
struct Args(Vec<String>);

impl<'de> Deserialize<'de> for Args {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Args;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("tool call arguments")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args, A::Error> {
                let mut out = Args::default();
                while let Some(field) = map.next_key_seed(FieldSeed(&["filepaths"]))? {
                    match field {
                        Some(0) => out.0 = map.next_value::<Strings>()?.0,
                        _ => {
                            map.next_value::<Ignore>()?;
                        }
                    }
                }
                Ok(out)
            }
            ignore_others!(bool num str unit seq);
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for ChunkMetadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ChunkMetadata;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("chunk metadata")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ChunkMetadata, A::Error> {
                let mut out = ChunkMetadata::default();
                while let Some(field) = map.next_key_seed(FieldSeed(&["id", "message_id"]))? {
                    match field {
                        Some(0) => out.id = map.next_value::<LenientStr>()?.0,
                        Some(1) => out.message_id = map.next_value::<LenientStr>()?.0,
                        _ => {
                            map.next_value::<Ignore>()?;
                        }
                    }
                }
                Ok(out)
            }
            ignore_others!(bool num str unit seq);
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Snapshot {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Snapshot;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("state values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Snapshot, A::Error> {
                let mut out = Snapshot::default();
                let names = &["messages", "goal", "goal_outcome"];
                while let Some(field) = map.next_key_seed(FieldSeed(names))? {
                    match field {
                        Some(0) => {
                            let history = map.next_value::<History>()?;
                            (out.message_count, out.turn) = (history.count, history.turn);
                        }
                        Some(1) => out.goal = map.next_value::<Progress>()?.0,
                        Some(2) => out.outcome = map.next_value::<Progress>()?.0,
                        _ => {
                            map.next_value::<Ignore>()?;
                        }
                    }
                }
                Ok(out)
            }
            ignore_others!(bool num str unit seq);
        }
        deserializer.deserialize_any(V)
    }
}

/// `messages`: counted, keeping only the current turn.
#[derive(Default)]
struct History {
    count: usize,
    turn: Vec<Message>,
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = History;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<History, A::Error> {
                let mut out = History::default();
                while let Some(message) = seq.next_element::<Message>()? {
                    out.count += 1;
                    if message.starts_turn() {
                        out.turn.clear();
                    } else {
                        out.turn.push(message);
                    }
                }
                Ok(out)
            }
            ignore_others!(bool num str unit map);
        }
        deserializer.deserialize_any(V)
    }
}

/// `continuation_count` and `max_continuations` of a goal or outcome object.
#[derive(Default)]
struct Progress(Option<(u32, u32)>);

impl<'de> Deserialize<'de> for Progress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Progress;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a goal")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Progress, A::Error> {
                let (mut count, mut max) = (None, None);
                let names = &["continuation_count", "max_continuations"];
                while let Some(field) = map.next_key_seed(FieldSeed(names))? {
                    match field {
                        Some(0) => count = map.next_value::<LenientU32>()?.0,
                        Some(1) => max = map.next_value::<LenientU32>()?.0,
                        _ => {
                            map.next_value::<Ignore>()?;
                        }
                    }
                }
                Ok(Progress(count.zip(max)))
            }
            ignore_others!(bool num str unit seq);
        }
        deserializer.deserialize_any(V)
    }
}
