//! Drawing replies on the console.
//!
//! Finished replies are printed in full, each followed by a newline. On a terminal a reply
//! still being written lives on one dimmed status line (its last line of text, cut to
//! [`STATUS_WIDTH`] characters so it never wraps) that each update overwrites with
//! `\r` + erase-line; when it finishes, the status line is erased and the full text printed.

use std::sync::atomic::{AtomicU64, Ordering};

use im_bridge_channel::ChannelResult;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

/// Characters shown on the status line; short enough not to wrap on common terminals.
const STATUS_WIDTH: usize = 72;
const ERASE_LINE: &str = "\r\x1b[2K";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

struct State {
    out: Box<dyn AsyncWrite + Send + Unpin>,
    /// The live reply on the status line: its id and the line shown.
    live: Option<(u64, String)>,
}

pub(crate) struct Renderer {
    state: Mutex<State>,
    tty: bool,
    next_id: AtomicU64,
}

impl Renderer {
    pub(crate) fn new(out: Box<dyn AsyncWrite + Send + Unpin>, tty: bool) -> Self {
        Self {
            state: Mutex::new(State { out, live: None }),
            tty,
            next_id: AtomicU64::new(1),
        }
    }

    /// Prints a finished reply; returns its id.
    pub(crate) async fn print(&self, text: &str) -> ChannelResult<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state.lock().await;
        let drawn = state.live.is_some();
        self.write_final(&mut state, text, drawn).await?;
        Ok(id)
    }

    /// Shows `text` as live reply `id` (a new one when `None`); returns its id.
    pub(crate) async fn status(&self, id: Option<u64>, text: &str) -> ChannelResult<u64> {
        let id = id.unwrap_or_else(|| self.next_id.fetch_add(1, Ordering::Relaxed));
        if !self.tty {
            return Ok(id);
        }
        let mut state = self.state.lock().await;
        let line = status_line(text);
        let drawn = format!("{ERASE_LINE}{DIM}{line}{RESET}");
        state.live = Some((id, line));
        state.out.write_all(drawn.as_bytes()).await?;
        state.out.flush().await?;
        Ok(id)
    }

    /// Ends live reply `id` with its full text.
    pub(crate) async fn finish(&self, id: u64, text: &str) -> ChannelResult {
        let mut state = self.state.lock().await;
        let drawn = state.live.is_some();
        if state.live.as_ref().is_some_and(|(live, _)| *live == id) {
            state.live = None;
        }
        self.write_final(&mut state, text, drawn).await
    }

    /// Prints `text` as a finished reply, first erasing the status line when one is drawn.
    async fn write_final(&self, state: &mut State, text: &str, erase: bool) -> ChannelResult {
        let mut buf = String::with_capacity(text.len() + 32);
        if self.tty && erase {
            buf.push_str(ERASE_LINE);
        }
        buf.push_str(text);
        buf.push('\n');
        // Another reply is still being written: put its status line back below.
        if let (true, Some((_, line))) = (self.tty, &state.live) {
            buf.push_str(DIM);
            buf.push_str(line);
            buf.push_str(RESET);
        }
        state.out.write_all(buf.as_bytes()).await?;
        state.out.flush().await?;
        Ok(())
    }
}

/// The last non-empty line of `text`, keeping its final [`STATUS_WIDTH`] characters.
fn status_line(text: &str) -> String {
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let count = last.chars().count();
    if count <= STATUS_WIDTH {
        return last.to_owned();
    }
    let mut line = String::from("…");
    line.extend(last.chars().skip(count - (STATUS_WIDTH - 1)));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_line_keeps_the_tail_of_the_last_line() {
        assert_eq!(status_line("first\nsecond ▉"), "second ▉");
        let long = "x".repeat(200) + "END";
        let line = status_line(&long);
        assert_eq!(line.chars().count(), STATUS_WIDTH);
        assert!(line.starts_with('…') && line.ends_with("END"));
        assert_eq!(
            status_line("中".repeat(100).as_str()).chars().count(),
            STATUS_WIDTH
        );
    }
}
