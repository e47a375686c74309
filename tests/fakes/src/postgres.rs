//! The PostgreSQL server tests use (issue 28), once per test process:
//!
//! 1. `IM_BRIDGE_TEST_POSTGRES` when it is set (a `postgres://` URL whose role may create
//!    schemas);
//! 2. otherwise a throwaway cluster of its own, made from the machine's PostgreSQL binaries:
//!    `initdb` into a temporary directory, `postgres` on a free loopback port (TCP only, no
//!    socket file, fsync off), trust authentication for `postgres`. It is stopped and its
//!    directory deleted when the test process exits, however it exits: a small shell
//!    keeps the server and waits on a pipe only this process holds. Run as root (a
//!    container), the cluster belongs to the `postgres` user, or `nobody`, since PostgreSQL
//!    refuses to run as root;
//! 3. no server: [`url`] is `None` after [`prereq::missing`](crate::prereq::missing) said
//!    so (or, under `IM_BRIDGE_TEST_STRICT`, failed the test).
//!
//! Tests share the server and keep apart by working in a schema of their own.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The variable naming a server to use instead of a throwaway cluster.
pub const URL_ENV: &str = "IM_BRIDGE_TEST_POSTGRES";

/// How long a new cluster may take to accept connections.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// Keeps the server: its URL and the shell that stops it once this process is gone.
struct Server {
    url: String,
    /// Holds the write end of the shell's stdin; never dropped before the process exits.
    _keeper: Option<Child>,
}

/// The test server's URL, or `None` (said once) when this machine has no PostgreSQL.
pub fn url() -> Option<&'static str> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            if let Ok(url) = std::env::var(URL_ENV) {
                return Some(Server { url, _keeper: None });
            }
            match start() {
                Ok(server) => Some(server),
                Err(why) => {
                    crate::prereq::missing("PostgreSQL", &why);
                    None
                }
            }
        })
        .as_ref()
        .map(|server| server.url.as_str())
}

/// Stops the server and removes `$dir` once stdin reaches its end, which happens when the
/// test process (the only writer) exits.
const KEEPER: &str = r#"dir=$1; shift
"$@" >"$dir/postgres.log" 2>&1 &
pid=$!
cat >/dev/null
kill -INT "$pid" 2>/dev/null
wait "$pid"
rm -rf "$dir""#;

fn start() -> Result<Server, String> {
    let bin = bindir().ok_or_else(|| {
        format!(
            "no PostgreSQL server binaries (initdb, postgres) found; install PostgreSQL or set \
             {URL_ENV} to a server's URL"
        )
    })?;
    let dir = std::env::temp_dir().join(format!(
        "im-bridge-test-pg-{}-{:08x}",
        std::process::id(),
        rand_u32()
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let run_as = match owner(&dir)? {
        Some((uid, gid)) => vec![
            "setpriv".to_owned(),
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".to_owned(),
        ],
        None => Vec::new(),
    };
    let data = dir.join("data");
    let init = command(&run_as, &bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"])
        .arg("--no-sync")
        .output()
        .map_err(|e| format!("running initdb: {e}"))?;
    if !init.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&init.stderr).trim()
        ));
    }
    let port = free_port()?;
    let mut keeper = Command::new("sh");
    keeper.arg("-c").arg(KEEPER).arg("sh").arg(&dir);
    keeper
        .args(&run_as)
        .arg(bin.join("postgres"))
        .arg("-D")
        .arg(&data);
    keeper.args(["-p", &port.to_string()]);
    for setting in [
        "listen_addresses=127.0.0.1",
        "unix_socket_directories=",
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
        "max_connections=300",
    ] {
        keeper.args(["-c", setting]);
    }
    let mut keeper = keeper
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting postgres: {e}"))?;
    let until = Instant::now() + START_DEADLINE;
    loop {
        let ready = Command::new(bin.join("pg_isready"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-p",
                &port.to_string(),
            ])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            break;
        }
        let log = || std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default();
        if let Ok(Some(status)) = keeper.try_wait() {
            return Err(format!("postgres exited ({status}): {}", log().trim()));
        }
        if Instant::now() > until {
            let _ = keeper.kill();
            return Err(format!(
                "postgres did not accept connections within {START_DEADLINE:?}: {}",
                log().trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Server {
        url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        _keeper: Some(keeper),
    })
}

/// `program`, run as another user when `run_as` says so.
fn command(run_as: &[String], program: &Path) -> Command {
    match run_as.split_first() {
        Some((setpriv, args)) => {
            let mut command = Command::new(setpriv);
            command.args(args).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// As root, hands `dir` to an unprivileged user (`postgres`, else `nobody`) and returns its
/// ids; as anyone else, `None` (the cluster is the caller's own).
fn owner(dir: &Path) -> Result<Option<(u32, u32)>, String> {
    let me = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(1);
    if me != 0 {
        return Ok(None);
    }
    let id = |flag: &str, user: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, user]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let (uid, gid) = ["postgres", "nobody"]
        .iter()
        .find_map(|user| Some((id("-u", user)?, id("-g", user)?)))
        .ok_or("running as root with neither a postgres nor a nobody user")?;
    std::os::unix::fs::chown(dir, Some(uid), Some(gid))
        .map_err(|e| format!("handing {} to uid {uid}: {e}", dir.display()))?;
    Ok(Some((uid, gid)))
}

/// The directory holding `initdb`, `postgres` and `pg_isready`: `pg_config --bindir`, then
/// the usual install places (newest version first), then `PATH`.
fn bindir() -> Option<PathBuf> {
    let complete = |dir: &Path| {
        ["initdb", "postgres", "pg_isready"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    let mut versioned = Vec::new();
    for (parent, prefix, suffix) in [
        ("/usr/lib/postgresql", "", "bin"),
        ("/usr", "pgsql-", "bin"),
        ("/opt/homebrew/opt", "postgresql", "bin"),
        ("/usr/local/opt", "postgresql", "bin"),
    ] {
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(version) = name.strip_prefix(prefix) {
                let number: u32 = version
                    .trim_start_matches('@')
                    .split('.')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                versioned.push((number, entry.path().join(suffix)));
            }
        }
    }
    versioned.sort_by_key(|v| std::cmp::Reverse(v.0));
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    from_pg_config
        .into_iter()
        .chain(versioned.into_iter().map(|(_, dir)| dir))
        .chain(on_path)
        .find(|dir| complete(dir))
}

/// A loopback port nothing listens on right now.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// A few random bits for a directory name, without a randomness crate.
fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish() as u32
}
