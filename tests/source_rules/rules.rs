//! The rules, each a function from one file (its path from the repository root,
//! `/`-separated, and its text) to what it breaks, so each can be shown failing on a small
//! bad snippet. A rule decides from the path whether it applies; the tree walk in
//! `source_rules.rs` hands every rule but [`file_doc`] only production files (test-only files
//! are skipped there), and every rule strips `#[cfg(test)]` items itself.
//!
//! Allow-lists are explicit, per file and per line or literal, each entry with its reason; the
//! heuristics themselves are never loosened for one offender.

use std::fmt;

use super::lexer::{self, Kind};

/// One broken rule: where, and what.
#[derive(Debug)]
pub struct Violation {
    /// The file, from the repository root.
    pub path: String,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong, with the offending text.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.what)
    }
}

fn violation(path: &str, text: &str, offset: usize, what: String) -> Violation {
    Violation {
        path: path.to_owned(),
        line: lexer::line_of(text, offset),
        what,
    }
}

/// The production code of `text` without comments: string and char literals stay.
fn code_and_literals(text: &str) -> String {
    lexer::blank(&lexer::production(text), |k| k != Kind::Comment)
}

/// STYLE habit 1: the file opens with a `//!` doc (test files too: a reader lands in any
/// file from a stack trace).
pub fn file_doc(path: &str, text: &str) -> Vec<Violation> {
    let first = lexer::lex(text)
        .into_iter()
        .find(|s| !(s.kind == Kind::Code && text[s.range.clone()].trim().is_empty()));
    match first {
        Some(s) if s.kind == Kind::Comment && text[s.range.clone()].starts_with("//!") => vec![],
        _ => vec![violation(
            path,
            text,
            0,
            "the file does not open with a //! doc".into(),
        )],
    }
}

/// STYLE habit 9: no unbounded channel in production code (comments and literals aside).
pub fn bounded_channels(path: &str, text: &str) -> Vec<Violation> {
    let code = lexer::blank(&lexer::production(text), |k| k == Kind::Code);
    code.match_indices("unbounded_channel")
        .map(|(at, _)| violation(path, text, at, "an unbounded channel".into()))
        .collect()
}

/// The chat platforms im-bridge has or plans adapters for. The console is one too.
const PLATFORMS: &[&str] = &[
    "telegram", "feishu", "lark", "dingtalk", "qq", "discord", "slack", "wecom", "wechat",
    "console",
];

/// The platform names on a lowercased line: substrings (`TelegramConfig`,
/// `im_bridge_console`), except `qq`, which must stand alone (`"qq:group"`, `qq_bot`).
fn platforms_in(line: &str) -> Vec<&'static str> {
    PLATFORMS
        .iter()
        .copied()
        .filter(|&p| {
            if p != "qq" {
                return line.contains(p);
            }
            line.match_indices(p).any(|(at, _)| {
                let b = line.as_bytes();
                let alone = |k: Option<&u8>| k.is_none_or(|c| !c.is_ascii_alphanumeric());
                alone(at.checked_sub(1).map(|k| &b[k])) && alone(b.get(at + p.len()))
            })
        })
        .collect()
}

/// Every line of `text`'s production code (comments aside, literals kept) naming a platform,
/// unless `allowed` lists the file with a text the line contains.
fn platform_lines(path: &str, text: &str, allowed: &[(&str, &str)], who: &str) -> Vec<Violation> {
    let code = code_and_literals(text);
    code.lines()
        .enumerate()
        .filter(|(_, line)| !allowed.iter().any(|(p, l)| *p == path && line.contains(l)))
        .filter_map(|(n, line)| {
            let found = platforms_in(&line.to_ascii_lowercase());
            (!found.is_empty()).then(|| Violation {
                path: path.to_owned(),
                line: n + 1,
                what: format!("{who} names {found:?}: {}", line.trim()),
            })
        })
        .collect()
}

/// Platform names `src/` may keep outside the registry: (file, text on the line). None: the
/// demo builds its channel through the registry (`channels::demo_channel`), and the
/// command line's `--help` names no platform.
pub const PLATFORMS_ALLOWED: &[(&str, &str)] = &[];

/// Issue 12: nothing in `src/` but the registry (`src/platforms.rs`) names a platform, in
/// code or string literals; the daemon's generic code learns them from the registry. Issue
/// 34: nor do the crates under `crates/` (the Gateway client, the simulator), which Cargo
/// already keeps from every adapter crate.
pub fn only_the_registry_names_platforms(path: &str, text: &str) -> Vec<Violation> {
    let daemon_side = path.starts_with("src/") || path.starts_with("crates/");
    if !daemon_side || path == "src/platforms.rs" {
        return vec![];
    }
    platform_lines(path, text, PLATFORMS_ALLOWED, "code outside the registry")
}

/// Platform names `channels/core` may keep in code or literals: (file, text on the line).
/// The console is the core's own reference channel in the delivery engine's docs only, so
/// none.
pub const CORE_PLATFORMS_ALLOWED: &[(&str, &str)] = &[];

/// Issue 29: the adapter kit names no platform in code or string literals, so a platform
/// with its own markup, transport or token never changes the core.
pub fn the_core_names_no_platform(path: &str, text: &str) -> Vec<Violation> {
    if !path.starts_with("channels/core/") {
        return vec![];
    }
    platform_lines(path, text, CORE_PLATFORMS_ALLOWED, "the adapter kit")
}

/// Metadata keys a platform puts on a message; the manager reads none of them (the adapter
/// turns them into typed fields such as the redelivery key).
const PLATFORM_KEYS: &[&str] = &[
    "team_id",
    "guild_id",
    "aibotid",
    "conversation_id",
    "event_id",
    "msg_id",
    "message_id",
];

/// Whether `key` stands alone in `literal` (`"message_id"`, `"/metadata/msg_id"`, but not
/// `"message_thread_id"`).
fn has_key(literal: &str, key: &str) -> bool {
    literal.match_indices(key).any(|(at, _)| {
        let b = literal.as_bytes();
        let alone = |k: Option<&u8>| k.is_none_or(|&c| !(c.is_ascii_alphanumeric() || c == b'_'));
        alone(at.checked_sub(1).map(|k| &b[k])) && alone(b.get(at + key.len()))
    })
}

/// STYLE habit 3: the manager (`src/manager.rs`, `src/manager/`) names no platform (the
/// console included) and reads no platform metadata key as a string literal.
pub fn the_manager_is_generic(path: &str, text: &str) -> Vec<Violation> {
    if !(path == "src/manager.rs" || path.starts_with("src/manager/")) {
        return vec![];
    }
    let mut found = platform_lines(path, text, &[], "the manager");
    for literal in lexer::literals(&lexer::production(text)) {
        for key in PLATFORM_KEYS.iter().filter(|k| has_key(&literal.text, k)) {
            let what = format!("the manager reads the platform key {key:?}");
            found.push(violation(path, text, literal.offset, what));
        }
    }
    found
}

/// DeerFlow concepts, lowercased: the adapters speak only of chats, users and messages.
const DEERFLOW_TERMS: &[&str] = &[
    "threadid",
    "thread_id",
    "deerflow",
    "owner_user_id",
    "connection_id",
    "artifact",
    "/mnt/user-data",
    "assistant_id",
    "langgraph",
];

/// Words that contain a DeerFlow term and are not one: Telegram's forum-topic field.
/// Feishu's message field naming its topic thread is read by that name once, renamed.
const NOT_DEERFLOW: &[&str] = &["message_thread_id", "rename = \"thread_id\""];

/// Issue 12: production code under `channels/` (comments aside, literals kept) knows nothing
/// of DeerFlow.
pub fn channels_know_no_deerflow(path: &str, text: &str) -> Vec<Violation> {
    if !path.starts_with("channels/") {
        return vec![];
    }
    // ASCII lowercasing keeps every offset where it was in `text`.
    let mut code = code_and_literals(text).to_ascii_lowercase();
    for word in NOT_DEERFLOW {
        code = code.replace(word, &" ".repeat(word.len()));
    }
    DEERFLOW_TERMS
        .iter()
        .flat_map(|term| code.match_indices(term))
        .map(|(at, term)| {
            violation(
                path,
                text,
                at,
                format!("an adapter names the DeerFlow concept {term:?}"),
            )
        })
        .collect()
}

/// Where a sentence may legitimately appear in code: logs, error Display strings (for logs),
/// panics in setup code.
const ALLOWED_CONTEXTS: &[&str] = &[
    "tracing::",
    "#[error(",
    "panic!(",
    ".expect(",
    "debug_struct(",
    "writeln!(",
    "Error::",
    "Error {",
    // The wire fields a token answer lacked, for an `HttpError::Decode` reason.
    "token::issued(",
];

/// Sentence-like literals that no chat user reads: (file, how the literal starts; `""` for
/// every literal of a file that holds nothing else).
pub const SENTENCES_ALLOWED: &[(&str, &str)] = &[
    // Migrations: SQL (and its comments), spoken to the database. Queries elsewhere in the
    // store are recognised by `is_sql` instead.
    ("src/store/sqlite/schema.rs", ""),
    ("src/store/postgres/schema.rs", ""),
    // Why a store file cannot be opened: a `StoreError` reason, logged for the operator.
    (
        "src/store/sqlite/db.rs",
        "it is a SQLite database of another application",
    ),
    ("src/store/sqlite/db.rs", "unknown schema version "),
    (
        "src/store/sqlite/db.rs",
        "it is a directory; name a file inside it",
    ),
    ("src/store/sqlite/db.rs", "cannot switch to WAL "),
    ("src/store/sqlite/db.rs", "integrity check failed: "),
    // An adapter's configuration problems, printed by check-config for the operator (the
    // counterpart of `src/config*`, which this rule does not cover).
    ("channels/core/src/config.rs", ""),
    ("channels/core/src/config/webhook.rs", ""),
    ("channels/telegram/src/config.rs", ""),
    ("channels/feishu/src/config.rs", ""),
    ("channels/dingtalk/src/config.rs", ""),
    ("channels/qq/src/config.rs", ""),
    ("channels/discord/src/config.rs", ""),
    ("channels/slack/src/config.rs", ""),
    ("channels/wecom/src/config.rs", ""),
    ("channels/wechat/src/config.rs", ""),
    // `im-bridge doctor`'s lines and fix hints, printed for the operator who runs it (the
    // files hold nothing else).
    ("src/doctor.rs", ""),
    ("channels/core/src/doctor.rs", ""),
    ("channels/telegram/src/doctor.rs", ""),
    ("channels/feishu/src/doctor.rs", ""),
    ("channels/dingtalk/src/doctor.rs", ""),
    ("channels/qq/src/doctor.rs", ""),
    ("channels/discord/src/doctor.rs", ""),
    ("channels/slack/src/doctor.rs", ""),
    ("channels/wecom/src/doctor.rs", ""),
    ("channels/wechat/src/doctor.rs", ""),
    // Why the long connection could not be made or went down: reasons that are only
    // logged for the operator (the file holds no user-facing text).
    ("channels/feishu/src/transport/ws/endpoint.rs", ""),
    (
        "channels/feishu/src/transport/ws.rs",
        "sending a ping failed",
    ),
    (
        "channels/feishu/src/transport/ws.rs",
        "sending an ack failed",
    ),
    (
        "channels/feishu/src/transport/ws.rs",
        "the server did not answer a ping",
    ),
    ("channels/dingtalk/src/transport/ws/endpoint.rs", ""),
    // Slack's Socket Mode: why a connection went down, only logged (no user-facing text).
    ("channels/slack/src/transport/ws.rs", ""),
    (
        "channels/dingtalk/src/transport/ws.rs",
        "sending a keepalive ping failed",
    ),
    (
        "channels/dingtalk/src/transport/ws.rs",
        "the keepalive ping went unanswered",
    ),
    (
        "channels/dingtalk/src/transport/ws.rs",
        "sending an ack failed",
    ),
    // Why a WeCom command got no answer or the long connection went down: reasons that are
    // only logged for the operator (the files hold no user-facing text).
    ("channels/wecom/src/api.rs", ""),
    ("channels/wecom/src/transport/ws.rs", ""),
    // Why a message would not be accepted as WeCom renders it: for the tests and the fuzz
    // target only.
    ("channels/wecom/src/markup.rs", "a code block is left open"),
    // Wording a peer sends, matched to classify its errors: the Bot API's descriptions and
    // the Gateway's busy and compaction-disabled details.
    ("channels/telegram/src/error.rs", "message is not modified"),
    // Matched in Telegram's answer to recognize refused markup, never shown.
    ("channels/telegram/src/error.rs", "can't parse entities"),
    ("channels/telegram/src/error.rs", "entities too long"),
    (
        "channels/telegram/src/error.rs",
        "message to edit not found",
    ),
    ("channels/telegram/src/error.rs", "message can't be edited"),
    (
        "channels/telegram/src/error.rs",
        "message can not be edited",
    ),
    ("crates/gateway/src/error.rs", "already running a task"),
    ("crates/gateway/src/error.rs", "compaction is disabled"),
    // serde's "expected …" phrases, which end up in decode errors (logged).
    ("crates/gateway/src/message/decode.rs", "a content block"),
    ("crates/gateway/src/message/decode.rs", "a tool call"),
    (
        "crates/gateway/src/message/decode.rs",
        "tool call arguments",
    ),
    ("crates/gateway/src/message/decode.rs", "a message list"),
    ("crates/gateway/src/message/lenient.rs", "a field name"),
    ("crates/gateway/src/message/lenient.rs", "a list of strings"),
];

fn sentence_allowed(path: &str, literal: &str) -> bool {
    (path.starts_with("src/store") && is_sql(literal))
        || SENTENCES_ALLOWED
            .iter()
            .any(|(p, start)| *p == path && literal.starts_with(start))
}

/// A store literal that is a query, or a piece of one spliced around another with `concat!`
/// (the database's clock, `now_ms!()`; the dedupe admission's CTEs): its first word is an
/// SQL statement or clause keyword, or it opens by continuing an expression (`+`, `)`, `,`).
fn is_sql(literal: &str) -> bool {
    const STATEMENTS: &[&str] = &[
        "SELECT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "WITH",
        "CREATE",
        "ALTER",
        "DROP",
        "PRAGMA",
        "BEGIN",
        "COMMIT",
        "SAVEPOINT",
        "RELEASE",
        "ROLLBACK",
    ];
    const CLAUSES: &[&str] = &[
        "RETURNING",
        "WHERE",
        "ON",
        "ORDER",
        "FROM",
        "AND",
        "OR",
        "SET",
        "VALUES",
    ];
    let literal = literal.trim_start();
    let first = literal.split_whitespace().next().unwrap_or("");
    STATEMENTS.contains(&first) || CLAUSES.contains(&first) || literal.starts_with(['+', ')', ','])
}

/// Whether a literal reads like a sentence: three words or more made of letters with at most
/// trailing punctuation (not paths, headers or format specs).
fn is_sentence(literal: &str) -> bool {
    literal
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphabetic))
        .filter(|w| {
            w.chars()
                .all(|c| c.is_alphabetic() || ".,!?'’-:".contains(c))
        })
        .count()
        >= 3
}

/// Whether the user-facing sentence rule covers `path`: all of `src/` but the configuration
/// and `main.rs` (which talk to the operator) and `src/i18n` (which holds ids); all of
/// `channels/`; the Gateway client in `crates/gateway`, not the simulator (which plays the
/// agent: its text is agent output).
fn speaks_to_users(path: &str) -> bool {
    let operator_or_agent = ["crates/simulator/", "src/config", "src/main.rs", "src/i18n"];
    let covered = ["channels/", "src/", "crates/"];
    covered.iter().any(|p| path.starts_with(p))
        && !operator_or_agent.iter().any(|p| path.starts_with(p))
}

/// STYLE habit 11: every sentence a user can read lives in `locales/*.ftl`.
pub fn no_user_facing_sentence(path: &str, text: &str) -> Vec<Violation> {
    if !speaks_to_users(path) {
        return vec![];
    }
    lexer::literals(&lexer::production(text))
        .into_iter()
        .filter(|l| is_sentence(&l.text))
        .filter(|l| !ALLOWED_CONTEXTS.iter().any(|c| l.context.contains(c)))
        .filter(|l| !sentence_allowed(path, &l.text))
        .map(|l| {
            let what = format!("a sentence outside locales/*.ftl: {:?}", l.text);
            violation(path, text, l.offset, what)
        })
        .collect()
}

/// The most lines a production function may take, from its `fn` to its closing brace,
/// lines holding only a comment or nothing left out (issue 34).
pub const MAX_FUNCTION_LINES: usize = 100;

/// Production functions that may still be longer, each being split on another branch:
/// (file, function name). The liveness check (`allow_list_entries_are_live`) flags an
/// entry once its function is short or gone, and then the entry goes.
pub const LONG_FUNCTIONS_ALLOWED: &[(&str, &str)] = &[];

/// The Rust source a crate compiles into its library or binary: `src/` of the daemon and
/// `src/` of each crate under `crates/` and `channels/`.
fn in_crate_source(path: &str) -> bool {
    path.starts_with("src/")
        || ["crates/", "channels/"].iter().any(|dir| {
            path.strip_prefix(dir)
                .and_then(|p| p.split_once('/'))
                .is_some_and(|(_, rest)| rest.starts_with("src/"))
        })
}

/// Every function with a body in `text`'s production code: (name, line of its `fn`, lines
/// of code from its `fn` to its closing brace, blank and comment-only lines left out).
pub fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let production = lexer::production(text);
    let code = lexer::blank(&production, |k| k == Kind::Code);
    let counted = code_and_literals(text);
    lexer::functions(&code)
        .into_iter()
        .map(|f| {
            let lines = counted[f.range.clone()]
                .lines()
                .filter(|l| !l.trim().is_empty())
                .count();
            (f.name, lexer::line_of(text, f.range.start), lines)
        })
        .collect()
}

/// Issue 34: no production function over [`MAX_FUNCTION_LINES`] lines of code, outside
/// [`LONG_FUNCTIONS_ALLOWED`]; a long one reads as named steps instead.
pub fn no_long_function(path: &str, text: &str) -> Vec<Violation> {
    if !in_crate_source(path) {
        return vec![];
    }
    function_lengths(text)
        .into_iter()
        .filter(|(name, _, lines)| {
            *lines > MAX_FUNCTION_LINES
                && !LONG_FUNCTIONS_ALLOWED.contains(&(path, name.as_str()))
        })
        .map(|(name, line, lines)| Violation {
            path: path.to_owned(),
            line,
            what: format!(
                "`{name}` has {lines} lines of code (at most {MAX_FUNCTION_LINES}): split it into named steps"
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(found: Vec<Violation>) -> Vec<usize> {
        found.iter().map(|v| v.line).collect()
    }

    #[test]
    fn a_file_without_a_doc_fails() {
        assert_eq!(lines(file_doc("src/a.rs", "use x;\n//! Late.\n")), [1]);
        assert_eq!(
            lines(file_doc("src/a.rs", "/// Item doc.\nfn f() {}\n")),
            [1]
        );
        assert!(file_doc("src/a.rs", "\n//! What this is.\nuse x;\n").is_empty());
    }

    #[test]
    fn an_unbounded_channel_fails_outside_tests() {
        let bad = "//! Doc.\nfn f() {\n    let (tx, rx) = mpsc::unbounded_channel();\n}\n";
        assert_eq!(lines(bounded_channels("channels/x/src/a.rs", bad)), [3]);
        let fine = "// never unbounded_channel\n#[cfg(test)]\nmod tests { fn t() { unbounded_channel(); } }\nfn g() {}\n";
        assert!(bounded_channels("src/a.rs", fine).is_empty());
    }

    #[test]
    fn a_platform_named_in_src_fails_outside_the_registry() {
        let bad = "fn f() {\n    // Telegram is fine in a comment.\n    if name == \"telegram\" {}\n    let c = im_bridge_console::ConsoleChannel::stdio();\n    let k = \"qq:group\";\n}\n#[cfg(test)]\nmod tests { const P: &str = \"discord\"; }\n";
        assert_eq!(
            lines(only_the_registry_names_platforms("src/daemon.rs", bad)),
            [3, 4, 5]
        );
        assert!(only_the_registry_names_platforms("src/platforms.rs", bad).is_empty());
        assert!(only_the_registry_names_platforms("channels/x/src/lib.rs", bad).is_empty());
        // The Gateway client and the simulator are daemon-side crates.
        for krate in [
            "crates/gateway/src/client.rs",
            "crates/simulator/src/wire.rs",
        ] {
            assert_eq!(
                lines(only_the_registry_names_platforms(krate, bad)),
                [3, 4, 5]
            );
        }
        let words = "let faq = \"qqq\"; let lq = \"a qq b\";";
        assert_eq!(platforms_in(words), ["qq"]);
        assert!(platforms_in("let faq = \"qqq\";").is_empty());
    }

    #[test]
    fn the_core_naming_a_platform_fails() {
        let bad = "//! Feishu and Lark are fine in a doc.\nenum Markup {\n    TelegramHtml,\n    Plain,\n}\nconst HOST: &str = \"open.feishu.cn\";\n";
        assert_eq!(
            lines(the_core_names_no_platform(
                "channels/core/src/render.rs",
                bad
            )),
            [3, 6]
        );
        assert!(the_core_names_no_platform("channels/feishu/src/api.rs", bad).is_empty());
    }

    #[test]
    fn the_manager_naming_a_platform_or_reading_its_key_fails() {
        let bad = "fn f(m: &Msg) {\n    if m.channel == \"console\" {}\n    let id = m.metadata.get(\"message_id\");\n    let p = m.metadata.pointer(\"/event/team_id\");\n    let t = \"message_thread_id\";\n}\n";
        assert_eq!(
            lines(the_manager_is_generic("src/manager/turn.rs", bad)),
            [2, 3, 4]
        );
        assert_eq!(
            lines(the_manager_is_generic("src/manager.rs", bad)),
            [2, 3, 4]
        );
        assert!(the_manager_is_generic("src/daemon.rs", bad).is_empty());
        let fine = "fn f(key: &Key) { let id = key.message_id.clone(); } // \"msg_id\"\n";
        assert!(the_manager_is_generic("src/manager/dedupe.rs", fine).is_empty());
    }

    #[test]
    fn an_adapter_naming_a_deerflow_concept_fails() {
        let bad = "use im_bridge::gateway::ThreadId;\n// DeerFlow threads are fine in comments.\nconst K: &str = \"thread_id\";\nconst P: &str = \"/mnt/user-data/outputs\";\nstruct M { message_thread_id: i64 }\n";
        let found = channels_know_no_deerflow("channels/telegram/src/model.rs", bad);
        assert_eq!(lines(found), [1, 3, 4]);
        assert!(channels_know_no_deerflow("crates/gateway/src/lib.rs", bad).is_empty());
        let fine = "struct M { message_thread_id: Option<i64> }\n";
        assert!(channels_know_no_deerflow("channels/telegram/src/model.rs", fine).is_empty());
    }

    #[test]
    fn a_sentence_in_code_fails_where_users_read_it() {
        let bad = "fn f() -> &'static str {\n    tracing::info!(\"Logs may say things.\");\n    \"Hello there, dear user\"\n}\n";
        assert_eq!(lines(no_user_facing_sentence("src/daemon.rs", bad)), [3]);
        for user_facing in ["channels/x/src/outbound.rs", "crates/gateway/src/error.rs"] {
            assert_eq!(lines(no_user_facing_sentence(user_facing, bad)), [3]);
        }
        for operator in [
            "src/main.rs",
            "src/config/settings.rs",
            "crates/simulator/src/agent.rs",
        ] {
            assert!(
                no_user_facing_sentence(operator, bad).is_empty(),
                "{operator}"
            );
        }
        assert!(!is_sentence("application/json; charset=utf-8") && !is_sentence("{a} {b} {c}"));
        let sql = "fn f() { db.execute(\"DELETE FROM leases WHERE name = ?1\"); }";
        // A query is no sentence in the store, and a sentence anywhere else.
        assert!(no_user_facing_sentence("src/store/sqlite/worker.rs", sql).is_empty());
        assert_eq!(lines(no_user_facing_sentence("src/daemon.rs", sql)), [1]);
        // So are the pieces of one spliced around a macro.
        let spliced = "const Q: &str = concat!(\"UPDATE t SET a = \", now!(), \" + $2 WHERE id = $1 AND b > \", now!(), \") RETURNING id, the rest\");";
        assert!(no_user_facing_sentence("src/store/postgres.rs", spliced).is_empty());
        let prose = "fn f() -> &'static str { \"Deleted from the store, sorry\" }";
        assert_eq!(
            lines(no_user_facing_sentence("src/store/sqlite/db.rs", prose)),
            [1]
        );
    }

    #[test]
    fn a_long_production_function_fails() {
        let body = |n: usize| "    step();\n    // a comment\n\n".repeat(n);
        let text = format!(
            "fn short() {{\n{}}}\nfn long() {{\n{}}}\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{}    }}\n}}\n",
            body(98),
            body(99),
            body(200)
        );
        let found = no_long_function("src/x.rs", &text);
        let whats: Vec<&str> = found.iter().map(|v| v.what.as_str()).collect();
        assert_eq!(
            whats,
            ["`long` has 101 lines of code (at most 100): split it into named steps"]
        );
        assert_eq!(found[0].line, 2 + 3 * 98 + 1);
        assert!(no_long_function("tests/x.rs", &text).is_empty());
        assert!(no_long_function("channels/core/tests/x.rs", &text).is_empty());
        assert_eq!(no_long_function("crates/gateway/src/x.rs", &text).len(), 1);
    }
}
