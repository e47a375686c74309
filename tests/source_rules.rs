//! Checks over the source tree that keep the architecture honest (STYLE.md, issue 12): file
//! docs, bounded channels, a manager that names no platform and reads no platform key,
//! platform names only in the registry, adapters that know nothing of DeerFlow, and no
//! user-facing sentence outside the Fluent catalogs; and over the documentation (issue
//! 28): no relative link in a Markdown file that leads nowhere.
//!
//! Children:
//! - `lexer`: code, comments and literals of a file; the file without its test items;
//! - `rules`: each rule as a function over (path, text), with a failing snippet per rule;
//! - `links`: the links of a Markdown file and the anchors of its headings, and which
//!   links are broken, with failing snippets;
//! - `skeleton`: the adapter skeleton and the loops between an adapter's modules (issue
//!   29), with failing snippets;
//! - `graph`: the module graph of a crate's source directory and its loops (issues 29 and
//!   34), with failing snippets.
//!
//! This file walks the tree, tells test code from production code, and runs each rule over
//! the files it concerns.

mod graph;
mod lexer;
mod links;
mod rules;
mod skeleton;

use std::path::{Path, PathBuf};

use rules::Violation;

/// One `.rs` file of the repository.
struct File {
    /// From the repository root, `/`-separated.
    path: String,
    text: String,
    /// Wholly test code: an integration test or bench, a file a `#[cfg(test)] mod` declares
    /// (or below one), or test support listed in [`TEST_SUPPORT`].
    test_only: bool,
}

/// Test support compiled into the library, hence not `#[cfg(test)]`. The store's
/// conformance body is `#[cfg(test)]` (issue 12, item 10); the renderer's and the
/// splitter's property checks are compiled for the tests and for the fuzz targets (cargo
/// features `fuzzing` and `test-support`, which the daemon never enables), and speak to
/// developers only; so do the strict Telegram HTML and Slack `mrkdwn` checkers, a
/// dialect's `check`, which only the tests and the fuzz targets call; and so does the
/// fixture round trip of wire types.
const TEST_SUPPORT: &[&str] = &[
    "channels/core/src/render/check.rs",
    "channels/core/src/render/conformance.rs",
    "channels/core/src/fixtures.rs",
    "channels/core/src/delivery/split/check.rs",
    "channels/telegram/src/markup/check.rs",
    "channels/slack/src/markup/check.rs",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Directories no walk enters: build output, git's own, installed packages, and what the
/// fuzzers grow (paths from the repository root, or any directory of that name).
const SKIPPED_DIRS: &[&str] = &[
    "target",
    ".git",
    "node_modules",
    "fuzz/corpus",
    "fuzz/artifacts",
];

/// Every file below `dir` whose extension is `ext`, outside [`SKIPPED_DIRS`].
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            let rel = path.strip_prefix(root()).unwrap_or(&path);
            let skipped = SKIPPED_DIRS
                .iter()
                .any(|s| rel == Path::new(s) || path.file_name().is_some_and(|n| n == *s));
            if !skipped {
                files(&path, ext, out);
            }
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// `path` from the repository root, `/`-separated.
fn relative(path: &Path) -> String {
    let rel = path.strip_prefix(root()).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

/// The directory holding the files of the modules `path` declares (`a/b.rs` → `a/b/`,
/// `a/lib.rs` → `a/`).
fn module_dir(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if ["lib.rs", "main.rs", "mod.rs"].contains(&name) {
        format!("{dir}/")
    } else {
        format!("{dir}/{}/", name.trim_end_matches(".rs"))
    }
}

/// Integration tests, benches and the fakes crate: `tests/…`, `benches/…` at the root or in
/// a crate under `channels/` or `crates/`.
fn in_test_crate_dir(path: &str) -> bool {
    let in_crate = path
        .strip_prefix("channels/")
        .or_else(|| path.strip_prefix("crates/"))
        .and_then(|p| p.split_once('/'));
    let rest = in_crate.map_or(path, |(_, rest)| rest);
    rest.starts_with("tests/") || rest.starts_with("benches/")
}

/// Every `.rs` file under `src/`, `crates/`, `channels/`, `tests/` and `benches/`, each
/// marked test-only or not.
fn tree() -> Vec<File> {
    let root = root();
    let mut paths = Vec::new();
    for dir in ["src", "crates", "channels", "tests", "benches"] {
        files(&root.join(dir), "rs", &mut paths);
    }
    paths.sort();
    let mut files: Vec<File> = paths
        .iter()
        .map(|p| {
            let path = relative(p);
            File {
                test_only: in_test_crate_dir(&path) || TEST_SUPPORT.contains(&path.as_str()),
                text: std::fs::read_to_string(p).unwrap(),
                path,
            }
        })
        .collect();
    // `#[cfg(test)] mod x` in a/b.rs makes a/b/x.rs and everything under a/b/x/ test code.
    let test_prefixes: Vec<(String, String)> = files
        .iter()
        .flat_map(|f| {
            let dir = module_dir(&f.path);
            lexer::test_modules(&f.text)
                .into_iter()
                .map(move |m| (format!("{dir}{m}.rs"), format!("{dir}{m}/")))
        })
        .collect();
    for file in &mut files {
        file.test_only |= test_prefixes
            .iter()
            .any(|(rs, dir)| file.path == *rs || file.path.starts_with(dir.as_str()));
    }
    files
}

/// Runs `rule` over the production files and fails with every violation.
fn check(rule: fn(&str, &str) -> Vec<Violation>) {
    let found: Vec<String> = tree()
        .iter()
        .filter(|f| !f.test_only)
        .flat_map(|f| rule(&f.path, &f.text))
        .map(|v| v.to_string())
        .collect();
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

#[test]
fn every_rust_file_opens_with_a_doc() {
    let files = tree();
    assert!(files.len() > 40);
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| rules::file_doc(&f.path, &f.text))
        .map(|v| v.to_string())
        .collect();
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

#[test]
fn channels_are_bounded() {
    check(rules::bounded_channels);
}

#[test]
fn only_the_registry_names_platforms() {
    check(rules::only_the_registry_names_platforms);
}

#[test]
fn the_core_names_no_platform() {
    check(rules::the_core_names_no_platform);
}

#[test]
fn the_manager_names_no_platform_and_reads_no_platform_key() {
    check(rules::the_manager_is_generic);
}

#[test]
fn channels_know_nothing_of_deerflow() {
    check(rules::channels_know_no_deerflow);
}

#[test]
fn no_user_facing_sentence_outside_the_catalogs() {
    check(rules::no_user_facing_sentence);
}

#[test]
fn no_production_function_over_100_lines() {
    check(rules::no_long_function);
}

/// The adapter crates under `channels/`: all but the kit (`core`) and the console, which
/// has no platform API to hold a client, a model or a transport for.
fn adapter_crates() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("channels"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "core" && n != "console")
        .collect();
    names.sort();
    names
}

/// The names (without `.rs`) of the files, or the directories, directly in `dir`.
fn entries(dir: &Path, dirs: bool) -> std::collections::BTreeSet<String> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Default::default();
    };
    read.flatten()
        .filter(|e| e.path().is_dir() == dirs)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if dirs {
                Some(name)
            } else {
                name.strip_suffix(".rs").map(str::to_owned)
            }
        })
        .collect()
}

/// Issue 29: each adapter crate has the skeleton (`docs/adapter-spec.md`), a README and
/// fixtures, and its top-level modules use each other without a loop.
#[test]
fn adapters_follow_the_skeleton_without_module_loops() {
    let files = tree();
    let crates = adapter_crates();
    assert!(crates.len() >= 5, "{crates:?}");
    let mut found = Vec::new();
    for name in &crates {
        let src = root().join("channels").join(name).join("src");
        let top = entries(&src, false);
        let mut modules = std::collections::BTreeMap::new();
        for module in top.iter().filter(|m| *m != "lib") {
            let file = format!("channels/{name}/src/{module}.rs");
            let dir = format!("channels/{name}/src/{module}/");
            let code: String = files
                .iter()
                .filter(|f| !f.test_only && (f.path == file || f.path.starts_with(&dir)))
                .map(|f| lexer::blank(&lexer::production(&f.text), |k| k == lexer::Kind::Code))
                .collect();
            modules.insert(module.clone(), code);
        }
        let fixtures =
            std::fs::read_dir(src.join("../tests/fixtures")).map_or(0, |d| d.flatten().count());
        let krate = skeleton::Crate {
            name,
            dirs: entries(&src, true),
            transports: entries(&src.join("transport"), false),
            readme: src.join("../README.md").is_file(),
            fixtures,
            modules,
            top,
        };
        found.extend(skeleton::skeleton(&krate));
        found.extend(skeleton::module_loops(&krate));
    }
    let found: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

/// The source directories of the daemon and of the crates it is split into: `src/` and each
/// `crates/<name>/src/` (none while `crates/` does not exist).
fn crate_roots() -> Vec<String> {
    let mut roots = vec!["src/".to_owned()];
    let crates = std::fs::read_dir(root().join("crates"));
    let mut names: Vec<String> = crates
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("src").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    roots.extend(names.iter().map(|n| format!("crates/{n}/src/")));
    roots
}

/// The loops among sibling modules in every directory of [`crate_roots`], production code
/// only, by directory.
fn daemon_module_loops() -> std::collections::BTreeMap<String, Vec<(String, String)>> {
    let files = tree();
    let codes: Vec<(&str, String)> = files
        .iter()
        .filter(|f| !f.test_only)
        .map(|f| {
            let code = lexer::blank(&lexer::production(&f.text), |k| k == lexer::Kind::Code);
            (f.path.as_str(), code)
        })
        .collect();
    let sources: Vec<graph::Source<'_>> = codes
        .iter()
        .map(|(path, code)| graph::Source { path, code })
        .collect();
    crate_roots()
        .iter()
        .flat_map(|root| graph::loops_below(root, &sources))
        .collect()
}

/// Issue 34: no module of the daemon (`src/`, and `crates/*/src/`) reaches back to itself
/// through its siblings, at the top or inside a module directory; [`graph::LOOPS_ALLOWED`]
/// lists the directories being untangled on another branch.
#[test]
fn no_module_loop_in_the_daemon_or_its_crates() {
    let found: Vec<String> = daemon_module_loops()
        .into_iter()
        .filter(|(dir, _)| !graph::LOOPS_ALLOWED.iter().any(|(d, _)| d == dir))
        .flat_map(|(dir, pairs)| {
            pairs
                .into_iter()
                .map(move |(a, b)| format!("{dir}: `{a}` and `{b}` use each other"))
        })
        .collect();
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

/// Every relative link and image in the repository's Markdown files (README, `docs/`, the
/// crate READMEs, …) names a file or directory that exists, and every `#fragment` into a
/// Markdown file one of its headings; all broken links are reported at once.
#[test]
fn markdown_links_resolve() {
    let root = root();
    let mut paths = Vec::new();
    files(&root, "md", &mut paths);
    paths.sort();
    assert!(paths.len() > 20, "{} Markdown files", paths.len());
    let lookup = |path: &str| {
        let full = root.join(path);
        if full.is_dir() {
            links::Target::Other
        } else if full.extension().is_some_and(|e| e == "md") {
            std::fs::read_to_string(&full).map_or(links::Target::Missing, links::Target::Markdown)
        } else if full.is_file() {
            links::Target::Other
        } else {
            links::Target::Missing
        }
    };
    let found: Vec<String> = paths
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            links::broken_links(&relative(p), &text, &lookup)
        })
        .map(|v| v.to_string())
        .collect();
    assert!(found.is_empty(), "broken links:\n{}", found.join("\n"));
}

/// The split between test and production code on files whose shape the stripper must get
/// right (so a rule cannot pass by skipping code it should read).
#[test]
fn test_code_is_told_from_production_code() {
    let files = tree();
    let file = |path: &str| files.iter().find(|f| f.path == path).unwrap();
    for test_only in [
        "src/store/sqlite/tests.rs",
        "crates/gateway/src/tests.rs",
        "crates/gateway/src/tests/transport.rs",
        "channels/core/src/delivery/recorder.rs",
        "channels/core/src/delivery/split/tests.rs",
        "channels/core/src/webhook/tests/kit.rs",
        "channels/telegram/tests/transport.rs",
        "tests/fakes/src/telegram.rs",
    ] {
        assert!(file(test_only).test_only, "{test_only} is test code");
    }
    // Production code after a `#[cfg(test)] mod x;` line, a `#[cfg(test)]` helper or
    // statement is kept (every occurrence), and only the test item goes.
    for (path, kept, gone) in [
        ("src/store/sqlite.rs", "mod worker;", "mod tests;"),
        (
            "channels/core/src/delivery.rs",
            "mod throttle;",
            "mod recorder;",
        ),
        (
            "channels/core/src/delivery/throttle.rs",
            "fn lock(&self)",
            "fn tracked(",
        ),
        (
            "crates/gateway/src/runs/stream.rs",
            "RunEvent::from_frame(&frame)",
            "OFFLOADED.fetch_add",
        ),
    ] {
        let f = file(path);
        assert!(!f.test_only, "{path} is production code");
        let prod = lexer::production(&f.text);
        assert_eq!(
            prod.matches(kept).count(),
            f.text.matches(kept).count(),
            "{path}: {kept}"
        );
        assert!(
            f.text.contains(gone) && !prod.contains(gone),
            "{path}: {gone}"
        );
        assert_eq!(
            prod.lines().count(),
            f.text.lines().count(),
            "{path} keeps its lines"
        );
    }
}

/// Every allow-list entry still matches production code, so none outlives its offender.
#[test]
fn allow_list_entries_are_live() {
    let files = tree();
    let production = |path: &str| {
        let f = files.iter().find(|f| f.path == path && !f.test_only);
        f.map(|f| lexer::production(&f.text)).unwrap_or_default()
    };
    for (path, line) in rules::PLATFORMS_ALLOWED {
        assert!(production(path).contains(line), "stale: {path}: {line}");
    }
    for (path, start) in rules::SENTENCES_ALLOWED {
        let found = lexer::literals(&production(path))
            .into_iter()
            .any(|l| l.text.starts_with(start));
        assert!(found, "stale: {path}: {start:?}");
    }
    for path in TEST_SUPPORT {
        assert!(files.iter().any(|f| f.path == *path), "stale: {path}");
    }
    for (path, name) in rules::LONG_FUNCTIONS_ALLOWED {
        let long = rules::function_lengths(&production(path))
            .into_iter()
            .any(|(n, _, lines)| n == *name && lines > rules::MAX_FUNCTION_LINES);
        assert!(long, "stale: {path}: `{name}` is no longer over the limit");
    }
    let loops = daemon_module_loops();
    for (dir, _) in graph::LOOPS_ALLOWED {
        assert!(loops.contains_key(*dir), "stale: {dir} has no module loop");
    }
}
