//! The message ids of the catalogs, grouped by prefix: `run-` (agent runs), `err-`
//! (failures), `cmd-` (commands), `goal-` (the `/goal` family), `lang-` (`/lang`),
//! `compact-` (`/compact`), `menu-` (command-picker descriptions), `help-` (the `/help`
//! entries: one per command of `manager::commands`' table, plus a header and a footer).
//!
//! Code refers to messages only through these constants, so a typo is a compile error and
//! the catalog tests can check every id exists in every shipped locale with the same
//! placeables. The placeables each message takes are listed in its doc.

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident = $id:literal;)*) => {
        $($(#[$doc])* pub const $name: &str = $id;)*
        /// Every id above, for catalog checks.
        pub const ALL: &[&str] = &[$($id),*];
    };
}

ids! {
    /// The thread already has a run in flight.
    RUN_BUSY = "run-busy";
    /// The agent finished without any visible text.
    RUN_NO_RESPONSE = "run-no-response";
    /// The run failed after it started (error event, dropped stream) before any text.
    RUN_FAILED = "run-failed";
    /// The last line of an answer whose run failed after text was shown: it is incomplete.
    RUN_INTERRUPTED = "run-interrupted";
    /// The last line of an answer stopped with `/stop` (alone when no text came).
    RUN_STOPPED = "run-stopped";
    /// The last line of an answer cut at `bridge.max_reply_messages` messages.
    RUN_TRUNCATED = "run-truncated";
    /// The first line of an answer finished after the bridge restarted (issue 19).
    RUN_RECOVERED = "run-recovered";
    /// A same-thread request waits behind another.
    RUN_QUEUED = "run-queued";
    /// The last line of an answer handed off before its source's reply window closed
    /// (issue 33): the rest follows. `$where` (`group`: with the reply to anyone's next
    /// message; `private`: with the reply to the user's next message; `soon`: as soon as
    /// it is ready), `$shown` (`yes` when text came before this line, else `no`)
    RUN_HANDOFF = "run-handoff";
    /// The first line of the rest of a handed-off answer. `$more` (`no` when the answer
    /// had nothing after what was shown)
    RUN_REST = "run-rest";
    /// The first line of an answer delivered with a later message's reply, because its own
    /// message took no more replies by the time it was ready (issue 33).
    RUN_HELD = "run-held";
    /// The conversation's thread is gone for its DeerFlow identity (deleted, or made by an
    /// older bridge under another user), so this message starts a new one (issue 26).
    RUN_THREAD_REPLACED = "run-thread-replaced";
    /// A message older than its channel's `max_event_age` was not acted on (issue 33): said
    /// once per chat for a burst of them.
    RUN_TOO_LATE = "run-too-late";
    /// "Working on it": the placeholder, and the notice that a queued request started.
    RUN_THINKING = "run-thinking";
    /// Files the agent created. `$count`, `$names`
    RUN_FILES_CREATED = "run-files-created";
    /// A presented file over the chat's upload limit. `$name`, `$limit` (whole MB)
    RUN_FILE_TOO_LARGE = "run-file-too-large";
    /// A presented file the Gateway does not have. `$name`
    RUN_FILE_MISSING = "run-file-missing";
    /// A presented file that could not be read (Gateway down, no room). `$name`
    RUN_FILE_UNAVAILABLE = "run-file-unavailable";
    /// A file the chat platform refused. `$name`
    RUN_FILE_REFUSED = "run-file-refused";
    /// Appended to the text the agent reads: an attachment could not be read or stored.
    /// `$name`
    RUN_ATTACHMENT_UNAVAILABLE = "run-attachment-unavailable";
    /// Appended to the text the agent reads: an attachment was over the size limit.
    /// `$name`
    RUN_ATTACHMENT_TOO_LARGE = "run-attachment-too-large";

    /// Something failed inside the bridge.
    ERR_INTERNAL = "err-internal";
    /// The Gateway could not be reached or answered with a server error.
    ERR_GATEWAY_UNAVAILABLE = "err-gateway-unavailable";
    /// The inbound queue is full.
    ERR_TOO_BUSY = "err-too-busy";
    /// The configured agent name is invalid.
    ERR_INVALID_AGENT = "err-invalid-agent";

    /// `/new` worked.
    CMD_NEW_DONE = "cmd-new-done";
    /// `/new` failed.
    CMD_NEW_FAILED = "cmd-new-failed";
    /// `/status` with a binding. `$thread`
    CMD_STATUS_ACTIVE = "cmd-status-active";
    /// `/status` without one.
    CMD_STATUS_NONE = "cmd-status-none";
    /// `/stop` with no run in flight in this conversation.
    CMD_STOP_NONE = "cmd-stop-none";
    /// `/stop` could not stop the run (the Gateway refused or is unreachable; or the run
    /// cannot be addressed on this channel).
    CMD_STOP_FAILED = "cmd-stop-failed";
    /// `/stop` stopped a run in flight on the conversation's thread that this process was
    /// not following (another replica's, or another client's).
    CMD_STOP_ELSEWHERE = "cmd-stop-elsewhere";
    /// An unknown command. `$command`, `$commands`
    CMD_UNKNOWN = "cmd-unknown";
    /// A blank command. `$commands`
    CMD_UNKNOWN_EMPTY = "cmd-unknown-empty";
    /// `/models`. `$models` (one `• name` line each)
    CMD_MODELS_LIST = "cmd-models-list";
    /// `/models` with none configured.
    CMD_MODELS_NONE = "cmd-models-none";
    /// `/models` failed.
    CMD_MODELS_FAILED = "cmd-models-failed";
    /// `/memory`. `$count`
    CMD_MEMORY_FACTS = "cmd-memory-facts";
    /// `/memory` failed.
    CMD_MEMORY_FAILED = "cmd-memory-failed";
    /// A slash skill that is installed but disabled. `$command`
    CMD_SKILL_DISABLED = "cmd-skill-disabled";
    /// The skill list could not be read.
    CMD_SKILL_LOOKUP_FAILED = "cmd-skill-lookup-failed";

    /// No goal (or no conversation yet).
    GOAL_STATUS_NONE = "goal-status-none";
    /// A goal without continuations yet. `$objective`
    GOAL_STATUS_ACTIVE = "goal-status-active";
    /// A goal being worked on. `$objective`, `$n`, `$max`
    GOAL_STATUS_PROGRESS = "goal-status-progress";
    /// Auto-continue stopped. `$objective`, `$reason` (a code), `$n`, `$max`
    GOAL_STATUS_STOPPED = "goal-status-stopped";
    /// The last goal was met. `$objective`
    GOAL_STATUS_MET = "goal-status-met";
    /// Reading the goal failed.
    GOAL_STATUS_FAILED = "goal-status-failed";
    /// The goal was cleared (or there was none).
    GOAL_CLEARED = "goal-cleared";
    /// Clearing failed.
    GOAL_CLEAR_FAILED = "goal-clear-failed";
    /// A run is in flight, so the goal was left unchanged.
    GOAL_BUSY_UNCHANGED = "goal-busy-unchanged";
    /// Setting failed; no run started.
    GOAL_SET_FAILED = "goal-set-failed";
    /// The objective is too long. `$max`
    GOAL_TOO_LONG = "goal-too-long";
    /// The from-chat hint is too long. `$max`
    GOAL_HINT_TOO_LONG = "goal-hint-too-long";
    /// Opening line of a goal continuation's message. `$n`, `$max` (0 = unknown)
    GOAL_CONTINUING = "goal-continuing";
    /// from-chat saved a goal. `$objective`
    GOAL_FROM_CHAT_SAVED = "goal-from-chat-saved";
    /// from-chat: a run is in flight.
    GOAL_FROM_CHAT_BUSY = "goal-from-chat-busy";
    /// from-chat: a question waits for the user's answer.
    GOAL_FROM_CHAT_PENDING_INPUT = "goal-from-chat-pending-input";
    /// from-chat: an action waits for approval.
    GOAL_FROM_CHAT_PENDING_APPROVAL = "goal-from-chat-pending-approval";
    /// from-chat: the goal changed while composing.
    GOAL_FROM_CHAT_GOAL_CHANGED = "goal-from-chat-goal-changed";
    /// from-chat: nothing to compose from.
    GOAL_FROM_CHAT_NO_CONTEXT = "goal-from-chat-no-context";
    /// from-chat: no clear goal in the conversation.
    GOAL_FROM_CHAT_UNCLEAR = "goal-from-chat-unclear";
    /// from-chat: the composing model failed.
    GOAL_FROM_CHAT_SYNTHESIS_FAILED = "goal-from-chat-synthesis-failed";
    /// from-chat: not permitted.
    GOAL_FROM_CHAT_FORBIDDEN = "goal-from-chat-forbidden";
    /// from-chat: no answer in time; it may still be saved.
    GOAL_FROM_CHAT_TIMEOUT = "goal-from-chat-timeout";
    /// from-chat: any other failure.
    GOAL_FROM_CHAT_FAILED = "goal-from-chat-failed";
    /// from-chat: this Gateway has no `goal/from-chat` route (an older DeerFlow; issue 26).
    GOAL_FROM_CHAT_UNSUPPORTED = "goal-from-chat-unsupported";
    /// from-chat saved the goal in the previous conversation. `$objective`
    GOAL_FROM_CHAT_BINDING_CHANGED = "goal-from-chat-binding-changed";
    /// from-chat saved the goal, but its task did not start: the thread is busy with
    /// another run. `$objective`
    GOAL_FROM_CHAT_NOT_STARTED_BUSY = "goal-from-chat-not-started-busy";
    /// from-chat saved the goal, but its task did not start: the Gateway is out of reach.
    /// `$objective`
    GOAL_FROM_CHAT_NOT_STARTED_UNAVAILABLE = "goal-from-chat-not-started-unavailable";
    /// from-chat saved the goal, but its task did not start: the chat's agent name is
    /// invalid. `$objective`
    GOAL_FROM_CHAT_NOT_STARTED_INVALID_AGENT = "goal-from-chat-not-started-invalid-agent";
    /// from-chat saved the goal, but starting its task failed for another reason.
    /// `$objective`
    GOAL_FROM_CHAT_NOT_STARTED_FAILED = "goal-from-chat-not-started-failed";
    /// from-chat saved the goal, but a `/stop` sent while it was being composed asked that
    /// its task not start. `$objective`
    GOAL_FROM_CHAT_NOT_STARTED_STOPPED = "goal-from-chat-not-started-stopped";

    /// `/lang`. `$locale`, `$source` (chat, owner, sender, channel, admin, default)
    LANG_CURRENT = "lang-current";
    /// `/lang <tag>` worked. `$locale`
    LANG_SET = "lang-set";
    /// `/lang auto` worked. `$locale` (now in effect)
    LANG_AUTO = "lang-auto";
    /// Only admins may change the language here.
    LANG_NOT_ALLOWED = "lang-not-allowed";
    /// An unsupported tag. `$tag`, `$supported`
    LANG_UNSUPPORTED = "lang-unsupported";
    /// The locale's name for itself ("English", "简体中文"): how `/lang` names languages.
    LOCALE_NAME = "locale-name";
    /// What joins the items of a list in a sentence (", " in English, "、" in Chinese).
    LIST_SEPARATOR = "list-separator";
    /// What a bare `/bootstrap` asks the agent (agent input, in the chat's language).
    BOOTSTRAP_DEFAULT_INPUT = "bootstrap-default-input";

    /// `/compact` with bad arguments. `$max`
    COMPACT_USAGE = "compact-usage";
    /// No conversation to compact.
    COMPACT_NOTHING = "compact-nothing";
    /// Compacted. `$removed`, `$kept`
    COMPACT_DONE = "compact-done";
    /// Nothing needed compacting.
    COMPACT_NOT_NEEDED = "compact-not-needed";
    /// Compaction is disabled on the server.
    COMPACT_DISABLED = "compact-disabled";
    /// A run is in flight.
    COMPACT_BUSY = "compact-busy";
    /// No answer in time; it may still complete.
    COMPACT_TIMEOUT = "compact-timeout";
    /// Compaction failed; nothing changed.
    COMPACT_FAILED = "compact-failed";

    /// Command-picker description of `/new`.
    MENU_NEW = "menu-new";
    /// Command-picker description of `/status`.
    MENU_STATUS = "menu-status";
    /// Command-picker description of `/goal`.
    MENU_GOAL = "menu-goal";
    /// Command-picker description of `/compact`.
    MENU_COMPACT = "menu-compact";
    /// Command-picker description of `/models`.
    MENU_MODELS = "menu-models";
    /// Command-picker description of `/memory`.
    MENU_MEMORY = "menu-memory";
    /// Command-picker description of `/lang`.
    MENU_LANG = "menu-lang";
    /// Command-picker description of `/bootstrap`.
    MENU_BOOTSTRAP = "menu-bootstrap";
    /// Command-picker description of `/help`.
    MENU_HELP = "menu-help";
    /// Command-picker description of `/stop`.
    MENU_STOP = "menu-stop";

    /// The first line of `/help`.
    HELP_HEADER = "help-header";
    /// The last line of `/help` (installed skills, which are not commands of the table).
    HELP_FOOTER = "help-footer";
    /// `/help` entry of `/new`. Each entry is one or more lines, each starting `/<name>`.
    HELP_NEW = "help-new";
    /// `/help` entry of `/goal`.
    HELP_GOAL = "help-goal";
    /// `/help` entry of `/status`.
    HELP_STATUS = "help-status";
    /// `/help` entry of `/stop`.
    HELP_STOP = "help-stop";
    /// `/help` entry of `/compact`.
    HELP_COMPACT = "help-compact";
    /// `/help` entry of `/context` (`/context compact`).
    HELP_CONTEXT = "help-context";
    /// `/help` entry of `/models`.
    HELP_MODELS = "help-models";
    /// `/help` entry of `/memory`.
    HELP_MEMORY = "help-memory";
    /// `/help` entry of `/lang`.
    HELP_LANG = "help-lang";
    /// `/help` entry of `/bootstrap`.
    HELP_BOOTSTRAP = "help-bootstrap";
    /// `/help` entry of `/help`.
    HELP_HELP = "help-help";
}
