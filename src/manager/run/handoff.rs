//! Answers that outlive their source's reply window (issue 33).
//!
//! On a channel that may answer a message only for a while ([`ReplyWindow`]: say 5
//! minutes in a group, 60 in a private chat), a run that takes longer would lose its
//! answer. So a turn that is still running [`margin`] before its source's window closes
//! *hands the answer off*: what the run has written so far goes out as a reply while the
//! window is open, ending with a localized line saying the rest follows and how
//! ([`RUN_HANDOFF`](m::RUN_HANDOFF)); the entry records what was shown. When the run ends,
//! its final carries only the rest, under a line saying it continues
//! ([`RUN_REST`](m::RUN_REST)), and goes the way the channel's [`LateReplies`] says: as a
//! message that answers no source where the platform takes one, else (or when that is
//! refused) held in the journal for the chat's next message, whose first reply it becomes
//! (`journal/held.rs`). A final that was not handed off but finds its source closed anyway
//! (a queue, a slow delivery) is held the same way, then opening with
//! [`RUN_HELD`](m::RUN_HELD).
//!
//! Only journaled turns hand off: the rest must outlive this process. The decision logic
//! ([`due_in`], [`margin`], [`rest_of`], [`shown_part`]) is pure and tested here.

use std::time::Duration;

use im_bridge_channel::{
    ChatKind, InboundMessage, LateReplies, LengthUnit, OutboundMessage, ReplyWindow, split,
};
use tokio::time::Instant;

use crate::i18n::{Arg, Locale, msg as m};
use crate::manager::Inner;
use crate::manager::journal::{Entry, Final};
use crate::telemetry::names;

/// How long before a window closes the answer is handed off, at most: time for the reply
/// to be written and accepted. Windows shorter than ten times this hand off at a tenth.
pub const MARGIN: Duration = Duration::from_secs(30);

/// How long before `window` closes an answer is handed off: [`MARGIN`], or a tenth of a
/// short window.
pub fn margin(window: Duration) -> Duration {
    MARGIN.min(window / 10)
}

/// How long from `now` until an answer to a message of `kind` created at `source_at`
/// (both Unix seconds) must be handed off: at once when that time has passed, `None` when
/// the window has closed already (no reply can go out; the final is held when refused).
pub fn due_in(window: ReplyWindow, kind: ChatKind, source_at: f64, now: f64) -> Option<Duration> {
    let length = window.length(kind);
    let closes = source_at + length.as_secs_f64();
    if !closes.is_finite() || closes <= now {
        return None;
    }
    let due = closes - margin(length).as_secs_f64();
    Some(Duration::try_from_secs_f64(due - now).unwrap_or(Duration::ZERO))
}

/// What of `answer` was not shown yet, given that `shown` was: what follows it when the
/// answer starts with it, else the whole answer (the run wrote something else since).
pub fn rest_of<'a>(answer: &'a str, shown: &str) -> &'a str {
    let shown = shown.trim_end();
    if shown.is_empty() {
        return answer;
    }
    answer
        .strip_prefix(shown)
        .map_or(answer, |rest| rest.trim_start())
}

/// The part of `so_far` a handoff shows so that it and `line` fit in one message of
/// `limit` `unit`s: `(shown, displayed)`, where `shown` is the prefix the rest continues
/// from and `displayed` the text sent (with an ellipsis when it was cut).
pub fn shown_part(so_far: &str, line: &str, unit: LengthUnit, limit: usize) -> (String, String) {
    let so_far = so_far.trim_end();
    let room = limit.saturating_sub(unit.measure(line) + unit.measure("\n\n"));
    let cut = split::truncate(so_far, unit, room);
    let shown = cut.strip_suffix(split::ELLIPSIS).filter(|_| cut != so_far);
    let shown = shown.unwrap_or(&cut).to_owned();
    let displayed = match cut.is_empty() {
        true => line.to_owned(),
        false => format!("{cut}\n\n{line}"),
    };
    (shown, displayed)
}

/// When a turn's answer is to be handed off.
pub(super) struct Handoff {
    /// When it falls due.
    pub(super) due: Instant,
}

impl Handoff {
    /// The handoff of `msg`'s answer: `None` on a channel without a reply window, for a
    /// message that names no source, outside a journaled turn, when the entry handed off
    /// already (a restart follows the run), or when the window has closed.
    pub(super) fn plan(inner: &Inner, msg: &InboundMessage) -> Option<Self> {
        let window = window_of(inner, msg)?;
        msg.thread_ts.as_ref()?;
        let entry = Entry::current()?;
        if entry.handed_off().is_some() {
            return None;
        }
        let wait = due_in(window, msg.chat_kind, msg.created_at, now_unix())?;
        Some(Self {
            due: Instant::now() + wait,
        })
    }
}

/// The channel's reply window, if it has one.
pub(super) fn window_of(inner: &Inner, msg: &InboundMessage) -> Option<ReplyWindow> {
    inner.replier.outbound().reply_window(&msg.channel_name)
}

/// Sends what was written so far with the line saying the rest follows, written ahead with
/// what it shows (so the rest is right after a restart too; forgotten if the platform
/// refuses it for good, and given up for the whole answer if its delivery failed for now:
/// [`Entry::handed_off_known`]).
pub(super) async fn hand_off(inner: &Inner, msg: &InboundMessage, so_far: &str) {
    let (Some(_), Some(window), Some(caps)) = (
        Entry::current(),
        window_of(inner, msg),
        inner.replier.outbound().capabilities(&msg.channel_name),
    ) else {
        return;
    };
    let (locale, _) = inner.replier.locale_for(msg).await;
    let route = match (window.late, msg.chat_kind) {
        (LateReplies::Unsourced, _) => "soon",
        (LateReplies::NextMessage, ChatKind::Group) => "group",
        (LateReplies::NextMessage, ChatKind::Private) => "private",
    };
    let line = |shown: &str| {
        let shown = if shown.is_empty() { "no" } else { "yes" };
        inner.replier.text(
            &locale,
            m::RUN_HANDOFF,
            &[("where", Arg::Str(route)), ("shown", Arg::Str(shown))],
        )
    };
    let (unit, limit) = (caps.length_unit, caps.max_message_len);
    let (shown, text) = shown_part(so_far, &line(so_far.trim()), unit, limit);
    tracing::info!(
        shown_len = shown.len(),
        "Handing an answer off before its reply window closes."
    );
    let channel = inner.replier.outbound().channel_label(&msg.channel_name);
    metrics::counter!(names::HANDOFFS, "channel" => channel, "step" => "handed_off").increment(1);
    // Written ahead with what it shows: the final that ends the run carries the rest.
    let out = msg.reply(text, true);
    inner.replier.publish_hand_off(msg, out, shown).await;
}

/// What the turn's hand-off showed of the answer, if it handed off, once its delivery came
/// to an end (the final then carries only the rest, [`rest_of`] the agent's text, and goes
/// the late way: [`route_final`]).
pub(super) async fn shown(inner: &Inner, msg: &InboundMessage) -> Option<String> {
    window_of(inner, msg)?;
    Entry::current()?.handed_off_known().await
}

/// Routes a turn's final `out`: the `rest` of a handed-off answer (its text composed from
/// the rest alone, empty when nothing more came) goes the late way under the line saying
/// it continues (`None` returned: nothing left to publish); any other final is returned to
/// be published as usual (`Replier::publish_keeping` gives it the line it opens with if it
/// is held after all).
pub(super) async fn route_final(
    inner: &Inner,
    msg: &InboundMessage,
    locale: &Locale,
    mut out: OutboundMessage,
    kind: Final,
    rest: bool,
) -> Option<OutboundMessage> {
    let (true, Some(window), Some(entry)) = (rest, window_of(inner, msg), Entry::current()) else {
        return Some(out);
    };
    let more = if out.text.trim().is_empty() {
        "no"
    } else {
        "yes"
    };
    let heading = inner
        .replier
        .text(locale, m::RUN_REST, &[("more", Arg::Str(more))]);
    // What is left of it opens with the same line, should its carrier's window close
    // between its messages.
    let goes_on = inner
        .replier
        .text(locale, m::RUN_REST, &[("more", Arg::Str("yes"))]);
    out.hints.rest_note = Some(goes_on);
    out.text = match more {
        "no" => heading,
        _ => format!("{heading}\n\n{}", out.text),
    };
    // Files cannot wait in the journal; the answer's text names them.
    out.attachments.clear();
    entry
        .send_rest(out, window.late == LateReplies::Unsourced, kind)
        .await;
    None
}

/// Now, in Unix seconds.
fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 5 minutes in a group, an hour in a private chat.
    const WINDOW: ReplyWindow = ReplyWindow {
        group: Duration::from_secs(300),
        private: Duration::from_secs(3600),
        max_replies_per_source: 5,
        late: LateReplies::NextMessage,
        repeats_shown_once: true,
    };

    #[test]
    fn an_answer_is_handed_off_a_margin_before_its_window_closes() {
        let sent = 1_700_000_000.0;
        // A group message: 5 minutes, handed off 30 s before the end.
        assert_eq!(
            due_in(WINDOW, ChatKind::Group, sent, sent),
            Some(Duration::from_secs(270))
        );
        assert_eq!(
            due_in(WINDOW, ChatKind::Group, sent, sent + 100.0),
            Some(Duration::from_secs(170))
        );
        // Within the margin: at once, while the window is still open.
        assert_eq!(
            due_in(WINDOW, ChatKind::Group, sent, sent + 285.0),
            Some(Duration::ZERO)
        );
        // Closed: nothing can go out any more.
        assert_eq!(due_in(WINDOW, ChatKind::Group, sent, sent + 300.0), None);
        // A private chat's hour.
        assert_eq!(
            due_in(WINDOW, ChatKind::Private, sent, sent + 300.0),
            Some(Duration::from_secs(3270))
        );
        // A message stamped ahead of this host's clock counts from its stamp.
        assert_eq!(
            due_in(WINDOW, ChatKind::Group, sent + 60.0, sent),
            Some(Duration::from_secs(330))
        );
        // A short window hands off at a tenth of it.
        assert_eq!(margin(Duration::from_secs(3)), Duration::from_millis(300));
        assert_eq!(margin(Duration::from_secs(3600)), MARGIN);
    }

    #[test]
    fn the_handoff_line_reads_as_one_sentence_in_every_route_and_locale() {
        let catalogs = crate::i18n::Catalogs::embedded().unwrap();
        for tag in ["en-US", "zh-CN"] {
            let locale = catalogs.negotiate(tag).unwrap();
            let mut seen = Vec::new();
            for route in ["group", "private", "soon"] {
                for shown in ["yes", "no"] {
                    let args = [("where", Arg::Str(route)), ("shown", Arg::Str(shown))];
                    let line = catalogs.text(&locale, m::RUN_HANDOFF, &args);
                    assert!(
                        !line.contains('\n') && !line.contains("  "),
                        "{tag}: {line:?}"
                    );
                    assert!(!seen.contains(&line), "{tag}: {line:?} twice");
                    seen.push(line);
                }
            }
        }
    }

    #[test]
    fn the_rest_continues_after_what_was_shown() {
        let answer = "Step one: read.\n\nStep two: write.";
        assert_eq!(rest_of(answer, "Step one: read."), "Step two: write.");
        assert_eq!(rest_of(answer, "Step one: read.\n\n"), "Step two: write.");
        // Nothing was shown: all of it.
        assert_eq!(rest_of(answer, ""), answer);
        // The run wrote something else since (a new message): all of it.
        assert_eq!(rest_of(answer, "Let me look that up."), answer);
        // Everything was shown already.
        assert_eq!(rest_of(answer, answer), "");
    }

    #[test]
    fn what_is_shown_fits_one_message_with_the_line() {
        let line = "(more later)";
        let (shown, text) = shown_part("So far.  ", line, LengthUnit::Chars, 100);
        assert_eq!(shown, "So far.");
        assert_eq!(text, "So far.\n\n(more later)");
        let (shown, text) = shown_part("", line, LengthUnit::Chars, 100);
        assert_eq!((shown.as_str(), text.as_str()), ("", line));
        // Too long: cut with an ellipsis; the rest continues from the cut.
        let long = "abcdefghij".repeat(3);
        let (shown, text) = shown_part(&long, line, LengthUnit::Chars, 26);
        assert_eq!(text.chars().count(), 26, "{text}");
        assert_eq!(shown, "abcdefghija");
        assert_eq!(text, "abcdefghija…\n\n(more later)");
        assert_eq!(rest_of(&long, &shown), &long[11..]);
        // Counted in the channel's unit, bytes here.
        let (shown, text) = shown_part(&"答".repeat(40), line, LengthUnit::Bytes, 60);
        assert!(text.len() <= 60, "{}", text.len());
        assert!(text.starts_with(&shown));
    }
}
