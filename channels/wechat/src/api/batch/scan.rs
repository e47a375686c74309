//! A JSON object read byte by byte, in pieces as they arrive, for what a `getupdates`
//! answer over its bound still gives: its top-level `get_updates_buf` and the elements of
//! its top-level `msgs` array.
//!
//! [`Scan`] follows the structure (strings and their escapes, nesting), so a key of either
//! name inside a message, or the words inside a text, are not taken for it, and an element
//! ends only at a `,` or `]` of the array itself. Each element's raw bytes are kept up to
//! [`MAX_MESSAGE_BYTES`] and then read as a `serde_json::Value`, what the normal path reads
//! each message into; one over that bound is counted and dropped as it streams by. At most
//! [`MAX_KEPT_MESSAGES`] messages and [`MAX_KEPT_BYTES`] of them are kept; what comes after
//! either is skipped the same way. A key written twice counts once, as the last
//! (`serde_json::Value`'s rule); messages of an earlier `msgs` count as skipped.
//!
//! The scan is for an answer that is not kept whole: it never holds more than the bounds
//! above, its reusable element buffer and the top-level string being read (at most
//! [`MAX_STRING_BYTES`]).

use serde_json::Value;

/// The largest message kept from an oversized answer (its raw JSON). An ordinary message is
/// a few KiB: its text is short (iLink refuses a sent text over 16 KiB) and its pictures,
/// voice, files and videos are CDN references, not bytes. A message past a MiB is not one
/// the bridge can take whole, and keeping it would cost what the bound on the answer saves.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// The most bytes of messages kept from one oversized answer (4 times a whole answer's
/// bound): the messages wait in memory while they are admitted one by one.
pub const MAX_KEPT_BYTES: usize = 16 * 1024 * 1024;
/// The most messages kept from one oversized answer (a `Value` of a message costs a few
/// KiB beside its bytes).
pub const MAX_KEPT_MESSAGES: usize = 8192;
/// The longest top-level string read (a key, or the cursor: iLink's are a few hundred
/// bytes); a longer one is not a cursor.
const MAX_STRING_BYTES: usize = 64 * 1024;
/// The key of the cursor.
const CURSOR_KEY: &str = "get_updates_buf";
/// The key of the messages.
const MSGS_KEY: &str = "msgs";

/// What the next top-level value is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Want {
    /// Nothing kept.
    #[default]
    Nothing,
    /// The cursor (a string).
    Cursor,
    /// The messages (an array).
    Msgs,
}

/// The element of `msgs` being read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Element {
    /// Between elements.
    #[default]
    Closed,
    /// Being kept in the buffer.
    Kept,
    /// Over [`MAX_MESSAGE_BYTES`]: only its length is counted.
    Over(u64),
}

/// What a scan found: the cursor, and the messages kept and skipped (over a bound, or
/// unreadable).
#[derive(Debug, Default)]
pub struct Found {
    /// The top-level `get_updates_buf`, when it is a string.
    pub cursor: Option<String>,
    /// The messages kept, in order.
    pub msgs: Vec<Value>,
    /// The raw bytes of the messages kept.
    pub kept_bytes: usize,
    /// How many messages were skipped.
    pub skipped: u64,
    /// Their raw bytes.
    pub skipped_bytes: u64,
}

impl Found {
    fn skip(&mut self, bytes: u64) {
        self.skipped += 1;
        self.skipped_bytes = self.skipped_bytes.saturating_add(bytes);
    }

    /// An element read whole: kept when within the bounds and readable, else skipped.
    fn take(&mut self, raw: &[u8]) {
        if self.msgs.len() >= MAX_KEPT_MESSAGES || self.kept_bytes + raw.len() > MAX_KEPT_BYTES {
            return self.skip(raw.len() as u64);
        }
        match serde_json::from_slice(raw) {
            Ok(msg) => {
                self.msgs.push(msg);
                self.kept_bytes += raw.len();
            }
            Err(_) => self.skip(raw.len() as u64),
        }
    }

    /// A later `msgs` replaces this one: what was kept counts as skipped.
    fn replaced(&mut self) {
        self.skipped += self.msgs.len() as u64;
        self.skipped_bytes = self.skipped_bytes.saturating_add(self.kept_bytes as u64);
        self.msgs.clear();
        self.kept_bytes = 0;
    }
}

/// Finds the top-level `get_updates_buf` and `msgs` of a JSON object fed in pieces.
#[derive(Debug, Default)]
pub struct Scan {
    /// How many objects and arrays are open (the answer itself is 1).
    depth: u32,
    /// Inside a string.
    in_string: bool,
    /// Right after a backslash in a string.
    escaped: bool,
    /// Whether the string being read is at the top level (a key, or a value of one).
    keeping: bool,
    /// The top-level string being read, raw (escapes kept); `None` once too long.
    string: Option<Vec<u8>>,
    /// The last top-level string read, while it may be a key.
    key: Option<Vec<u8>>,
    /// What the next top-level value is for.
    want: Want,
    /// Inside the top-level `msgs` array: its elements are at depth 2.
    in_msgs: bool,
    /// The element being read.
    element: Element,
    /// The element being kept (reused from one to the next).
    buf: Vec<u8>,
    /// What was found so far.
    found: Found,
}

impl Scan {
    /// Reads the next bytes of the answer.
    pub fn feed(&mut self, bytes: &[u8]) {
        // Where the open element's bytes in this piece begin.
        let mut from = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if self.in_msgs && !self.in_string && self.depth == 2 {
                match (b, self.element) {
                    // `}` is not JSON here: it ends the array as `]` would.
                    (b',' | b']' | b'}', element) => {
                        if element != Element::Closed {
                            self.append(&bytes[from..i]);
                            self.end_element();
                        }
                        self.in_msgs = b == b',';
                    }
                    (b' ' | b'\t' | b'\n' | b'\r', _) | (_, Element::Kept | Element::Over(_)) => {}
                    (_, Element::Closed) => {
                        self.element = Element::Kept;
                        from = i;
                    }
                }
            }
            if self.in_string {
                self.string_byte(b);
            } else {
                self.structure_byte(b);
            }
        }
        if self.element != Element::Closed {
            self.append(&bytes[from..]);
        }
    }

    /// What was found: the cursor, the messages kept and skipped (an element the answer
    /// cut off is neither).
    pub fn into_found(self) -> Found {
        self.found
    }

    /// More bytes of the open element.
    fn append(&mut self, bytes: &[u8]) {
        match &mut self.element {
            Element::Closed => {}
            Element::Kept if self.buf.len() + bytes.len() > MAX_MESSAGE_BYTES => {
                self.element = Element::Over((self.buf.len() + bytes.len()) as u64);
                self.buf.clear();
            }
            Element::Kept => self.buf.extend_from_slice(bytes),
            Element::Over(n) => *n = n.saturating_add(bytes.len() as u64),
        }
    }

    fn end_element(&mut self) {
        match std::mem::take(&mut self.element) {
            Element::Closed => {}
            Element::Kept => {
                self.found.take(&self.buf);
                self.buf.clear();
            }
            Element::Over(n) => self.found.skip(n),
        }
    }

    fn string_byte(&mut self, b: u8) {
        let ends = !self.escaped && b == b'"';
        self.escaped = !self.escaped && b == b'\\';
        if ends {
            self.in_string = false;
            if self.keeping {
                self.string_ended();
            }
            return;
        }
        if self.keeping
            && let Some(string) = &mut self.string
        {
            string.push(b);
            if string.len() > MAX_STRING_BYTES {
                self.string = None;
            }
        }
    }

    fn string_ended(&mut self) {
        let string = self.string.take();
        if std::mem::take(&mut self.want) == Want::Cursor {
            self.found.cursor = string.as_deref().and_then(unquoted);
        } else {
            self.key = string;
        }
    }

    /// The top-level key just read is followed by its `:`.
    fn key_ended(&mut self) {
        let key = self.key.take();
        self.want = match key.as_deref().and_then(unquoted).as_deref() {
            Some(CURSOR_KEY) => {
                self.found.cursor = None;
                Want::Cursor
            }
            Some(MSGS_KEY) => {
                self.found.replaced();
                Want::Msgs
            }
            _ => Want::Nothing,
        };
    }

    fn structure_byte(&mut self, b: u8) {
        match b {
            b'"' => {
                self.in_string = true;
                self.escaped = false;
                self.keeping = self.depth == 1;
                self.string = self.keeping.then(Vec::new);
                if self.want == Want::Msgs {
                    self.want = Want::Nothing;
                }
            }
            b'{' | b'[' => {
                if self.depth == 1 && b == b'[' && self.want == Want::Msgs {
                    self.in_msgs = true;
                }
                self.depth = self.depth.saturating_add(1);
                self.want = Want::Nothing;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 => self.key_ended(),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ if self.depth == 1 => {
                // `,`, or a number, `true`, `false` or `null` as a value.
                self.want = Want::Nothing;
                self.key = None;
            }
            _ => {}
        }
    }
}

/// A raw JSON string's text (its escapes read), if it is one.
fn unquoted(raw: &[u8]) -> Option<String> {
    let quoted = [&b"\""[..], raw, b"\""].concat();
    serde_json::from_slice(&quoted).ok()
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::fixture;
    use serde_json::json;

    use super::*;

    /// Scans `json` in pieces cut at `cuts`.
    fn scanned(json: &[u8], cuts: &[usize]) -> Scan {
        let mut scan = Scan::default();
        let mut at = 0;
        for &cut in cuts.iter().chain([&json.len()]) {
            scan.feed(&json[at..cut]);
            at = cut;
        }
        scan
    }

    /// Scans `json` cut at every place into two pieces, and byte by byte: each must find
    /// `cursor` and `msgs`, with `skipped` messages skipped.
    fn found(json: &str, cursor: Option<&str>, msgs: &[Value], skipped: u64) {
        let bytes = json.as_bytes();
        let every: Vec<usize> = (1..bytes.len()).collect();
        let ways = (0..=bytes.len()).map(|cut| vec![cut]).chain([every]);
        for cuts in ways {
            let found = scanned(bytes, &cuts).into_found();
            assert_eq!(found.cursor.as_deref(), cursor, "cut at {cuts:?}: {json}");
            assert_eq!(found.msgs, msgs, "cut at {cuts:?}: {json}");
            assert_eq!(found.skipped, skipped, "cut at {cuts:?}: {json}");
        }
    }

    #[test]
    fn the_top_level_cursor_is_found_before_or_after_the_messages() {
        found(
            r#"{"ret":0,"msgs":[{"a":1}],"get_updates_buf":"Q1w="}"#,
            Some("Q1w="),
            &[json!({"a": 1})],
            0,
        );
        found(
            r#"{ "get_updates_buf" : "c\/2\"x" , "msgs": [] }"#,
            Some("c/2\"x"),
            &[],
            0,
        );
        found(
            r#"{"msgs":[],"longpolling_timeout_ms":35000}"#,
            None,
            &[],
            0,
        );
    }

    #[test]
    fn a_cursor_key_inside_a_message_or_a_text_is_not_the_cursor() {
        let nested = r#"{"msgs":[{"get_updates_buf":"inner","text":"\"get_updates_buf\":\"no\""}],"get_updates_buf":"outer"}"#;
        let inner = json!({"get_updates_buf": "inner", "text": "\"get_updates_buf\":\"no\""});
        found(nested, Some("outer"), &[inner], 0);
        found(
            r#"{"msgs":[{"get_updates_buf":"inner"}]}"#,
            None,
            &[json!({"get_updates_buf": "inner"})],
            0,
        );
        found(r#"{"get_updates_buf":null,"x":"y"}"#, None, &[], 0);
        found(r#"{"get_updates_buf":{"a":"b"},"x":"y"}"#, None, &[], 0);
        // The last one counts, as for a `Value`.
        found(
            r#"{"get_updates_buf":"a","get_updates_buf":null}"#,
            None,
            &[],
            0,
        );
    }

    #[test]
    fn each_message_is_read_whole_whatever_its_strings_and_nesting_hold() {
        let msgs = [
            json!({"text": "] } { [ , \"msgs\": [1] \\", "n": [[1, [2]], {"a": [3, {}]}]}),
            json!("a \"string\" element, with ] in it"),
            json!([1, [2, [3]], {"msgs": ["x"]}]),
            json!(7),
            json!(null),
            json!({"item_list": [{"type": 1, "text_item": {"text": "长 文\n\u{1F600}"}}]}),
        ];
        let json = serde_json::to_string(&json!({
            "ret": 0, "msgs": msgs, "get_updates_buf": "Y3Vyc29y",
        }))
        .unwrap();
        found(&json, Some("Y3Vyc29y"), &msgs, 0);
        // Written loosely: white space around every element, escaped keys.
        let loose = "{ \"m\\u0073gs\" :\n[ {\"a\" : \"x\\\"]\"} ,\t2 ,\r\n\"]\" ] ,\
                     \"get_updates_buf\":\"c\"}";
        found(
            loose,
            Some("c"),
            &[json!({"a": "x\"]"}), json!(2), json!("]")],
            0,
        );
    }

    #[test]
    fn the_recorded_answers_scan_as_serde_reads_them() {
        for answer in [
            fixture!("updates_text.json"),
            fixture!("updates_media.json"),
            fixture!("updates_empty_without_ret.json"),
        ] {
            let whole: Value = serde_json::from_str(answer).unwrap();
            let msgs = whole["msgs"].as_array().cloned().unwrap_or_default();
            found(answer, whole["get_updates_buf"].as_str(), &msgs, 0);
        }
    }

    #[test]
    fn msgs_not_at_the_top_level_or_not_an_array_are_not_the_messages() {
        found(
            r#"{"data":{"msgs":[{"a":1}]},"x":[{"msgs":[2]}],"get_updates_buf":"c"}"#,
            Some("c"),
            &[],
            0,
        );
        found(r#"{"msgs":{"a":[1]},"b":[2]}"#, None, &[], 0);
        found(r#"{"msgs":"[1,2]","b":[2]}"#, None, &[], 0);
        found(r#"{"msgs":null,"b":[2]}"#, None, &[], 0);
        found(r#"{"text":"\"msgs\":[1]","b":[2]}"#, None, &[], 0);
        // A later `msgs` replaces an earlier one, whose messages count as skipped.
        found(r#"{"msgs":[1,2],"msgs":[3]}"#, None, &[json!(3)], 2);
    }

    #[test]
    fn a_message_over_the_bound_is_skipped_and_its_neighbours_kept() {
        let huge = json!({"text": "x".repeat(MAX_MESSAGE_BYTES)});
        let huge_len = serde_json::to_vec(&huge).unwrap().len() as u64;
        let json = serde_json::to_vec(&json!({
            "msgs": [{"n": 1}, huge, {"n": 2}, [huge], {"n": 3}],
            "get_updates_buf": "c",
        }))
        .unwrap();
        // Pieces of every size the network may give, and one whole.
        for step in [1, 7, 4096, 65_536, json.len()] {
            let cuts: Vec<usize> = (step..json.len()).step_by(step).collect();
            let scan = scanned(&json, &cuts);
            assert!(scan.buf.capacity() <= 2 * MAX_MESSAGE_BYTES);
            let found = scan.into_found();
            assert_eq!(found.cursor.as_deref(), Some("c"));
            assert_eq!(
                found.msgs,
                [json!({"n": 1}), json!({"n": 2}), json!({"n": 3})]
            );
            assert_eq!(found.kept_bytes, 3 * br#"{"n":1}"#.len());
            assert_eq!(found.skipped, 2);
            assert_eq!(found.skipped_bytes, 2 * huge_len + 2);
        }
        // Exactly at the bound is kept.
        let text = "y".repeat(MAX_MESSAGE_BYTES - br#"{"t":""}"#.len());
        let json = format!(r#"{{"msgs":[{{"t":"{text}"}}]}}"#);
        let found = scanned(json.as_bytes(), &[9, 70_000]).into_found();
        assert_eq!((found.msgs.len(), found.skipped), (1, 0));
    }

    #[test]
    fn messages_past_the_bounds_on_what_is_kept_are_skipped() {
        let many = format!(
            "{{\"msgs\":[{}]}}",
            vec!["0"; MAX_KEPT_MESSAGES + 3].join(",")
        );
        let found = scanned(many.as_bytes(), &[]).into_found();
        assert_eq!(found.msgs.len(), MAX_KEPT_MESSAGES);
        assert_eq!((found.skipped, found.skipped_bytes), (3, 3));
        let big = format!("\"{}\"", "z".repeat(MAX_MESSAGE_BYTES - 2));
        let per = MAX_KEPT_BYTES / MAX_MESSAGE_BYTES;
        let many = format!("{{\"msgs\":[{}]}}", vec![big; per + 2].join(","));
        let found = scanned(many.as_bytes(), &[]).into_found();
        assert_eq!((found.msgs.len(), found.skipped), (per, 2));
        assert_eq!(found.kept_bytes, MAX_KEPT_BYTES);
    }

    #[test]
    fn an_unreadable_or_cut_off_message_is_not_kept() {
        found(
            r#"{"msgs":[{"a":1},{"b":},[3]]}"#,
            None,
            &[json!({"a": 1}), json!([3])],
            1,
        );
        found(r#"{"msgs":[{"a":1},{"b":"#, None, &[json!({"a": 1})], 0);
        // Not JSON at all: nothing, and no panic.
        found("]]}}\"\\\"msgs\":[[,,]", None, &[], 0);
    }
}
