//! `config`: a `config.yaml` text through what `check-config` runs (parse, `$VAR`
//! expansion from a fake environment, validation by the daemon and by every adapter's
//! validator), then printed as `check-config` prints the effective settings.
//!
//! Nothing here touches the file system or a socket: the environment is a map, and a
//! `bridge.locales_dir` (the one key that makes validation read a directory) is cleared
//! before validation. Invariants: no panic; a refused file lists at least one problem,
//! each with its key path.
#![no_main]

use std::collections::HashMap;

use im_bridge::config::{LoadError, parse, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The daemon reads the file as UTF-8 text; anything else is refused before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let env: HashMap<String, String> = [
        ("TELEGRAM_BOT_TOKEN", "4242:fake-token"),
        ("FEISHU_APP_SECRET", "fake-secret"),
        ("DEER_FLOW_INTERNAL_AUTH_TOKEN", "fake-internal"),
        ("DEER_FLOW_CHANNELS_GATEWAY_URL", "http://127.0.0.1:8001"),
        ("EMPTY", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut parsed = match parse(text, &env) {
        Ok(parsed) => parsed,
        Err(error) => {
            refused(&error);
            return;
        }
    };
    parsed.raw.bridge.locales_dir = None;
    match validate(parsed, &env) {
        Ok((settings, _warnings)) => {
            // What check-config prints; a failure there is only a warning in the daemon.
            let _ = serde_yaml_ng::to_string(&settings);
            let _ = format!("{settings:?}");
        }
        Err(errors) => refused(&LoadError::Invalid(errors)),
    }
});

fn refused(error: &LoadError) {
    let lines = error.errors();
    assert!(!lines.is_empty(), "refused without a reason");
    for line in &lines {
        assert!(!line.trim().is_empty(), "an empty reason in {lines:?}");
    }
}
