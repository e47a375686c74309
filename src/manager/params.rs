//! Run parameters: which agent, `config`, `context` and identity a run carries
//! (spec manager §5.2, §6).
//!
//! Session layers stack lowest to highest: built-in defaults → `channels.session` →
//! `channels.<channel>.session` → `channels.<channel>.session.users.<raw user id>`.
//! Identity fields are applied last and always win.

use std::fmt::Write as _;

use im_bridge_channel::InboundMessage;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::config::SessionLayer;
use crate::gateway::ThreadId;
use crate::gateway::{Owner, RunRequest};

/// The agent every run names on the wire; custom agents travel in `context.agent_name`.
pub const LEAD_AGENT: &str = "lead_agent";
const DEFAULT_RECURSION_LIMIT: i64 = 100;

/// A custom agent name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the configured agent name is not valid")]
pub struct InvalidAgentName;

/// The layers that apply to one channel.
#[derive(Debug, Clone, Copy)]
pub struct Layers<'a> {
    /// `channels.session`.
    pub global: &'a SessionLayer,
    /// `channels.<channel>.session`, if the channel has one.
    pub channel: Option<&'a SessionLayer>,
}

/// Extra flags of a turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnFlags {
    /// `/bootstrap`: sets `context.is_bootstrap`.
    pub bootstrap: bool,
}

/// The session layers that apply to `msg`, the widest first: global, channel, user.
fn stack<'l>(msg: &InboundMessage, layers: Layers<'l>) -> [Option<&'l SessionLayer>; 3] {
    let user_layer = layers
        .channel
        .and_then(|c| c.users.get(msg.user_id.as_str()));
    [Some(layers.global), layers.channel, user_layer]
}

/// The model `msg`'s runs use, when the session layers name one (`context.model_name`, the
/// narrowest layer's): what a compaction of its thread summarizes with too.
pub fn model_for(msg: &InboundMessage, layers: Layers<'_>) -> Option<String> {
    stack(msg, layers)
        .iter()
        .rev()
        .flatten()
        .find_map(|layer| layer.context.get("model_name")?.as_str())
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
}

/// The custom agent that runs for `msg` (`None` = the lead agent).
pub fn agent_for(
    msg: &InboundMessage,
    layers: Layers<'_>,
) -> Result<Option<String>, InvalidAgentName> {
    let stack = stack(msg, layers);
    let explicit = ["assistant_id", "agent_name"]
        .iter()
        .find_map(|k| msg.metadata.get(*k))
        .map(|v| v.as_str().unwrap_or_default().to_owned());
    let chosen = explicit.or_else(|| {
        stack
            .iter()
            .rev()
            .flatten()
            .find_map(|l| l.assistant_id.clone())
    });
    match chosen.as_deref().map(str::trim) {
        None | Some("") | Some(LEAD_AGENT) => Ok(None),
        Some(name) => normalize_agent_name(name).map(Some),
    }
}

/// Builds the run request for `text` from `msg` on `thread`, for the conversation's
/// DeerFlow `owner` if it has one.
pub fn build_request(
    msg: &InboundMessage,
    owner: Option<&Owner>,
    text: &str,
    thread: &ThreadId,
    layers: Layers<'_>,
    flags: TurnFlags,
) -> Result<RunRequest, InvalidAgentName> {
    let stack: Vec<&SessionLayer> = stack(msg, layers).into_iter().flatten().collect();

    let agent_name = agent_for(msg, layers)?;

    let mut config = Map::new();
    config.insert("recursion_limit".into(), json!(DEFAULT_RECURSION_LIMIT));
    let mut context = Map::new();
    context.insert("thinking_enabled".into(), json!(true));
    context.insert("is_plan_mode".into(), json!(false));
    context.insert("subagent_enabled".into(), json!(false));
    for layer in &stack {
        deep_merge(&mut config, &layer.config);
        deep_merge(&mut context, &layer.context);
    }
    let configurable = config
        .entry("configurable")
        .or_insert_with(|| Value::Object(Map::new()));
    if !configurable.is_object() {
        *configurable = Value::Object(Map::new());
    }
    if let Value::Object(c) = configurable {
        c.insert("checkpoint_ns".into(), json!(""));
        c.insert("thread_id".into(), json!(thread.as_str()));
    }

    let storage_user = owner.map_or(msg.user_id.as_str(), Owner::as_str);
    context.insert("thread_id".into(), json!(thread.as_str()));
    context.insert("channel_name".into(), json!(msg.channel_name));
    context.insert("user_id".into(), json!(sanitize_user_id(storage_user)));
    if !msg.user_id.as_str().is_empty() {
        context.insert("channel_user_id".into(), json!(msg.user_id.as_str()));
    }
    match agent_name {
        Some(name) => {
            context.insert("agent_name".into(), json!(name));
        }
        None => {
            context.remove("agent_name");
        }
    }
    if flags.bootstrap {
        context.insert("is_bootstrap".into(), json!(true));
    }

    let mut request = RunRequest::new(text);
    request.assistant_id = LEAD_AGENT.to_owned();
    request.config = Value::Object(config);
    request.context = Value::Object(context);
    request.metadata =
        Some(json!({"deerflow_origin": {"kind": "im_channel", "provider": msg.channel_name}}));
    Ok(request)
}

/// Trim, lower-case, `_` → `-`; must then be non-empty ASCII letters, digits and hyphens.
pub fn normalize_agent_name(name: &str) -> Result<String, InvalidAgentName> {
    let normalized = name.trim().to_lowercase().replace('_', "-");
    if normalized.is_empty()
        || !normalized
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(InvalidAgentName);
    }
    Ok(normalized)
}

/// The Gateway's `make_safe_user_id`: characters outside `[A-Za-z0-9_-]` become `-`, and if
/// anything changed, `-` plus the first 16 hex digits of SHA-256(raw) are appended.
pub fn sanitize_user_id(raw: &str) -> String {
    let safe: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if safe == raw {
        return safe;
    }
    let digest = Sha256::digest(raw.as_bytes());
    let mut out = safe;
    out.push('-');
    for byte in &digest[..8] {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Merges `from` into `into`, recursing into objects present on both sides.
fn deep_merge(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (key, value) in from {
        match (into.get_mut(key), value) {
            (Some(Value::Object(a)), Value::Object(b)) => deep_merge(a, b),
            _ => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(assistant: Option<&str>, config: Value, context: Value) -> SessionLayer {
        SessionLayer {
            assistant_id: assistant.map(str::to_owned),
            config: config.as_object().cloned().unwrap_or_default(),
            context: context.as_object().cloned().unwrap_or_default(),
            users: Default::default(),
        }
    }

    #[test]
    fn layers_stack_and_identity_wins() {
        let global = layer(
            Some("lead_agent"),
            json!({"recursion_limit": 120}),
            json!({"thinking_enabled": false, "user_id": "spoofed"}),
        );
        let mut channel = layer(
            Some("Mobile_Agent"),
            json!({"configurable": {"x": 1}}),
            json!({"is_plan_mode": true}),
        );
        channel.users.insert(
            "u 1".into(),
            layer(
                None,
                json!({"recursion_limit": 150}),
                json!({"subagent_enabled": true}),
            ),
        );
        let msg = InboundMessage::new("telegram", "42", "u 1", "hi");
        let req = build_request(
            &msg,
            None,
            "hi",
            &ThreadId::new("t1"),
            Layers {
                global: &global,
                channel: Some(&channel),
            },
            TurnFlags { bootstrap: true },
        )
        .unwrap();
        assert_eq!(req.assistant_id, "lead_agent");
        assert_eq!(
            req.config,
            json!({"recursion_limit": 150, "configurable": {"x": 1, "checkpoint_ns": "", "thread_id": "t1"}})
        );
        let ctx = req.context.as_object().unwrap();
        assert_eq!(ctx["agent_name"], "mobile-agent");
        assert_eq!(ctx["thinking_enabled"], false);
        assert_eq!(ctx["is_plan_mode"], true);
        assert_eq!(ctx["subagent_enabled"], true);
        assert_eq!(ctx["is_bootstrap"], true);
        assert_eq!(ctx["channel_user_id"], "u 1");
        assert_eq!(ctx["user_id"], sanitize_user_id("u 1"));
        assert_eq!(ctx["thread_id"], "t1");
        assert_eq!(ctx["channel_name"], "telegram");
        assert_eq!(
            req.metadata,
            Some(json!({"deerflow_origin": {"kind": "im_channel", "provider": "telegram"}}))
        );
    }

    #[test]
    fn message_metadata_picks_the_agent_and_lead_agent_removes_it() {
        let global = layer(Some("coder"), json!({}), json!({"agent_name": "stale"}));
        let mut msg = InboundMessage::new("discord", "c", "u", "hi");
        let req = build_request(
            &msg,
            None,
            "hi",
            &ThreadId::new("t"),
            Layers {
                global: &global,
                channel: None,
            },
            TurnFlags::default(),
        )
        .unwrap();
        assert_eq!(req.context["agent_name"], "coder");
        msg.metadata
            .insert("agent_name".into(), json!("lead_agent"));
        let req = build_request(
            &msg,
            None,
            "hi",
            &ThreadId::new("t"),
            Layers {
                global: &global,
                channel: None,
            },
            TurnFlags::default(),
        )
        .unwrap();
        assert!(req.context.get("agent_name").is_none());
        msg.metadata.insert("agent_name".into(), json!("bad name!"));
        assert!(
            build_request(
                &msg,
                None,
                "hi",
                &ThreadId::new("t"),
                Layers {
                    global: &global,
                    channel: None
                },
                TurnFlags::default()
            )
            .is_err()
        );
    }

    #[test]
    fn sanitizing_matches_the_gateway() {
        assert_eq!(sanitize_user_id("user_42-x"), "user_42-x");
        let s = sanitize_user_id("ou_abc@feishu");
        assert!(s.starts_with("ou_abc-feishu-"));
        assert_eq!(s.len(), "ou_abc-feishu-".len() + 16);
        // Reference value: SHA-256("a b") starts with c8687a08aa5d6ed2.
        assert_eq!(sanitize_user_id("a b"), "a-b-c8687a08aa5d6ed2");
    }
}
