//! Packaging (issue 20): shell completions and the man page generated from the CLI,
//! `--version` naming the commit the binary was built from, and `deploy/config.example.yaml`
//! passing `check-config` with every channel in it enabled: one block for each platform of
//! the daemon's registry.

use std::process::Command;

use super::{bin, write_config};

/// The subcommands an operator types; completions and the man page must offer every one.
const SUBCOMMANDS: &[&str] = &[
    "run",
    "demo",
    "simulate",
    "check-config",
    "completions",
    "man",
    "doctor",
    "deliveries",
    "drain",
];

#[test]
fn completions_offer_every_subcommand_in_every_shell() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = bin().args(["completions", shell]).output().unwrap();
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for name in SUBCOMMANDS {
            assert!(script.contains(name), "{shell} completions lack {name}");
        }
    }
    // In bash, the first word completes to exactly the subcommands (and clap's `help`).
    let out = bin().args(["completions", "bash"]).output().unwrap();
    let script = String::from_utf8_lossy(&out.stdout);
    let first_word = script
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("opts=\"-h -V "))
        .unwrap_or_else(|| panic!("no top-level opts line:\n{script}"));
    let words: Vec<&str> = first_word
        .trim_start_matches("opts=\"")
        .trim_end_matches('"')
        .split(' ')
        .filter(|w| !w.starts_with('-'))
        .collect();
    let mut expected = SUBCOMMANDS.to_vec();
    expected.push("help");
    assert_eq!(words, expected);
    assert!(
        script.contains(" im-bridge\n"),
        "not registered for im-bridge:\n{script}"
    );
    let out = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn the_man_page_is_roff_naming_every_subcommand() {
    let out = bin().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    // clap_mangen opens with the portable definition of the apostrophe string (`.ie`/`.el`,
    // as groff_man(7) suggests), then the title line.
    let first_macro = page
        .lines()
        .find(|l| !l.starts_with(".ie") && !l.starts_with(".el"))
        .unwrap_or_default();
    assert!(first_macro.starts_with(".TH im-bridge 1 "), "{page}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "{section} missing:\n{page}");
    }
    for name in SUBCOMMANDS {
        let reference = format!("im\\-bridge\\-{}(1)", name.replace('-', "\\-"));
        assert!(page.contains(&reference), "{reference} missing:\n{page}");
    }
    // --dir writes the pages the main one refers to.
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages = std::iter::once("im-bridge".to_owned())
        .chain(SUBCOMMANDS.iter().map(|n| format!("im-bridge-{n}")));
    for name in pages {
        let text = std::fs::read_to_string(dir.path().join(format!("{name}.1"))).unwrap();
        assert!(
            text.contains(&format!(".TH {name} 1 ")),
            "{name}.1:\n{text}"
        );
    }
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = bin().arg("--version").output().unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("im-bridge {} (", env!("CARGO_PKG_VERSION"));
    let commit = line
        .trim_end()
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("unexpected --version: {line:?}"));
    // What build.rs reads, in its order: git, then $IM_BRIDGE_COMMIT, then "unknown".
    let is_commit =
        |c: &str| (7..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit());
    let git = Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR")])
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let expected = git
        .filter(|c| is_commit(c))
        .or_else(|| option_env!("IM_BRIDGE_COMMIT").map(|c| c.trim().to_owned()))
        .filter(|c| is_commit(c))
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(commit, expected, "--version names another commit");
}

/// Runs `check-config` on `text` with every `$VAR` the example names (in values and in
/// comments) set to a value each validator accepts (a Telegram-shaped token is also a
/// valid id or secret elsewhere; Slack's tokens carry their prefix).
fn check_example(text: &str, example: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, "config.yaml", text);
    let mut cmd = bin();
    cmd.args(["check-config", "--config"]).arg(&path);
    for (at, _) in example.match_indices('$') {
        let name: String = example[at + 1..]
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            let value = match name.as_str() {
                "SLACK_BOT_TOKEN" => "xoxb-123456-example-value_0",
                "SLACK_APP_TOKEN" => "xapp-1-A123456-example-value_0",
                _ => "123456:example-value_0",
            };
            cmd.env(name, value);
        }
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_deploy_example_config_is_valid_and_names_only_real_keys() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/config.example.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let (ok, stdout, stderr) = check_example(&text, &text);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(
        stdout.contains("Channels that would start: telegram\n"),
        "{stdout}"
    );
    // Disabled blocks are not validated, so enable every one: a misspelt key is now an
    // "unknown key" warning, a bad value an error.
    let mut config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let mut enabled = Vec::new();
    for (name, block) in config["channels"].as_mapping_mut().unwrap().iter_mut() {
        if let Some(block) = block.as_mapping_mut().filter(|b| b.contains_key("enabled")) {
            block.insert("enabled".into(), true.into());
            enabled.push(name.as_str().unwrap().to_owned());
        }
    }
    // Every platform of the registry has its block, and nothing else has one.
    let mut registered: Vec<&str> = im_bridge::platforms::PLATFORMS
        .iter()
        .map(|p| p.name())
        .collect();
    registered.sort_unstable();
    enabled.sort_unstable();
    assert_eq!(enabled, registered);
    let (ok, stdout, stderr) = check_example(&serde_yaml_ng::to_string(&config).unwrap(), &text);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let starting = format!("Channels that would start: {}\n", registered.join(", "));
    assert!(stdout.contains(&starting), "{stdout}");
    // Every variable the example names reaches the container the compose file starts.
    let compose = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/docker-compose.yml");
    let compose = std::fs::read_to_string(compose).unwrap();
    let named = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("# ") || line.contains(": $"))
        .flat_map(|line| line.split('$').skip(1))
        .map(|rest| {
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| name.len() > 1 && *name != "NAME");
    for name in named {
        assert!(
            compose.contains(&format!("      {name}: ")),
            "deploy/docker-compose.yml does not pass {name}"
        );
    }
}
