//! The module graph of a crate's source directory (issues 29 and 34): which sibling modules
//! each module names, and the pairs of modules that reach each other (a loop).
//!
//! Siblings are the modules one directory declares: the top of `src/` (`src/a.rs`,
//! `src/b.rs`, with everything below `src/a/` counted as `a`'s code), and again inside
//! each module directory (`src/a/x.rs`, `src/a/y.rs`). A module names a sibling through
//! the directory's absolute path (`crate::a::y`) or through as many `super::` as the file
//! stands below the directory (`super::y` from `src/a/x.rs`, `super::super::y` from
//! `src/a/x/z.rs`), in a path or a `{…}` group. A child naming its parent's items is not
//! an edge, unless the parent re-exports the item from a sibling (`pub use x::Thing;` in
//! the parent: naming `Thing` there names `x`). The caller hands in production code only
//! (comments and literals blanked, `#[cfg(test)]` items and test files left out), so tests
//! never make a loop.
//!
//! The adapter skeleton's rule (`skeleton`) and the daemon's rule (`source_rules.rs`) share
//! [`named_after`] and [`loops`].

use std::collections::{BTreeMap, BTreeSet};

/// Whether the path at `at` starts there: neither an identifier nor a `::` runs into it
/// (so `super::super::x` is one path, not also a `super::x`).
fn starts_path(code: &str, at: usize) -> bool {
    let before = &code[..at];
    let in_word = before.ends_with(|c: char| c.is_alphanumeric() || c == '_');
    !(in_word || before.trim_end().ends_with("::"))
}

/// The identifier at the start of `text` (after blanks).
fn first_word(text: &str) -> &str {
    let text = text.trim_start();
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The items of the group opening `text` (after its `{`), split at its top-level commas,
/// up to the matching `}`.
fn group_items(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&text[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// The first segment of every path `code` writes after `prefix` (such as `crate::`,
/// `crate::manager::` or `super::super::`) where that prefix starts the path: `prefix a::b`
/// names `a`, `prefix{a, b::{c, d}}` names `a` and `b`.
pub fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        if !starts_path(code, at) {
            continue;
        }
        let rest = code[at + prefix.len()..].trim_start();
        let words = match rest.strip_prefix('{') {
            Some(group) => group_items(group).into_iter().map(first_word).collect(),
            None => vec![first_word(rest)],
        };
        found.extend(
            words
                .into_iter()
                .filter(|w| !w.is_empty())
                .map(str::to_owned),
        );
    }
    found
}

/// The pairs of modules that reach each other through `graph` (module → the siblings it
/// names), each once, the smaller name first.
pub fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<(String, String)> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<String>> =
        graph.keys().map(|m| (m.as_str(), reach(m))).collect();
    let mut found = Vec::new();
    for (a, from_a) in &reached {
        for b in from_a {
            let back = reached.get(b.as_str()).is_some_and(|r| r.contains(*a));
            if *a < b.as_str() && back {
                found.push(((*a).to_owned(), b.clone()));
            }
        }
    }
    found
}

/// Module directories that may keep their loop for now, each with its reason; the liveness
/// check (`allow_list_entries_are_live`) flags each entry once its directory has no loop (or
/// is gone), and then it goes. None: the Gateway client's and the simulator's loops were
/// untangled when they became crates of their own (issue 34).
pub const LOOPS_ALLOWED: &[(&str, &str)] = &[];

/// One production file of a crate: its path from the repository root and its code
/// (comments, literals and test items blanked).
pub struct Source<'a> {
    /// From the repository root, `/`-separated.
    pub path: &'a str,
    /// The code only.
    pub code: &'a str,
}

/// One directory's modules, each with its files: how far below the directory each stands,
/// and its code.
type Modules<'a> = BTreeMap<String, Vec<(usize, &'a str)>>;

/// Every loop among sibling modules below `root` (a crate's source directory, such as
/// `src/` or `crates/gateway/src/`), by directory (from the repository root, ending in
/// `/`). `lib.rs` and `main.rs` declare the top-level modules and are none of them.
pub fn loops_below(root: &str, files: &[Source<'_>]) -> BTreeMap<String, Vec<(String, String)>> {
    let mut dirs: BTreeMap<String, Modules<'_>> = BTreeMap::new();
    for file in files {
        let Some(rel) = file.path.strip_prefix(root) else {
            continue;
        };
        let parts: Vec<&str> = rel.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            let module = part.trim_end_matches(".rs");
            if i == 0 && (module == "lib" || module == "main") {
                continue;
            }
            let dir = format!(
                "{root}{}",
                parts[..i]
                    .iter()
                    .map(|p| format!("{p}/"))
                    .collect::<String>()
            );
            let depth = parts.len() - 1 - i;
            dirs.entry(dir)
                .or_default()
                .entry(module.to_owned())
                .or_default()
                .push((depth, file.code));
        }
    }
    let mut found = BTreeMap::new();
    for (dir, modules) in &dirs {
        let absolute = format!("crate::{}", dir[root.len()..].replace('/', "::"));
        let names: BTreeSet<&String> = modules.keys().collect();
        let parent = parent_code(root, dir, files);
        let reexported = parent
            .map(|code| reexports(code, &names))
            .unwrap_or_default();
        let graph: BTreeMap<String, BTreeSet<String>> = modules
            .iter()
            .map(|(module, codes)| {
                let mut named = BTreeSet::new();
                for (depth, code) in codes {
                    named.extend(named_after(code, &absolute));
                    named.extend(named_after(code, &"super::".repeat(depth + 1)));
                }
                // An item the parent re-exports from a sibling names that sibling.
                let through: Vec<String> = named
                    .iter()
                    .filter_map(|n| reexported.get(n).cloned())
                    .collect();
                named.extend(through);
                named.retain(|n| n != module && names.contains(n));
                (module.clone(), named)
            })
            .collect();
        let pairs = loops(&graph);
        if !pairs.is_empty() {
            found.insert(dir.clone(), pairs);
        }
    }
    found
}

/// The code of the file that declares `dir`'s modules: `lib.rs` (else `main.rs`) for the
/// crate's root, `src/m.rs` for `src/m/`.
fn parent_code<'a>(root: &str, dir: &str, files: &[Source<'a>]) -> Option<&'a str> {
    let wanted: Vec<String> = if dir == root {
        vec![format!("{root}lib.rs"), format!("{root}main.rs")]
    } else {
        vec![format!("{}.rs", dir.trim_end_matches('/'))]
    };
    wanted
        .iter()
        .find_map(|w| files.iter().find(|f| f.path == w.as_str()))
        .map(|f| f.code)
}

/// The names `code` (a parent module) re-exports from one of its child modules `modules`:
/// `pub use goal::{ThreadState, Goal as G};` maps `ThreadState` and `G` to `goal`, so a
/// sibling writing `crate::ThreadState` names `goal` as surely as `crate::goal::…` would.
fn reexports(code: &str, modules: &BTreeSet<&String>) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for (at, _) in code.match_indices("use ") {
        if !starts_path(code, at) {
            continue;
        }
        let rest = &code[at + 4..];
        let statement = &rest[..rest.find(';').unwrap_or(rest.len())];
        let path = statement.trim_start().trim_start_matches("self::");
        let module = first_word(path);
        if !modules.iter().any(|m| m.as_str() == module) {
            continue;
        }
        for leaf in leaves(path) {
            found.insert(leaf, module.to_owned());
        }
    }
    found
}

/// The names a `use` path brings in: its last segment (or its `as` name), through groups.
fn leaves(path: &str) -> Vec<String> {
    let path = path.trim();
    if let Some(open) = path.find('{') {
        let inner = &path[open + 1..];
        return group_items(inner).into_iter().flat_map(leaves).collect();
    }
    let name = match path.split_once(" as ") {
        Some((_, alias)) => alias.trim(),
        None => path.rsplit("::").next().unwrap_or(path).trim(),
    };
    if name.is_empty() || name == "*" || name == "self" {
        vec![]
    } else {
        vec![name.to_owned()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sources of (path, code) pairs.
    fn sources<'a>(files: &'a [(&'a str, &'a str)]) -> Vec<Source<'a>> {
        files
            .iter()
            .map(|&(path, code)| Source { path, code })
            .collect()
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn paths_and_groups_name_their_first_segment() {
        let code = "use crate::{a::{x, y}, b, self};\nlet n = crate::c::MAX; $crate::d!();\nfoo::crate::e; super::super::f; super::g;";
        assert_eq!(
            named_after(code, "crate::"),
            set(&["a", "b", "c", "d", "self"])
        );
        assert_eq!(named_after(code, "super::"), set(&["super", "g"]));
        assert_eq!(named_after(code, "super::super::"), set(&["f"]));
    }

    #[test]
    fn a_loop_is_each_pair_that_reaches_the_other() {
        let graph = BTreeMap::from([
            ("a".to_owned(), set(&["b"])),
            ("b".to_owned(), set(&["c"])),
            ("c".to_owned(), set(&["a", "d"])),
            ("d".to_owned(), set(&[])),
        ]);
        let pairs = loops(&graph);
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(pairs, [("a", "b"), ("a", "c"), ("b", "c")]);
    }

    #[test]
    fn loops_are_found_at_the_top_and_inside_module_directories() {
        let files = [
            // The top: `m` reaches `a` from a grandchild, `a` reaches `m`.
            ("src/lib.rs", "pub mod a; pub mod m; use crate::a;"),
            ("src/a.rs", "use crate::m::x::Thing;"),
            ("src/m.rs", "mod x; mod y; pub use x::Thing;"),
            ("src/m/x.rs", "use super::y::f; pub struct Thing;"),
            (
                "src/m/y.rs",
                "use crate::m::x::Thing; use super::Thing as T;",
            ),
            ("src/m/y/z.rs", "fn g() { super::super::super::a::h(); }"),
            // A child naming its parent's items, and a parent its children: no loop.
            ("src/ok.rs", "mod k; pub struct P;"),
            ("src/ok/k.rs", "use super::P; use crate::ok::P as Q;"),
        ];
        let found = loops_below("src/", &sources(&files));
        let found: Vec<(&str, Vec<(&str, &str)>)> = found
            .iter()
            .map(|(dir, pairs)| {
                let pairs = pairs
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                (dir.as_str(), pairs)
            })
            .collect();
        assert_eq!(
            found,
            [("src/", vec![("a", "m")]), ("src/m/", vec![("x", "y")])]
        );
        // A loop through an item the crate root re-exports is a loop too.
        let files = [
            (
                "src/lib.rs",
                "mod c; mod g; pub use g::{State, Other as O};",
            ),
            ("src/c.rs", "use crate::State;"),
            ("src/g.rs", "use crate::c::Client;"),
        ];
        let found = loops_below("src/", &sources(&files));
        assert_eq!(
            found.get("src/"),
            Some(&vec![("c".to_owned(), "g".to_owned())])
        );
        // Another crate's root is its own: `crate::` there names its modules.
        let other = [
            Source {
                path: "crates/g/src/lib.rs",
                code: "mod p; mod q;",
            },
            Source {
                path: "crates/g/src/p.rs",
                code: "use crate::q;",
            },
            Source {
                path: "crates/g/src/q.rs",
                code: "use crate::p;",
            },
            Source {
                path: "src/p.rs",
                code: "use crate::q;",
            },
        ];
        let found = loops_below("crates/g/src/", &other);
        assert_eq!(found.keys().collect::<Vec<_>>(), ["crates/g/src/"]);
    }
}
