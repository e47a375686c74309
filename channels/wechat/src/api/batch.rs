//! A `getupdates` answer read under its bound, and what is left of one over it.
//!
//! A batch over [`MAX_POLL_ANSWER`](super::MAX_POLL_ANSWER) cannot be kept, and refusing it
//! alone would stall the channel: the cursor would not move, and iLink would answer the
//! same batch to every poll. So the rest of an oversized answer is read without being
//! kept (up to [`MAX_SKIPPED_BYTES`], within the poll's timeout), only scanned for its
//! top-level `get_updates_buf`: with it, the poll moves past the batch ([`Batch::TooLarge`]);
//! without it (none found, or the answer is past even that bound) it fails as before.
//!
//! [`CursorScan`] follows the JSON's structure byte by byte (strings and their escapes,
//! nesting), so a key of that name inside a message, or the words inside a text, are not
//! taken for it. The cursor is never logged.

use im_bridge_channel::http::HttpError;

/// The most bytes read of an oversized answer while looking for its cursor; past it the
/// poll fails as an oversized answer always did.
pub const MAX_SKIPPED_BYTES: u64 = 64 * 1024 * 1024;
/// The longest cursor taken (iLink's are a few hundred bytes).
const MAX_CURSOR_BYTES: usize = 64 * 1024;
/// The key of the cursor.
const CURSOR_KEY: &[u8] = b"get_updates_buf";

/// A `getupdates` answer's body.
#[derive(Debug)]
pub enum Batch {
    /// The whole body, within the bound.
    Whole(Vec<u8>),
    /// Over the bound: how many bytes it had, and the cursor after it.
    TooLarge {
        /// The answer's length.
        bytes: u64,
        /// Its top-level `get_updates_buf`.
        cursor: String,
    },
}

/// Reads `response`'s body for `op`: whole when at most `max` bytes, else scanned for its
/// cursor. An oversized answer without a readable cursor is the kit's oversized-answer
/// error.
pub async fn read(
    op: &'static str,
    mut response: reqwest::Response,
    max: u64,
) -> Result<Batch, HttpError> {
    let too_large = || HttpError::decode(op, format!("the answer exceeds {max} bytes"));
    let mut kept = Vec::new();
    let mut scan = CursorScan::default();
    let mut bytes: u64 = 0;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| HttpError::transport(op, e))?
    {
        bytes += chunk.len() as u64;
        scan.feed(&chunk);
        if bytes <= max {
            kept.extend_from_slice(&chunk);
        } else if bytes > MAX_SKIPPED_BYTES {
            return Err(too_large());
        } else {
            kept = Vec::new();
        }
    }
    if bytes <= max {
        return Ok(Batch::Whole(kept));
    }
    let cursor = scan.cursor().ok_or_else(too_large)?;
    Ok(Batch::TooLarge { bytes, cursor })
}

/// Finds the top-level `get_updates_buf` of a JSON object fed in pieces.
#[derive(Debug, Default)]
pub struct CursorScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Whether the string being read is at the top level (a key, or a value of one).
    keeping: bool,
    /// The top-level string being read, raw (escapes kept); `None` once too long.
    string: Option<Vec<u8>>,
    /// The last top-level string read, while it may be a key.
    key: Option<Vec<u8>>,
    /// The next top-level value is the cursor's.
    want: bool,
    cursor: Option<String>,
}

impl CursorScan {
    /// Reads the next bytes of the answer.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.in_string {
                self.string_byte(b);
            } else {
                self.structure_byte(b);
            }
        }
    }

    /// The cursor found, if any (the last, should the key come twice).
    pub fn cursor(&self) -> Option<String> {
        self.cursor.clone()
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
            if string.len() > MAX_CURSOR_BYTES {
                self.string = None;
            }
        }
    }

    fn string_ended(&mut self) {
        let string = self.string.take();
        if std::mem::take(&mut self.want) {
            let quoted = string.map(|s| [&b"\""[..], &s, b"\""].concat());
            if let Some(cursor) = quoted.and_then(|q| serde_json::from_slice::<String>(&q).ok()) {
                self.cursor = Some(cursor);
            }
        } else {
            self.key = string;
        }
    }

    fn structure_byte(&mut self, b: u8) {
        match b {
            b'"' => {
                self.in_string = true;
                self.escaped = false;
                self.keeping = self.depth == 1;
                self.string = self.keeping.then(Vec::new);
            }
            b'{' | b'[' => {
                self.depth = self.depth.saturating_add(1);
                self.want = false;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 => {
                let key = self.key.take();
                self.want = key.as_deref() == Some(CURSOR_KEY);
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ if self.depth == 1 => {
                // `,`, or a number, `true`, `false` or `null` as a value.
                self.want = false;
                self.key = None;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scans `json` cut at every place into two pieces: each must find `expected`.
    fn found(json: &str, expected: Option<&str>) {
        for cut in 0..=json.len() {
            let mut scan = CursorScan::default();
            scan.feed(&json.as_bytes()[..cut]);
            scan.feed(&json.as_bytes()[cut..]);
            assert_eq!(scan.cursor().as_deref(), expected, "cut at {cut}: {json}");
        }
    }

    #[test]
    fn the_top_level_cursor_is_found_before_or_after_the_messages() {
        found(
            r#"{"ret":0,"msgs":[{"a":1}],"get_updates_buf":"Q1w="}"#,
            Some("Q1w="),
        );
        found(
            r#"{ "get_updates_buf" : "c\/2\"x" , "msgs": [] }"#,
            Some("c/2\"x"),
        );
        found(r#"{"msgs":[],"longpolling_timeout_ms":35000}"#, None);
    }

    #[test]
    fn a_cursor_key_inside_a_message_or_a_text_is_not_the_cursor() {
        let nested = r#"{"msgs":[{"get_updates_buf":"inner","text":"\"get_updates_buf\":\"no\""}],"get_updates_buf":"outer"}"#;
        found(nested, Some("outer"));
        found(r#"{"msgs":[{"get_updates_buf":"inner"}]}"#, None);
        found(r#"{"get_updates_buf":null,"x":"y"}"#, None);
        found(r#"{"get_updates_buf":{"a":"b"},"x":"y"}"#, None);
    }
}
