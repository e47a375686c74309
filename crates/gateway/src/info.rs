//! Read-only lookups on `gateway_url` (gateway.md §4.6, §5): models, memory, skills and the
//! owner's language preference. Each returns only what a command reply needs.

use serde::Deserialize;
use serde_json::Value;

use crate::client::{Base, GatewayClient, Owner};
use crate::error::GatewayError;
use crate::routes::{OptionalRoute, Support};

/// Longest language tag accepted from the preferences endpoint (BCP 47 tags are short).
const MAX_LOCALE_LEN: usize = 35;

/// One skill as `/api/skills` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SkillInfo {
    /// The skill name (the `/<skill>` command).
    pub name: String,
    /// Whether it is enabled; a skill without the flag counts as enabled.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

impl GatewayClient {
    /// `GET {gateway_url}/api/models`: the configured model names (`models[].name`).
    pub async fn list_models(&self, owner: Option<&Owner>) -> Result<Vec<String>, GatewayError> {
        #[derive(Deserialize)]
        struct Models {
            #[serde(default)]
            models: Vec<Named>,
        }
        #[derive(Deserialize)]
        struct Named {
            name: String,
        }
        let models: Models = self
            .gateway_json("list_models", "/api/models", owner)
            .await?;
        Ok(models.models.into_iter().map(|m| m.name).collect())
    }

    /// `GET {gateway_url}/api/memory`: how many facts the owner's memory holds.
    pub async fn get_memory(&self, owner: Option<&Owner>) -> Result<usize, GatewayError> {
        #[derive(Deserialize)]
        struct Memory {
            #[serde(default)]
            facts: Vec<serde::de::IgnoredAny>,
        }
        let memory: Memory = self
            .gateway_json("get_memory", "/api/memory", owner)
            .await?;
        Ok(memory.facts.len())
    }

    /// `GET {gateway_url}/api/skills`: each skill's name and whether it is enabled.
    pub async fn list_skills(&self, owner: Option<&Owner>) -> Result<Vec<SkillInfo>, GatewayError> {
        #[derive(Deserialize)]
        struct Skills {
            #[serde(default)]
            skills: Vec<SkillInfo>,
        }
        let skills: Skills = self
            .gateway_json("list_skills", "/api/skills", owner)
            .await?;
        Ok(skills.skills)
    }

    /// `GET {gateway_url}/api/user-preferences` (§4.6): the owner's UI language, from a
    /// string `locale` at the top level or at `settings.locale`. A Gateway without the route
    /// is asked no more once it said so (issue 26). A 404 or a missing or
    /// malformed field is `Ok(None)`; other failures are errors the caller treats as
    /// "no preference" too. The tag is only shape-checked; negotiation is the caller's.
    pub async fn owner_locale(
        &self,
        owner: Option<&Owner>,
    ) -> Result<Option<String>, GatewayError> {
        if self.route_support(OptionalRoute::UserPreferences) == Support::Missing {
            return Ok(None);
        }
        let fetched = self
            .gateway_json::<Value>("owner_locale", "/api/user-preferences", owner)
            .await;
        self.note_route(OptionalRoute::UserPreferences, &fetched);
        let prefs = match fetched {
            Ok(prefs) => prefs,
            Err(GatewayError::NotFound | GatewayError::RouteMissing) => return Ok(None),
            Err(error) => return Err(error),
        };
        let found = [
            prefs.get("locale"),
            prefs.get("settings").and_then(|s| s.get("locale")),
        ]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::trim)
        .find(|tag| is_language_tag(tag));
        Ok(found.map(str::to_owned))
    }

    /// `GET {gateway_url}{path}` as `owner`, its JSON body read as `T`.
    async fn gateway_json<T: serde::de::DeserializeOwned>(
        &self,
        call: &'static str,
        path: &str,
        owner: Option<&Owner>,
    ) -> Result<T, GatewayError> {
        self.get_json(call, &self.url(Base::Gateway, path), owner)
            .await
    }
}

/// A plausible BCP 47 tag: letters, digits, `-`/`_`, starting with a letter.
fn is_language_tag(tag: &str) -> bool {
    tag.len() <= MAX_LOCALE_LEN
        && tag.starts_with(|c: char| c.is_ascii_alphabetic())
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_tags_are_shape_checked() {
        for ok in ["en-US", "zh", "zh_Hans_CN", "pt-BR"] {
            assert!(is_language_tag(ok), "{ok}");
        }
        for bad in ["", "-en", "en US", "<script>", &"a".repeat(36), "日本語"] {
            assert!(!is_language_tag(bad), "{bad}");
        }
    }

    #[test]
    fn skills_default_to_enabled() {
        let skills: Vec<SkillInfo> =
            serde_json::from_str(r#"[{"name":"a","enabled":false,"x":1},{"name":"b"}]"#).unwrap();
        assert_eq!((skills[0].enabled, skills[1].enabled), (false, true));
    }
}
