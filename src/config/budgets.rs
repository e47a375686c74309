//! Rate budget adjustments checked against the built channel (issue 33): a
//! `channels.<name>.rate_budgets.<budget>` key must name a budget the channel declares. Its
//! capabilities are known only once it is built (no network yet), so this runs when the
//! daemon builds its channels, not in `check-config`.

use im_bridge_channel::{Channel, RateBudget};

use super::ConfigError;
use crate::budgets::BudgetOverride;

/// Refuses adjustments of budgets `channel` does not declare, naming the key and the
/// budgets it has.
pub fn check_rate_budgets(
    channel: &dyn Channel,
    overrides: &[BudgetOverride],
) -> Result<(), ConfigError> {
    check_names(
        channel.name(),
        channel.capabilities().rate_budgets,
        overrides,
    )
}

fn check_names(
    channel: &str,
    declared: &[RateBudget],
    overrides: &[BudgetOverride],
) -> Result<(), ConfigError> {
    match overrides
        .iter()
        .find(|o| !declared.iter().any(|b| b.name == o.name))
    {
        None => Ok(()),
        Some(unknown) => {
            let names: Vec<&str> = declared.iter().map(|b| b.name).collect();
            Err(ConfigError::error(
                format!("channels.{channel}.rate_budgets.{}", unknown.name),
                if names.is_empty() {
                    format!("the {channel} channel declares no rate budget")
                } else {
                    format!(
                        "the {channel} channel has no rate budget of this name; it declares {}",
                        names.join(", ")
                    )
                },
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budgets::tests::DECLARED;

    #[test]
    fn an_adjustment_of_a_budget_the_channel_lacks_is_refused_with_its_key() {
        let typo = BudgetOverride {
            name: "bots".into(),
            burst: Some(1),
            per_second: None,
        };
        let error = check_names("telegram", &DECLARED, std::slice::from_ref(&typo)).unwrap_err();
        assert_eq!(error.path, "channels.telegram.rate_budgets.bots");
        assert!(
            error.message.contains("bot, card_updates"),
            "{}",
            error.message
        );
        let error = check_names("qq", &[], &[typo]).unwrap_err();
        assert!(
            error.message.contains("declares no rate budget"),
            "{}",
            error.message
        );
        assert!(check_names("telegram", &DECLARED, &[]).is_ok());
    }
}
