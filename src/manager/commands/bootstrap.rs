//! `/bootstrap [text]`: a chat turn with the `is_bootstrap` context flag, so the agent sets
//! up the workspace. Its reply is the run's output.

use super::Command;
use crate::i18n::msg as m;
use crate::manager::run::{self, TurnOptions};

/// The text a bare `/bootstrap` sends to the agent (agent input, not a reply).
const BOOTSTRAP_DEFAULT: &str = "Initialize workspace";

/// `/bootstrap`.
pub(super) const COMMAND: Command = Command {
    name: "bootstrap",
    aliases: &[],
    menu: Some(m::MENU_BOOTSTRAP),
    help: m::HELP_BOOTSTRAP,
    handler: |inner, msg, args| {
        Box::pin(async move {
            let text = if args.is_empty() {
                BOOTSTRAP_DEFAULT
            } else {
                args
            };
            let options = TurnOptions {
                bootstrap: true,
                ..TurnOptions::default()
            };
            run::chat_turn(inner, msg, text, options).await.0
        })
    },
};
