//! Issue 29: every adapter crate has the one skeleton `docs/adapter-spec.md` describes,
//! and no loop between its top-level modules.
//!
//! Pure functions over what the walk read (the top of `src/`, whether the README and the
//! fixtures exist, each top-level module's production code), so each rule has a failing
//! snippet below.

use std::collections::{BTreeMap, BTreeSet};

use super::graph;
use super::rules::Violation;

/// Modules every adapter has at the top of `src/`.
pub const REQUIRED: &[&str] = &[
    "lib",
    "channel",
    "config",
    "api",
    "error",
    "model",
    "inbound",
    "transport",
    "doctor",
];

/// Modules an adapter may add: app tokens, its render dialect, the fuzz entry points.
pub const OPTIONAL: &[&str] = &["token", "markup", "fuzzing"];

/// Children of `transport/` that name how events arrive.
pub const TRANSPORTS: &[&str] = &["ws", "poll", "webhook"];

/// What the walk saw of one adapter crate `channels/<name>`.
pub struct Crate<'a> {
    /// The directory name.
    pub name: &'a str,
    /// The `.rs` files directly under `src/`, without the extension.
    pub top: BTreeSet<String>,
    /// The directories directly under `src/`.
    pub dirs: BTreeSet<String>,
    /// The `.rs` files directly under `src/transport/`, without the extension.
    pub transports: BTreeSet<String>,
    /// Whether `README.md` exists.
    pub readme: bool,
    /// How many files `tests/fixtures/` holds.
    pub fixtures: usize,
    /// Each top-level module (but `lib`) and the production code of its files.
    pub modules: BTreeMap<String, String>,
}

fn at(krate: &Crate<'_>, file: &str, what: String) -> Violation {
    Violation {
        path: format!("channels/{}/{file}", krate.name),
        line: 1,
        what,
    }
}

/// The skeleton: the required modules, nothing else at the top but the optional ones (a
/// directory only for a module's children), a transport, a README and fixtures.
pub fn skeleton(krate: &Crate<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for module in REQUIRED {
        if !krate.top.contains(*module) {
            found.push(at(krate, "src", format!("no `{module}.rs` (the skeleton)")));
        }
    }
    for module in &krate.top {
        if !REQUIRED.contains(&module.as_str()) && !OPTIONAL.contains(&module.as_str()) {
            let what = format!(
                "`{module}.rs` is not in the skeleton: make it a child of the module it serves"
            );
            found.push(at(krate, &format!("src/{module}.rs"), what));
        }
    }
    for dir in &krate.dirs {
        if !krate.top.contains(dir) {
            let what = format!("`{dir}/` holds the children of no `{dir}.rs`");
            found.push(at(krate, &format!("src/{dir}"), what));
        }
    }
    if !krate
        .transports
        .iter()
        .any(|t| TRANSPORTS.contains(&t.as_str()))
    {
        let what = format!("no transport: one of {TRANSPORTS:?} under `src/transport/`");
        found.push(at(krate, "src/transport", what));
    }
    if !krate.readme {
        found.push(at(krate, "README.md", "no README".into()));
    }
    if krate.fixtures == 0 {
        let what = "no recorded payloads for `model.rs` in `tests/fixtures/`".into();
        found.push(at(krate, "tests/fixtures", what));
    }
    found
}

/// Loops between top-level modules: each pair that reaches the other through `crate::`
/// references, once (the module graph of `graph`).
pub fn module_loops(krate: &Crate<'_>) -> Vec<Violation> {
    let graph: BTreeMap<String, BTreeSet<String>> = krate
        .modules
        .iter()
        .map(|(m, code)| {
            let mut named = graph::named_after(code, "crate::");
            named.retain(|n| n != m && krate.modules.contains_key(n));
            (m.clone(), named)
        })
        .collect();
    graph::loops(&graph)
        .into_iter()
        .map(|(a, b)| {
            let what = format!("`{a}` and `{b}` use each other (through `crate::`)");
            at(krate, &format!("src/{a}.rs"), what)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn good() -> Crate<'static> {
        let mut top = set(REQUIRED);
        top.insert("token".into());
        Crate {
            name: "x",
            top,
            dirs: set(&["transport", "api"]),
            transports: set(&["ws", "webhook"]),
            readme: true,
            fixtures: 3,
            modules: BTreeMap::from([
                ("api".into(), "use crate::token::Cache;\n".into()),
                ("token".into(), "use crate::{error::E, config};\n".into()),
                ("channel".into(), "use crate::api;\n".into()),
            ]),
        }
    }

    fn whats(found: &[Violation]) -> Vec<&str> {
        found.iter().map(|v| v.what.as_str()).collect()
    }

    #[test]
    fn the_skeleton_passes_and_each_gap_fails() {
        let ok = good();
        assert!(skeleton(&ok).is_empty(), "{:?}", whats(&skeleton(&ok)));
        let mut bad = good();
        bad.top.remove("model");
        bad.top.insert("frame".into());
        bad.dirs.insert("stream".into());
        bad.transports = set(&["endpoint"]);
        bad.readme = false;
        bad.fixtures = 0;
        let found = skeleton(&bad);
        assert_eq!(found.len(), 6, "{:?}", whats(&found));
        assert!(found[0].what.contains("`model.rs`"));
    }

    #[test]
    fn a_loop_between_modules_fails_once() {
        assert!(module_loops(&good()).is_empty());
        let mut bad = good();
        bad.modules
            .insert("token".into(), "let n = crate::api::MAX;\n".into());
        let found = module_loops(&bad);
        assert_eq!(
            whats(&found),
            ["`api` and `token` use each other (through `crate::`)"]
        );
        // Through a third module, and from a group.
        let mut bad = good();
        bad.modules
            .insert("error".into(), "use crate::{config, channel::X};\n".into());
        bad.modules
            .insert("token".into(), "use crate::{error::E};\n".into());
        let loops = module_loops(&bad);
        assert_eq!(loops.len(), 6, "{:?}", whats(&loops));
    }
}
