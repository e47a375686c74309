//! `/bootstrap [text]`: a chat turn with the `is_bootstrap` context flag, so the agent sets
//! up the workspace. Its reply is the run's output.

use super::Command;
use crate::i18n::msg as m;
use crate::manager::run::{self, TurnOptions};

/// `/bootstrap`.
pub(super) const COMMAND: Command = Command {
    name: "bootstrap",
    aliases: &[],
    menu: Some(m::MENU_BOOTSTRAP),
    help: m::HELP_BOOTSTRAP,
    starts_run: |_| true,
    handler: |inner, msg, args| {
        Box::pin(async move {
            // A bare `/bootstrap` asks in the chat's language ("Initialize workspace" in
            // English, DeerFlow's own wording).
            let default;
            let text = if args.is_empty() {
                let (locale, _) = inner.replier.locale_for(msg).await;
                default = inner.replier.text(&locale, m::BOOTSTRAP_DEFAULT_INPUT, &[]);
                default.as_str()
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
