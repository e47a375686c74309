//! The typed decoding against the `Value` reading it replaced: same answers for the wire
//! shapes the Gateway sends, and for fields of unexpected types.

use serde_json::{Value, json};

use super::*;

/// Decodes `value` both ways (from text and from a `Value`) and checks they agree.
fn message(value: Value) -> Message {
    let from_text: Message = serde_json::from_str(&value.to_string()).unwrap();
    assert_eq!(from_text, Message::from_value(&value));
    from_text
}

fn snapshot(value: Value) -> Snapshot {
    let from_text: Snapshot = serde_json::from_str(&value.to_string()).unwrap();
    assert_eq!(from_text, Snapshot::from_value(&value));
    from_text
}

#[test]
fn a_streamed_chunk_reads_its_type_text_and_id() {
    let m = message(json!({
        "content": "Hé 你好", "additional_kwargs": {}, "response_metadata": {},
        "type": "AIMessageChunk", "name": null, "id": "lc_run--a", "tool_calls": [],
        "invalid_tool_calls": [], "usage_metadata": null, "tool_call_chunks": [],
        "chunk_position": null,
    }));
    assert_eq!(m.kind(), Some("AIMessageChunk"));
    assert_eq!(m.text(), "Hé 你好");
    assert_eq!(m.id(&ChunkMetadata::default()), Some("lc_run--a"));
    assert_eq!(m.name(), None);
    assert!(!m.has_tool_calls() && !m.is_hidden() && !m.is_goal_continuation());
}

#[test]
fn content_blocks_join_their_text() {
    let m = message(json!({"type": "ai", "content": [
        {"type": "text", "text": "a"}, "b", {"type": "image_url", "text": "no"},
        {"text": "c"}, {"type": 7, "text": "d"}, {"type": "text", "text": 5}, 3, null,
    ]}));
    assert_eq!(m.text(), "abcd");
    for content in [json!(5), json!({"text": "x"}), json!(null), json!(true)] {
        assert_eq!(
            message(json!({"type": "ai", "content": content})).text(),
            ""
        );
    }
}

#[test]
fn ids_fall_back_from_payload_to_metadata_to_kwargs() {
    let meta = |v: Value| {
        let from_text: ChunkMetadata = serde_json::from_str(&v.to_string()).unwrap();
        assert_eq!(from_text, ChunkMetadata::from_value(&v));
        from_text
    };
    let none = ChunkMetadata::default();
    assert_eq!(
        message(json!({"type": "ai", "id": "", "message_id": "m"})).id(&none),
        Some("m")
    );
    let m = message(json!({"type": "ai", "id": 5}));
    assert_eq!(m.id(&none), None);
    assert_eq!(m.id(&meta(json!({"id": "", "message_id": "x"}))), Some("x"));
    assert_eq!(
        m.id(&meta(json!({"langgraph_node": "model", "id": "y"}))),
        Some("y")
    );
    assert_eq!(m.id(&meta(json!(["not", "an", "object"]))), None);
    let k = message(json!({"type": "ai", "kwargs": {"id": "k1"}}));
    assert_eq!(k.id(&none), Some("k1"));
}

#[test]
fn the_constructor_form_reads_its_kwargs() {
    let m = message(json!({
        "lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
        "kwargs": {"content": "HIDDEN", "type": "tool", "name": "web_search", "id": "t1",
                   "additional_kwargs": {"hide_from_ui": true}},
    }));
    assert_eq!(m.kind(), Some("tool"));
    assert_eq!((m.text(), m.name()), ("HIDDEN", Some("web_search")));
    assert!(m.is_hidden());
    assert_eq!(m.id(&ChunkMetadata::default()), Some("t1"));
    // Without `kwargs.type`, the class path names the type; without kwargs, nothing is read.
    let m = message(
        json!({"type": "constructor", "id": ["x", "AIMessageChunk"], "kwargs": {"content": "hi"}}),
    );
    assert_eq!((m.kind(), m.text()), (Some("AIMessageChunk"), "hi"));
    let m = message(json!({"type": "constructor", "id": ["x", 3], "content": "top"}));
    assert_eq!((m.kind(), m.text()), (None, ""));
}

#[test]
fn flags_and_tool_calls() {
    let m = message(json!({"type": "human", "content": "<goal_continuation/>",
        "additional_kwargs": {"hide_from_ui": true, "deerflow_goal_continuation": true}}));
    assert!(m.is_hidden() && m.is_goal_continuation());
    let m = message(json!({"type": "ai",
        "additional_kwargs": {"hide_from_ui": "yes", "deerflow_goal_continuation": true}}));
    assert!(
        !m.is_hidden() && !m.is_goal_continuation(),
        "only a human can continue"
    );
    let m = message(json!({"type": "ai", "content": "", "tool_calls": [
        {"name": "present_files", "args": {"filepaths": ["/a", 3, "/b"]}, "id": "c1"},
        {"args": {"filepaths": ["/no"]}, "name": "web_search"},
        "garbage",
        {"name": "present_files", "args": {"filepaths": "/not-a-list"}},
    ]}));
    assert!(m.has_tool_calls());
    let calls: Vec<(Option<&str>, &[String])> = m
        .present_calls()
        .iter()
        .map(|c| (c.id(), c.filepaths()))
        .collect();
    let none: &[String] = &[];
    assert_eq!(
        calls,
        [
            (Some("c1"), &["/a".to_owned(), "/b".to_owned()][..]),
            (None, none)
        ]
    );
    for calls in [json!([]), json!({"name": "present_files"}), json!(null)] {
        let m = message(json!({"type": "ai", "tool_calls": calls}));
        assert!(!m.has_tool_calls() && m.present_calls().is_empty());
    }
}

#[test]
fn a_tool_message_names_the_call_it_answers_and_its_status() {
    let m = message(
        json!({"type": "tool", "content": "Error: no", "tool_call_id": "c1",
        "status": "error", "name": null}),
    );
    assert_eq!((m.tool_call_id(), m.status()), (Some("c1"), Some("error")));
    let m = message(json!({"type": "constructor", "id": ["x", "ToolMessage"],
        "kwargs": {"type": "tool", "tool_call_id": "c2", "status": "success"}}));
    assert_eq!(
        (m.tool_call_id(), m.status()),
        (Some("c2"), Some("success"))
    );
    let m = message(json!({"type": "tool", "tool_call_id": 3, "status": ["error"]}));
    assert_eq!((m.tool_call_id(), m.status()), (None, None));
}

#[test]
fn anything_but_an_object_reads_as_an_empty_message() {
    for value in [
        json!("bare string"),
        json!(7),
        json!(null),
        json!([1, {"type": "ai"}]),
    ] {
        assert_eq!(message(value), Message::default());
    }
    // Duplicate keys: the last one wins, as in a `Value`.
    let m: Message =
        serde_json::from_str(r#"{"type":"human","type":"ai","content":"a","content":"b"}"#)
            .unwrap();
    assert_eq!((m.kind(), m.text()), (Some("ai"), "b"));
}

#[test]
fn a_snapshot_keeps_the_current_turn_and_the_goal_counts() {
    let s = snapshot(json!({
        "messages": [
            {"type": "human", "content": "first"},
            {"type": "ai", "content": "old"},
            {"type": "human", "content": "second"},
            {"type": "ai", "content": "new"},
            {"type": "human", "content": "<memory/>", "additional_kwargs": {"hide_from_ui": true}},
            5,
        ],
        "title": "ignored", "thread_data": {"workspace_path": "/mnt"},
        "goal": {"objective": "x", "continuation_count": 2, "max_continuations": 8},
    }));
    assert_eq!(s.message_count(), 6);
    let texts: Vec<&str> = s.turn().iter().map(Message::text).collect();
    assert_eq!(texts, ["new", "<memory/>", ""]);
    assert_eq!(s.goal_progress(), Some((2, 8)));
    assert_eq!(s.outputs_path(), None);
    let s = snapshot(json!({"thread_data": {"outputs_path": "/data/threads/t/user-data/outputs"}}));
    assert_eq!(s.outputs_path(), Some("/data/threads/t/user-data/outputs"));
    for data in [json!({"outputs_path": 5}), json!("x"), json!(null)] {
        assert_eq!(snapshot(json!({"thread_data": data})).outputs_path(), None);
    }
}

#[test]
fn goal_progress_falls_back_to_the_outcome() {
    let outcome = json!({"continuation_count": 1, "max_continuations": 3});
    for goal in [
        json!(null),
        json!({"continuation_count": 1}),
        json!("active"),
    ] {
        let s = snapshot(json!({"goal": goal, "goal_outcome": outcome}));
        assert_eq!(s.goal_progress(), Some((1, 3)), "goal {goal}");
    }
    for counts in [
        json!(-1),
        json!(1.0),
        json!(u64::from(u32::MAX) + 1),
        json!("1"),
    ] {
        let s = snapshot(json!({"goal": {"continuation_count": counts, "max_continuations": 8}}));
        assert_eq!(s.goal_progress(), None, "count {counts}");
    }
}

#[test]
fn snapshots_of_other_shapes_are_empty() {
    for value in [
        json!({}),
        json!({"messages": "x"}),
        json!([1]),
        json!({"status": "error", "error": "boom"}),
    ] {
        assert_eq!(snapshot(value), Snapshot::default());
    }
    assert!(serde_json::from_str::<Snapshot>("{broken").is_err());
}

/// Audit finding 6: with DeerFlow's delta checkpoints, goal bookkeeping publishes `values`
/// from the raw checkpoint, whose `messages` is absent or a sentinel. Such a frame keeps
/// the history of the frame before and takes only the goal it carries.
#[test]
fn a_snapshot_without_a_message_list_keeps_the_history_before() {
    let answered = snapshot(json!({
        "messages": [{"type": "human", "content": "q"}, {"type": "ai", "content": "The answer."}],
        "goal": {"continuation_count": 0, "max_continuations": 8},
        "thread_data": {"outputs_path": "/o"},
    }));
    assert!(answered.has_messages());
    let goal = json!({"continuation_count": 1, "max_continuations": 8});
    for value in [
        json!({"goal": goal}),
        json!({"messages": "<sentinel>", "goal": goal}),
        json!({"messages": {"__delta__": true}, "goal": goal}),
        json!({"messages": null, "goal": goal}),
    ] {
        let bookkeeping = snapshot(value.clone());
        assert!(!bookkeeping.has_messages(), "{value}");
        let merged = Snapshot::merged(Some(answered.clone()), bookkeeping);
        assert_eq!(merged.message_count(), 2, "{value}");
        assert_eq!(merged.turn()[0].text(), "The answer.", "{value}");
        assert_eq!(merged.goal_progress(), Some((1, 8)), "{value}");
        assert_eq!(merged.outputs_path(), Some("/o"), "{value}");
    }
    // A cleared goal (the key dropped) clears it; the history stays.
    let merged = Snapshot::merged(Some(answered.clone()), snapshot(json!({})));
    assert_eq!((merged.message_count(), merged.goal_progress()), (2, None));
    // A list replaces the history, an empty one too.
    let emptied = Snapshot::merged(Some(answered.clone()), snapshot(json!({"messages": []})));
    assert!(emptied.has_messages() && emptied.turn().is_empty());
    // With nothing before, the frame stands as it is.
    let alone = Snapshot::merged(None, snapshot(json!({"goal": goal})));
    assert!(!alone.has_messages() && alone.turn().is_empty());
}

/// A visible human message as DeerFlow's `ThreadDataMiddleware` leaves it: stamped with
/// the run it started (`None`: as an unstamping Gateway leaves it).
fn asked(text: &str, run: Option<&str>) -> Value {
    let kwargs = run.map_or_else(|| json!({}), |run| json!({"run_id": run, "timestamp": "t"}));
    json!({"type": "human", "content": text, "additional_kwargs": kwargs})
}

fn turn_texts(s: &Snapshot) -> Vec<&str> {
    s.turn().iter().map(Message::text).collect()
}

#[test]
fn a_runs_turn_is_read_where_its_input_names_it() {
    let hidden = json!({"type": "human", "content": "<goal_continuation/>",
        "additional_kwargs": {"hide_from_ui": true, "deerflow_goal_continuation": true}});
    let values = json!({
        "messages": [
            asked("first", Some("r1")),
            {"type": "ai", "content": "one"},
            hidden,
            {"type": "ai", "content": "one more"},
            asked("second", Some("r2")),
            {"type": "ai", "content": "two"},
        ],
        "goal": {"continuation_count": 1, "max_continuations": 4},
    });
    let s = Snapshot::of_run(&values, "r1");
    assert_eq!(turn_texts(&s), ["one", "<goal_continuation/>", "one more"]);
    // The goal counts are the thread's now, not the older run's.
    assert_eq!((s.message_count(), s.goal_progress()), (6, None));
    let newest = Snapshot::of_run(&values, "r2");
    assert_eq!(turn_texts(&newest), ["two"]);
    assert_eq!(newest.goal_progress(), Some((1, 4)));
    // A run the thread has no input of left no turn in it.
    assert!(Snapshot::of_run(&values, "r0").turn().is_empty());
    // The constructor form names its run in `kwargs`.
    let constructor = json!({"type": "constructor", "id": ["langchain", "HumanMessage"],
        "kwargs": {"type": "human", "content": "third", "additional_kwargs": {"run_id": "r3"}}});
    let mut later = values.clone();
    later["messages"]
        .as_array_mut()
        .unwrap()
        .extend([constructor, json!({"type": "ai", "content": "three"})]);
    assert_eq!(turn_texts(&Snapshot::of_run(&later, "r2")), ["two"]);
    assert_eq!(turn_texts(&Snapshot::of_run(&later, "r3")), ["three"]);
}

#[test]
fn without_stamps_a_runs_turn_is_the_newest() {
    let values = json!({"messages": [
        asked("first", None),
        {"type": "ai", "content": "one"},
        asked("second", None),
        {"type": "ai", "content": "two"},
    ]});
    assert_eq!(
        Snapshot::of_run(&values, "r1"),
        Snapshot::from_value(&values)
    );
    assert_eq!(turn_texts(&Snapshot::of_run(&values, "r1")), ["two"]);
    for shape in [json!({}), json!({"messages": "x"}), json!({"messages": []})] {
        assert_eq!(Snapshot::of_run(&shape, "r1"), Snapshot::from_value(&shape));
    }
}

#[test]
fn a_runs_stamped_turn_is_found_behind_an_unstamped_one() {
    // A run cancelled before its agent started leaves its input unstamped.
    let values = json!({"messages": [
        asked("first", Some("r1")),
        {"type": "ai", "content": "one"},
        asked("cut short", None),
    ], "goal": {"continuation_count": 1, "max_continuations": 4}});
    let s = Snapshot::of_run(&values, "r1");
    assert_eq!(turn_texts(&s), ["one"]);
    // Not the newest turn: the thread's goal counts are not the run's.
    assert_eq!(s.goal_progress(), None);
    assert!(Snapshot::of_run(&values, "r2").turn().is_empty());
}

#[test]
fn a_runs_own_messages_give_its_turn() {
    let messages: Vec<Message> = [
        asked("first", Some("r1")),
        json!({"type": "ai", "content": "one"}),
        json!({"type": "tool", "content": "done", "tool_call_id": "c"}),
        json!({"type": "ai", "content": "two"}),
    ]
    .iter()
    .map(Message::from_value)
    .collect();
    let s = Snapshot::default().with_run_messages(&messages);
    assert_eq!(turn_texts(&s), ["one", "done", "two"]);
    let s = Snapshot::default().with_run_messages(&messages[1..]);
    assert_eq!(turn_texts(&s), ["one", "done", "two"]);
    assert!(Snapshot::default().with_run_messages(&[]).turn().is_empty());
}
