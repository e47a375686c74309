//! The console channel: stdin lines in, replies out, for `im-bridge demo` and local trials.
//!
//! It follows the adapter skeleton in miniature: this file is the adapter (transport and
//! primitives), `render.rs` draws on the terminal. There is no platform API, so no
//! `api.rs`/`model.rs`, and no settings beyond the process environment.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod render;

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use async_trait::async_trait;
use im_bridge_channel::{
    Capabilities, Channel, ChannelError, ChannelExit, ChannelIdentity, ChannelResult,
    CommandVocabulary, Configured, InboundMessage, InboundSink, Issues, LengthUnit, MessageId,
    OutboundFile, Platform, Prepared, SendTarget, SentMessage, Stage, Telemetry, UpdateMode,
    Waited,
};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, BufReader};
use tokio_util::sync::CancellationToken;

use render::Renderer;

/// The provider key of this channel.
pub const NAME: &str = "console";
/// The one chat the console has.
pub const CHAT_ID: &str = "local";
/// Longest line accepted from the terminal, in bytes; a longer line is cut there so a
/// runaway paste cannot exhaust memory.
const MAX_LINE_BYTES: usize = 64 * 1024;

type Input = Box<dyn AsyncBufRead + Send + Unpin>;

/// The registry entry: `channels.console`, a console on the process's terminal. It has no
/// keys of its own; any key given is an unknown key (a warning).
#[derive(Clone, Copy, Debug, Default)]
pub struct ConsolePlatform;

/// The console's raw keys: none, so every key given is reported as unknown.
#[derive(serde::Deserialize)]
struct RawConsole {}

/// The console's settings: none.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct ConsoleSettings {}

impl Platform for ConsolePlatform {
    fn name(&self) -> &'static str {
        NAME
    }

    fn validate(&self, block: Value, issues: &mut Issues) -> Option<Arc<dyn Configured>> {
        let RawConsole {} = im_bridge_channel::config::parse_block(block, issues)?;
        Some(Arc::new(Prepared::new(ConsoleSettings {}, |_, ctx| {
            let console = ConsoleChannel::stdio().with_commands(ctx.commands.clone());
            Ok(Arc::new(console) as Arc<dyn Channel>)
        })))
    }

    fn checks_allowed_users(&self) -> bool {
        // A terminal's one user is whoever runs it.
        false
    }
}

/// The console channel.
pub struct ConsoleChannel {
    /// Its name and capabilities (live updates on a terminal, turn ends for a script);
    /// connected while the input is being read.
    identity: ChannelIdentity,
    input: Mutex<Option<Input>>,
    renderer: Renderer,
    tty: bool,
    user_id: String,
    locale_hint: Option<String>,
    next_id: AtomicU64,
    /// The daemon's commands, to classify lines with.
    commands: CommandVocabulary,
    /// The adapter telemetry contract; connected while the input is being read.
    telemetry: Telemetry,
    /// Where the files an agent presents are saved.
    files_dir: std::path::PathBuf,
    /// Read a script: each line waits until the bridge is done with the one before.
    one_at_a_time: bool,
    /// The newest line the bridge is done with (lines are numbered from 1, in order).
    settled: tokio::sync::watch::Sender<u64>,
}

/// Where the console saves the agent's files, relative to the working directory.
pub const FILES_DIR: &str = "im-bridge-files";
/// The largest file the console saves.
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

impl std::fmt::Debug for ConsoleChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleChannel")
            .field("tty", &self.tty)
            .finish_non_exhaustive()
    }
}

impl ConsoleChannel {
    /// A console over the process's stdin and stdout; live updates only when stdout is a
    /// terminal. The sender is `$USER` and the language hint comes from the locale variables.
    /// Input that is not a terminal (a pipe, a file) is a script, read
    /// [one line at a time](Self::one_line_at_a_time).
    pub fn stdio() -> Self {
        let tty = std::io::stdout().is_terminal();
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "local-user".into());
        let locale = ["LC_ALL", "LC_MESSAGES", "LANG"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
            .and_then(|v| locale_hint_from_posix(&v));
        Self::with_io(
            BufReader::new(tokio::io::stdin()),
            tokio::io::stdout(),
            tty,
            user,
            locale,
        )
        .one_line_at_a_time(!std::io::stdin().is_terminal())
    }

    /// A console over any reader and writer (tests, embedding).
    pub fn with_io(
        input: impl AsyncBufRead + Send + Unpin + 'static,
        output: impl AsyncWrite + Send + Unpin + 'static,
        tty: bool,
        user_id: impl Into<String>,
        locale_hint: Option<String>,
    ) -> Self {
        let telemetry = Telemetry::new(NAME);
        Self {
            identity: ChannelIdentity::new(&telemetry, capabilities(tty, false)),
            input: Mutex::new(Some(Box::new(input))),
            renderer: Renderer::new(Box::new(output), tty),
            tty,
            user_id: user_id.into(),
            locale_hint,
            next_id: AtomicU64::new(1),
            commands: CommandVocabulary::default(),
            telemetry,
            files_dir: FILES_DIR.into(),
            one_at_a_time: false,
            settled: tokio::sync::watch::Sender::new(0),
        }
    }

    /// The same console reading its input as a script: a line is read only once the
    /// bridge is done with the one before (its reply, and a goal's follow-ups, are out),
    /// and the end of input waits for the last one, so replies come in the order asked and
    /// none is cut off. Off by default (a person typing ahead is not held back).
    pub fn one_line_at_a_time(mut self, on: bool) -> Self {
        self.one_at_a_time = on;
        self.identity = ChannelIdentity::new(&self.telemetry, capabilities(self.tty, on));
        self
    }

    /// The same console saving the agent's files under `dir` (default [`FILES_DIR`]).
    pub fn with_files_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.files_dir = dir.into();
        self
    }

    /// The same console classifying lines with the daemon's `commands` (without them,
    /// every line is chat).
    pub fn with_commands(mut self, commands: CommandVocabulary) -> Self {
        self.commands = commands;
        self
    }

    fn message(&self, text: String) -> InboundMessage {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        let mut msg = InboundMessage::new(NAME, CHAT_ID, self.user_id.as_str(), text);
        msg.msg_type = self.commands.classify(&msg.text);
        msg.thread_ts = Some(MessageId::new(id.clone()));
        msg.metadata.insert("message_id".into(), id.into());
        msg.locale_hint.clone_from(&self.locale_hint);
        msg
    }

    /// A message the renderer drew as `line` (its id), counted as sent or as a failed send.
    fn drawn(&self, line: ChannelResult<u64>) -> ChannelResult<SentMessage> {
        let line = self.telemetry.sending(line)?;
        Ok(SentMessage {
            id: MessageId::new(line.to_string()),
        })
    }
}

/// What the console can show: live updates on a terminal (`tty`), finals elsewhere; files
/// saved; the end of each turn when it reads a script `one_at_a_time`.
fn capabilities(tty: bool, one_at_a_time: bool) -> Capabilities {
    let updates = if tty {
        UpdateMode::EditInPlace
    } else {
        UpdateMode::FinalOnly
    };
    // A terminal user types ahead, and a script reads its replies in order: every reply,
    // a command's too, must come back in the order asked.
    Capabilities {
        updates,
        length_unit: LengthUnit::Chars,
        serialize_conversations: true,
        max_upload_bytes: MAX_FILE_BYTES,
        turn_ends: one_at_a_time,
        ..Capabilities::final_only(usize::MAX)
    }
}

#[async_trait]
impl Channel for ConsoleChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let taken = self
            .input
            .lock()
            .map(|mut guard| guard.take())
            .unwrap_or(None);
        let Some(mut input) = taken else {
            return Err(ChannelError::Rejected {
                reason: "the console input was already consumed".into(),
            });
        };
        self.telemetry.set_connected(true);
        let exit = self.read_input(&mut input, &sink, &shutdown).await;
        self.telemetry.set_connected(false);
        if exit.is_err() {
            self.telemetry.error(Stage::Receiving);
        }
        exit
    }

    async fn send_text(&self, _: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.drawn(self.renderer.print(text).await)
    }

    async fn start_stream(&self, _: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.drawn(self.renderer.status(None, text).await)
    }

    async fn edit_text(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let line = status_line(id)?;
        self.telemetry
            .sending(self.renderer.status(Some(line), text).await.map(drop))
    }

    async fn finish_stream(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let line = status_line(id)?;
        self.telemetry
            .sending(self.renderer.finish(line, text).await)
    }

    /// Notes that the bridge is done with the line `to` answers, for a script waiting on it.
    async fn turn_ended(&self, to: SendTarget<'_>) -> ChannelResult {
        if let Some(line) = to.reply_to.and_then(|id| id.as_str().parse::<u64>().ok()) {
            self.settled.send_if_modified(|newest| {
                let newer = line > *newest;
                if newer {
                    *newest = line;
                }
                newer
            });
        }
        Ok(())
    }

    /// Copies the file into the files directory (a free name: `report (2).pdf` when
    /// `report.pdf` is taken) and prints where it went.
    async fn send_file(&self, _: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let saved = self.save(file).await;
        let saved = match saved {
            Ok(path) => path,
            Err(error) => {
                self.telemetry.error(Stage::Sending);
                return Err(error);
            }
        };
        let shown = std::path::absolute(&saved).unwrap_or(saved);
        let line = format!("📎 {} → {}", file.filename, shown.display());
        self.telemetry
            .sending(self.renderer.print(&line).await.map(drop))
    }
}

impl ConsoleChannel {
    async fn save(&self, file: &OutboundFile) -> ChannelResult<std::path::PathBuf> {
        tokio::fs::create_dir_all(&self.files_dir)
            .await
            .map_err(ChannelError::Io)?;
        let name =
            im_bridge_channel::safe_file_name(&file.filename, 200).unwrap_or_else(|| "file".into());
        let (stem, ext) = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => (stem.to_owned(), format!(".{ext}")),
            _ => (name.clone(), String::new()),
        };
        for n in 1..1000u32 {
            let candidate = match n {
                1 => self.files_dir.join(&name),
                n => self.files_dir.join(format!("{stem} ({n}){ext}")),
            };
            // `create_new` claims the name atomically; the copy then fills it.
            match tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&candidate)
                .await
            {
                Ok(_) => {
                    tokio::fs::copy(&file.path, &candidate)
                        .await
                        .map_err(ChannelError::Io)?;
                    return Ok(candidate);
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(ChannelError::Io(error)),
            }
        }
        Err(ChannelError::Rejected {
            reason: "no free file name".into(),
        })
    }
}

impl ConsoleChannel {
    /// Reads lines until end of input or shutdown, admitting each non-blank one.
    async fn read_input(
        &self,
        input: &mut Input,
        sink: &InboundSink,
        shutdown: &CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = tokio::select! {
                () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
                read = read_line(input, &mut line) => read?,
            };
            if read == 0 {
                return Ok(ChannelExit::InputEnded);
            }
            self.telemetry.received(1);
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let msg = self.message(text.to_owned());
            let line_no = msg
                .thread_ts
                .as_ref()
                .and_then(|id| id.as_str().parse().ok());
            // A local user can wait: hold the input back while the queue is full.
            match sink.send_waiting(msg, shutdown).await {
                Waited::Admitted => {}
                Waited::Stopped => return Ok(ChannelExit::Stopped),
                Waited::Closed => {
                    tracing::warn!(
                        channel = NAME,
                        "Console input was not admitted: admission is closed."
                    );
                    return Ok(ChannelExit::Stopped);
                }
            }
            if self.one_at_a_time
                && let Some(line_no) = line_no
            {
                // A script's next line waits until this one is answered.
                let mut settled = self.settled.subscribe();
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
                    _ = settled.wait_for(|newest| *newest >= line_no) => {}
                }
            }
        }
    }
}

/// The status line a message id names; ids the console did not hand out are not editable.
fn status_line(id: &MessageId) -> ChannelResult<u64> {
    id.as_str().parse().map_err(|_| ChannelError::NotEditable)
}

/// Reads one line into `buf` (without decoding), at most [`MAX_LINE_BYTES`] of it; the rest
/// of an over-long line is discarded. Returns the bytes consumed, 0 at end of input.
async fn read_line(input: &mut Input, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        input.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}

/// `zh_CN.UTF-8` → `zh-CN`; `C` and `POSIX` carry no language.
fn locale_hint_from_posix(value: &str) -> Option<String> {
    let tag = value.split(['.', '@']).next()?.replace('_', "-");
    if tag.is_empty() || tag == "C" || tag == "POSIX" {
        return None;
    }
    Some(tag)
}

#[cfg(test)]
mod tests;
