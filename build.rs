//! Build script of the `im-bridge` package: records which commit the binary was built from,
//! so `im-bridge --version` can name it (an operator's bug report then says exactly what
//! runs).
//!
//! The commit is, in this order: `git rev-parse --short=12 HEAD` run in the package's own
//! directory; else the `IM_BRIDGE_COMMIT` environment variable (the container build passes
//! it as a build argument, since `.git` is not in the build context); else `unknown`. It
//! never fails the build: a source tarball without git, or a machine without the `git`
//! program, builds all the same.
//!
//! Cargo reruns this script when `HEAD` moves (a checkout, a commit on the current branch)
//! or `IM_BRIDGE_COMMIT` changes, and not otherwise, so it costs nothing on ordinary
//! rebuilds.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `--version` says when nothing names the commit.
const UNKNOWN: &str = "unknown";

fn main() {
    println!("cargo:rerun-if-env-changed=IM_BRIDGE_COMMIT");
    let dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let commit = git(&dir, &["rev-parse", "--short=12", "HEAD"])
        .filter(|c| is_commit(c))
        .inspect(|_| watch_head(&dir))
        .or_else(|| {
            std::env::var("IM_BRIDGE_COMMIT")
                .ok()
                .map(|c| c.trim().to_owned())
                .filter(|c| is_commit(c))
        })
        .unwrap_or_else(|| UNKNOWN.to_owned());
    println!("cargo:rustc-env=IM_BRIDGE_COMMIT={commit}");
}

/// Runs git in `dir`; `None` when git is missing, fails, or prints nothing.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// An abbreviated or full commit id: 7 to 64 hex digits (SHA-1 or SHA-256 repositories).
fn is_commit(text: &str) -> bool {
    (7..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Asks Cargo to rerun this script when `HEAD` or the branch it points to moves. Paths come
/// from `git rev-parse --git-path`, which also resolves a linked worktree (whose `HEAD` lives
/// in its own directory and whose refs live in the main repository). Only existing files are
/// named: Cargo treats a missing one as always changed.
fn watch_head(dir: &Path) {
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        let Some(path) = git(dir, &["rev-parse", "--git-path", &name]) else {
            continue;
        };
        let path = if Path::new(&path).is_absolute() {
            PathBuf::from(path)
        } else {
            dir.join(path)
        };
        if path.is_file() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
