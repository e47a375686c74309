//! Configuration: DeerFlow's `config.yaml`, read as DeerFlow reads it, plus our `bridge:`.
//!
//! Loading has three steps, each pure and testable without touching the process:
//! 1. parse the YAML ([`RawConfig`], in `config/raw.rs`): DeerFlow's other sections are
//!    ignored so an operator can point at their whole DeerFlow file;
//! 2. expand `$NAME` / `${NAME}` values from an injected environment, remembering which
//!    variables were unset and where (an unset variable only matters where it is used);
//! 3. [`validate`]: turn the raw structs into [`Settings`], collecting *every* problem as a
//!    [`ConfigError`] that names the key path and what was expected.
//!
//! `im-bridge check-config` runs exactly these steps and nothing else.

mod budgets;
mod raw;
mod settings;

use std::path::Path;

use serde_yaml_ng::Value;

pub use budgets::check_rate_budgets;
pub use raw::{
    RawBridge, RawChannelBlock, RawChannelConnections, RawChannels, RawConfig, RawSession,
};
pub use settings::{
    ChannelSettings, GatewaySettings, IntakeSettings, SessionLayer, Settings, StoreLocation,
    validate,
};

/// One problem with the configuration, at a key path such as `channels.max_concurrency`:
/// the core's [`ConfigIssue`](im_bridge_channel::ConfigIssue), which adapters report too. Its message never contains a
/// secret's value.
pub use im_bridge_channel::ConfigIssue as ConfigError;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid YAML, or a value has the wrong type.
    #[error("{0}")]
    Syntax(ConfigError),
    /// The values are invalid; every problem is listed.
    #[error("{}", display_all(.0))]
    Invalid(Vec<ConfigError>),
}

impl LoadError {
    /// Every problem, one per entry.
    pub fn errors(&self) -> Vec<String> {
        match self {
            LoadError::Invalid(errors) => errors.iter().map(ToString::to_string).collect(),
            other => vec![other.to_string()],
        }
    }
}

fn display_all(errors: &[ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A variable referenced as `$NAME` that the environment does not define, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsetVar {
    /// Dotted path of the value that referenced it.
    pub path: String,
    /// The variable's name.
    pub name: String,
}

/// A parsed file with its environment already applied, ready for [`validate`].
#[derive(Debug)]
pub struct Parsed {
    /// The raw sections.
    pub raw: RawConfig,
    /// Variables that were referenced but unset.
    pub unset: Vec<UnsetVar>,
    /// Keys we read but did not recognise, inside DeerFlow blocks (warnings).
    pub ignored: Vec<String>,
    /// Values of the wrong type (a list where a number goes, …), each with its key path.
    /// The value was left out so the rest of the file could still be read and checked:
    /// every problem is reported in one pass (issue 27).
    pub type_errors: Vec<ConfigError>,
}

/// Where `$NAME` values and the `DEER_FLOW_*` fallbacks come from. Tests pass a map; the
/// binary passes the process environment.
pub trait Env {
    /// The variable's value, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl<S: std::hash::BuildHasher> Env for std::collections::HashMap<String, String, S> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// Reads, parses and validates the file at `path`.
pub fn load_file(path: &Path, env: &dyn Env) -> Result<(Settings, Vec<String>), LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    load_str(&text, env)
}

/// Parses and validates a configuration text. Returns the settings and the warnings.
pub fn load_str(text: &str, env: &dyn Env) -> Result<(Settings, Vec<String>), LoadError> {
    let parsed = parse(text, env)?;
    validate(parsed, env).map_err(LoadError::Invalid)
}

/// The effective settings as `check-config` prints them (YAML): secrets are `<redacted>`
/// already, and so is the password of any URL among the values (issue 27: a
/// `gateway_url` like `https://user:pass@gateway` used to be printed in clear).
pub fn printable(settings: &Settings) -> Result<String, serde_yaml_ng::Error> {
    let mut value = serde_yaml_ng::to_value(settings)?;
    redact_url_passwords(&mut value);
    serde_yaml_ng::to_string(&value)
}

/// Replaces the password of every URL string in `value` with `<redacted>`.
fn redact_url_passwords(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Ok(mut url) = url::Url::parse(text)
                && url.password().is_some()
                && url.set_password(Some(REDACTED)).is_ok()
            {
                *text = url.to_string();
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(redact_url_passwords),
        Value::Mapping(map) => map.values_mut().for_each(redact_url_passwords),
        Value::Tagged(tagged) => redact_url_passwords(&mut tagged.value),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// What a redacted value prints as (the `Secret` newtype's text).
const REDACTED: &str = "<redacted>";

/// Parses a configuration text and applies the environment, without validating values.
pub fn parse(text: &str, env: &dyn Env) -> Result<Parsed, LoadError> {
    let mut value: Value = if text.trim().is_empty() {
        Value::Mapping(Default::default())
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| format!("line {}, column {}", l.line(), l.column()));
            LoadError::Syntax(ConfigError::error(
                at.unwrap_or_else(|| "(file)".into()),
                format!("not valid YAML: {}", strip_location(&e.to_string())),
            ))
        })?
    };
    let Value::Mapping(root) = &mut value else {
        return Err(LoadError::Syntax(ConfigError::error(
            "(root)",
            "expected a mapping of sections",
        )));
    };
    // A section whose every key is commented out reads as null: treat it as empty.
    for key in ["channels", "channel_connections", "bridge"] {
        if let Some(v @ Value::Null) = root.get_mut(key) {
            *v = Value::Mapping(Default::default());
        }
    }
    let mut unset = Vec::new();
    for key in ["channels", "channel_connections", "bridge"] {
        if let Some(section) = root.get_mut(key) {
            expand_env(section, key.to_owned(), env, &mut unset);
        }
    }
    let mut ignored = Vec::new();
    let mut type_errors = Vec::new();
    let raw: RawConfig = loop {
        ignored.clear();
        let mut on_ignored = |path: serde_ignored::Path<'_>| {
            // serde_ignored marks `Option` layers with `?`; they are not keys.
            let path = path.to_string().replace(".?", "");
            if path.starts_with("channels.") || path.starts_with("channel_connections.") {
                ignored.push(path);
            }
        };
        let de = serde_ignored::Deserializer::new(value.clone(), &mut on_ignored);
        match serde_path_to_error::deserialize::<_, RawConfig>(de) {
            Ok(raw) => break raw,
            Err(e) => {
                let path = e.path().to_string();
                let keys = path_keys(&path);
                type_errors.push(ConfigError::error(path, e.into_inner().to_string()));
                // Leave the bad value out and read the rest; a path that cannot be left
                // out (the error is not about one value) ends the pass here.
                if type_errors.len() >= MAX_TYPE_ERRORS || !remove_at(&mut value, &keys) {
                    return Err(LoadError::Invalid(type_errors));
                }
            }
        }
    };
    Ok(Parsed {
        raw,
        unset,
        ignored,
        type_errors,
    })
}

/// Type errors reported in one pass at most; a file with more is mostly not this format.
const MAX_TYPE_ERRORS: usize = 50;

/// The keys of a `serde_path_to_error` path (`channels.telegram.poll_timeout_seconds`,
/// `bridge.store[0]` → `bridge`, `store`): sequence indices end the walk, so a bad element
/// leaves its whole list out.
fn path_keys(path: &str) -> Vec<String> {
    path.split('.')
        .map(|segment| match segment.find('[') {
            Some(i) => segment[..i].to_owned(),
            None => segment.to_owned(),
        })
        .filter(|segment| !segment.is_empty() && segment != "?")
        .collect()
}

/// Removes the mapping entry at `keys` from `value`; whether there was one.
fn remove_at(value: &mut Value, keys: &[String]) -> bool {
    let Some((last, parents)) = keys.split_last() else {
        return false;
    };
    let mut here = value;
    for key in parents {
        let Some(next) = here.as_mapping_mut().and_then(|m| m.get_mut(key.as_str())) else {
            return false;
        };
        here = next;
    }
    here.as_mapping_mut()
        .and_then(|m| m.remove(last.as_str()))
        .is_some()
}

fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// Replaces every whole-value `$NAME` / `${NAME}` string below `value` with the variable's
/// value (DeerFlow's convention), or with null when it is unset, recording where.
fn expand_env(value: &mut Value, path: String, env: &dyn Env, unset: &mut Vec<UnsetVar>) {
    match value {
        Value::String(s) => {
            if let Some(name) = env_reference(s) {
                match env.var(name) {
                    Some(v) => *s = v,
                    None => {
                        unset.push(UnsetVar {
                            path,
                            name: name.to_owned(),
                        });
                        *value = Value::Null;
                    }
                }
            }
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                expand_env(item, format!("{path}[{i}]"), env, unset);
            }
        }
        Value::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml_ng::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_owned(),
                };
                expand_env(v, format!("{path}.{key}"), env, unset);
            }
        }
        Value::Tagged(tagged) => expand_env(&mut tagged.value, path, env, unset),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `Some(NAME)` when `s` is exactly `$NAME` or `${NAME}`.
fn env_reference(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('$')?;
    let name = match rest.strip_prefix('{') {
        Some(inner) => inner.strip_suffix('}')?,
        None => rest,
    };
    let mut chars = name.chars();
    let first = chars.next()?;
    let valid = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some(name)
}

#[cfg(test)]
mod tests;
