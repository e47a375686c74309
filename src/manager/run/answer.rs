//! The final of a turn (or of one goal-continuation segment): its text composed from what
//! the agent wrote, the files it presented and how the run ended, bounded to
//! `bridge.max_reply_messages`, then published (or routed the late way after a hand-off,
//! `handoff.rs`).

use im_bridge_channel::{InboundMessage, LengthUnit, split};

use super::handoff;
use crate::i18n::{Arg, Locale, msg as m};
use crate::manager::Inner;
use crate::manager::artifacts::{self, Fetched, Source};
use crate::manager::journal::{Entry, Final};
use crate::manager::turn::Turn;

/// How a turn's final ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// The run finished: the text as it is (or the no-response sentence).
    Complete,
    /// The run failed: the failure sentence, or after text already shown, that text and a
    /// line saying the answer was cut off.
    Failed,
    /// `/stop` stopped it: the text so far and a line saying so (or that line alone).
    Stopped,
}

impl Ending {
    /// The `outcome` label of the runs counter.
    pub(super) fn outcome(self) -> &'static str {
        match self {
            Self::Complete => "completed",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

/// Publishes the final of a turn (or of one goal-continuation segment): its text (or the
/// files line, or the failure or no-response sentence) under the segment's marker line,
/// and the clarification flag. `part`: a segment the run goes on after (or whose turn
/// publishes more segments), journaled as a part of the answer so a restart publishes
/// only the segments after it.
pub(super) async fn publish_final(
    inner: &Inner,
    msg: &InboundMessage,
    source: Source<'_>,
    turn: Turn,
    ending: Ending,
    marker: Option<&str>,
    part: bool,
) {
    let (locale, _) = inner.replier.locale_for(msg).await;
    let caps = inner.replier.outbound().capabilities(&msg.channel_name);
    // The files the agent presented, read back for a channel that can send files.
    let fetched = match caps.map_or(0, |c| c.max_upload_bytes) {
        0 => Fetched::default(),
        _ if turn.artifacts.is_empty() => Fetched::default(),
        limit => artifacts::fetch(inner, source, &locale, &turn.artifacts, limit).await,
    };
    let files_line = files_line(inner, &locale, &turn.artifacts, &fetched);
    // After a hand-off, only what it did not show: cut from the agent's own text, before
    // any line goes above it (a segment's marker, the one saying a restart made it late).
    let (wrote, rest) = match handoff::shown(inner, msg).await {
        Some(shown) => (handoff::rest_of(&turn.text, &shown).to_owned(), true),
        None => (turn.text, false),
    };
    let text = match (
        rest && wrote.trim().is_empty() && files_line.is_none(),
        ending,
    ) {
        // The hand-off showed all of it: the rest's heading says so.
        (true, Ending::Complete) => String::new(),
        // What the hand-off showed was cut off.
        (true, Ending::Failed) => inner.replier.text(&locale, m::RUN_INTERRUPTED, &[]),
        _ => final_text(inner, &locale, wrote, files_line, ending, marker),
    };
    let text = match caps {
        Some(caps) => {
            let max = inner.config.max_reply_messages.max(1);
            bounded(text, caps.length_unit, caps.max_message_len, max, || {
                inner.replier.text(&locale, m::RUN_TRUNCATED, &[])
            })
        }
        None => text,
    };
    inner
        .clarifications
        .turn_ended(msg, turn.pending_clarification)
        .await;
    let mut out = msg.reply(text, true);
    if caps.is_some_and(|c| c.reply_window.is_some()) {
        // Where a source takes only a few replies, the delivery engine may have to cut the
        // answer short; it ends the last message it may send with this.
        out.hints.truncated_note = Some(inner.replier.text(&locale, m::RUN_TRUNCATED, &[]));
    }
    out.attachments = fetched.files;
    // The rest of an answer handed off before its reply window closed goes the late way.
    let Some(out) = handoff::route_final(inner, msg, &locale, out, kind(part), rest).await else {
        if let Some(staged) = fetched.staged {
            staged.release();
        }
        return;
    };
    inner
        .replier
        .publish_keeping(msg, out, fetched.staged, kind(part))
        .await;
}

/// What a turn's final is to its journal entry: a goal segment the run goes on after
/// (`part`), or the answer.
fn kind(part: bool) -> Final {
    if part { Final::Segment } else { Final::Answer }
}

/// The line naming the files the agent presented, each one not attached saying why on a
/// line of its own; `None` when it presented none.
fn files_line(
    inner: &Inner,
    locale: &Locale,
    artifacts: &[String],
    fetched: &Fetched,
) -> Option<String> {
    if artifacts.is_empty() {
        return None;
    }
    let names: Vec<&str> = artifacts.iter().map(|p| artifacts::base_name(p)).collect();
    let created = inner.replier.text(
        locale,
        m::RUN_FILES_CREATED,
        &[
            ("count", Arg::Num(names.len() as i64)),
            (
                "names",
                Arg::Str(&inner.replier.catalogs().join_list(locale, &names)),
            ),
        ],
    );
    let lines = std::iter::once(created).chain(fetched.lines.iter().cloned());
    Some(lines.collect::<Vec<_>>().join("\n"))
}

/// The final's text: what the agent `wrote` and the files line, then what the user must
/// know about how the answer ended (alone when nothing was written, else as its last line,
/// so partial text is never passed off as complete), under the segment's `marker` line, and
/// after the line saying why it comes late when a restarted bridge (or another replica)
/// finishes it (its first final only).
fn final_text(
    inner: &Inner,
    locale: &Locale,
    wrote: String,
    files_line: Option<String>,
    ending: Ending,
    marker: Option<&str>,
) -> String {
    let wrote_some = !wrote.trim().is_empty();
    let mut text = if wrote_some {
        match &files_line {
            Some(line) => format!("{wrote}\n\n{line}"),
            None => wrote,
        }
    } else {
        files_line.unwrap_or_default()
    };
    let closing = match (ending, wrote_some || !text.is_empty()) {
        (Ending::Complete, true) => None,
        (Ending::Complete, false) => Some(m::RUN_NO_RESPONSE),
        (Ending::Failed, true) => Some(m::RUN_INTERRUPTED),
        (Ending::Failed, false) => Some(m::RUN_FAILED),
        (Ending::Stopped, _) => Some(m::RUN_STOPPED),
    };
    if let Some(id) = closing {
        let line = inner.replier.text(locale, id, &[]);
        text = if text.is_empty() {
            line
        } else {
            format!("{text}\n\n{line}")
        };
    }
    let text = match marker {
        Some(line) => format!("{line}\n\n{text}"),
        None => text,
    };
    match Entry::current().filter(Entry::late_line_due) {
        Some(_) => {
            let note = inner.replier.text(locale, m::RUN_RECOVERED, &[]);
            format!("{note}\n\n{text}")
        }
        None => text,
    }
}

/// `text` cut so that it fills at most `max` messages of `limit` `unit`s, the last one
/// ending with `note()` (a runaway answer must not flood the chat). The cut is checked with
/// the same splitter the delivery engine uses, so the bound holds after splitting.
fn bounded(
    text: String,
    unit: LengthUnit,
    limit: usize,
    max: usize,
    note: impl FnOnce() -> String,
) -> String {
    let chunks = split::split_chunks(&text, unit, limit);
    if chunks.len() <= max {
        return text;
    }
    let note = format!("\n\n{}", note());
    let start = chunks[max - 1].body.start;
    let mut room = limit.saturating_sub(unit.measure(&note) + chunks[max - 1].head);
    // A few tries: cutting the last message shorter can only help.
    for _ in 0..8 {
        let last = split::truncate(&text[start..], unit, room);
        let candidate = format!("{}{last}{note}", &text[..start]);
        if split::split_chunks(&candidate, unit, limit).len() <= max || room == 0 {
            return candidate;
        }
        room /= 2;
    }
    format!("{}{note}", &text[..start])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_13_a_runaway_answer_fills_at_most_max_messages_and_says_it_was_cut() {
        let note = || "(cut)".to_owned();
        let short = "a short answer".to_owned();
        assert_eq!(
            bounded(short.clone(), LengthUnit::Chars, 100, 3, note),
            short
        );
        let words = "word ".repeat(20_000);
        for (unit, limit, max) in [
            (LengthUnit::Utf16, 4096, 10),
            (LengthUnit::Chars, 50, 1),
            (LengthUnit::Bytes, 2000, 3),
        ] {
            let cut = bounded(words.clone(), unit, limit, max, note);
            let messages = split::split(&cut, unit, limit);
            assert_eq!(messages.len(), max, "{unit:?}");
            assert!(messages.last().unwrap().ends_with("\n\n(cut)"), "{unit:?}");
            assert!(cut.starts_with("word word"));
        }
        // Inside a code fence too: the note still lands in the last allowed message.
        let code = format!("```\n{}\n```", "let x = 1;\n".repeat(5_000));
        let cut = bounded(code, LengthUnit::Chars, 500, 4, note);
        let messages = split::split(&cut, LengthUnit::Chars, 500);
        assert!(messages.len() <= 4, "{}", messages.len());
        assert!(messages.last().unwrap().contains("(cut)"));
    }
}
