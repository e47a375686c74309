//! Checks over the source tree that keep the architecture honest (STYLE.md): file docs,
//! bounded channels, a manager that names no platform, and no user-facing sentence outside
//! the Fluent catalogs.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "target" || n == ".git")
            {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn files_under(parts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for part in parts {
        let path = root().join(part);
        if path.is_file() {
            out.push(path);
        } else {
            rust_files(&path, &mut out);
        }
    }
    out.sort();
    out
}

/// The file without its `#[cfg(test)]` tail (unit tests sit at the bottom of each file).
fn production_part(text: &str) -> &str {
    match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// String literals of `code`, with the code before each (same statement), skipping comments
/// and char literals. Handles escapes and raw strings.
fn literals(code: &str) -> Vec<(String, String)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut statement_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b';' | b'}' => {
                statement_start = i + 1;
                i += 1;
            }
            b'\'' => {
                // A char literal ('"', '\'', 'x') or a lifetime ('a): skip what is safe.
                if bytes.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else if bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'') {
                    i += 4;
                } else {
                    i += 1;
                }
            }
            b'r' if (bytes.get(i + 1) == Some(&b'"') || bytes.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while bytes.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if bytes.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let body_start = j + 1;
                let end = code[body_start..]
                    .find(&close)
                    .map_or(code.len(), |e| body_start + e);
                out.push((
                    code[statement_start..i].to_owned(),
                    code[body_start..end].to_owned(),
                ));
                i = end + close.len();
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < bytes.len() && bytes[j] != b'"' {
                    if bytes[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                out.push((
                    code[statement_start..i].to_owned(),
                    code[start..j.min(code.len())].to_owned(),
                ));
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

#[test]
fn every_rust_file_opens_with_a_doc() {
    let files = files_under(&["src", "channels", "tests", "benches"]);
    assert!(files.len() > 40);
    let missing: Vec<_> = files
        .iter()
        .filter(|f| {
            !std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .any(|l| l.starts_with("//!"))
        })
        .collect();
    assert!(missing.is_empty(), "files without a //! doc: {missing:?}");
}

#[test]
fn channels_are_bounded() {
    for file in files_under(&["src", "channels", "benches"]) {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !production_part(&text).contains("unbounded_channel"),
            "{} uses an unbounded channel",
            file.display()
        );
    }
}

#[test]
fn the_manager_names_no_platform() {
    let platforms = [
        "telegram", "feishu", "lark", "dingtalk", "discord", "wechat", "wecom", "slack", "\"qq\"",
    ];
    for file in files_under(&["src/manager.rs", "src/manager"]) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in production_part(&text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("").to_lowercase();
            for p in platforms {
                assert!(
                    !code.contains(p),
                    "{}:{}: the manager names a platform: {line}",
                    file.display(),
                    n + 1
                );
            }
        }
    }
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
];

#[test]
fn no_user_facing_sentence_outside_the_catalogs() {
    // The simulator plays the agent (its text is agent output); config, main and i18n talk
    // to the operator, not to chat users.
    let files = files_under(&[
        "src/manager.rs",
        "src/manager",
        "src/bus.rs",
        "src/daemon.rs",
        "src/admin.rs",
        "channels",
    ]);
    let mut offenders = Vec::new();
    for file in files {
        // Tests, and config/error modules, which speak to the operator.
        let skip = file.components().any(|c| c.as_os_str() == "tests")
            || file
                .file_name()
                .is_some_and(|n| n == "tests.rs" || n == "config.rs" || n == "error.rs");
        if skip {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (context, literal) in literals(production_part(&text)) {
            // Sentence-like words: letters with at most trailing punctuation (not paths,
            // headers or format specs).
            let words = literal
                .split_whitespace()
                .filter(|w| w.chars().any(char::is_alphabetic))
                .filter(|w| {
                    w.chars()
                        .all(|c| c.is_alphabetic() || ".,!?'’-:".contains(c))
                })
                .count();
            if words < 3 || ALLOWED_CONTEXTS.iter().any(|c| context.contains(c)) {
                continue;
            }
            offenders.push(format!("{}: {literal:?}", file.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "sentences outside locales/*.ftl:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_literal_scanner_finds_what_it_should() {
    let code = r##"
        fn f() { tracing::warn!(%e, "Logged in a span."); }
        fn g() -> &'static str { "Hello there, dear user" }
        // "a comment with many words"
        const C: char = '"'; let raw = r#"a raw string with words"#;
    "##;
    let found: Vec<String> = literals(code).into_iter().map(|(_, l)| l).collect();
    assert_eq!(
        found,
        [
            "Logged in a span.",
            "Hello there, dear user",
            "a raw string with words"
        ]
    );
    let ctx = literals(code).into_iter().next().unwrap().0;
    assert!(ctx.contains("tracing::"));
}
