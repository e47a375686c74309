//! `/help`: the commands of the table, in table order, between a header and a footer (the
//! footer mentions installed skills, which are not in the table). Every line comes from the
//! catalogs, so the list is in the reply's language and always matches what is handled.

use im_bridge_channel::InboundMessage;

use super::{Command, TABLE};
use crate::i18n::{Catalogs, Locale, msg as m};
use crate::manager::{Disposition, Inner};

/// `/help`.
pub(super) const COMMAND: Command = Command {
    name: "help",
    aliases: &[],
    menu: Some(m::MENU_HELP),
    help: m::HELP_HELP,
    starts_run: super::no_run,
    handler: |inner, msg, _| Box::pin(handle(inner, msg)),
};

async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let replier = &inner.replier;
    let (locale, _) = replier.locale_for(msg).await;
    let text = text(replier.catalogs(), &locale, TABLE);
    replier.publish(msg, msg.reply(text, true)).await;
    Disposition::Keep
}

/// The help for `table` in `locale`: header, each command's entry, footer, one per line.
fn text(catalogs: &Catalogs, locale: &Locale, table: &[&Command]) -> String {
    let mut lines = Vec::with_capacity(table.len() + 2);
    lines.push(catalogs.text(locale, m::HELP_HEADER, &[]));
    lines.extend(table.iter().map(|c| catalogs.text(locale, c.help, &[])));
    lines.push(catalogs.text(locale, m::HELP_FOOTER, &[]));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_command_of_the_table_in_every_locale() {
        let catalogs = Catalogs::embedded().unwrap();
        for locale in catalogs.supported() {
            let help = text(&catalogs, locale, TABLE);
            let lines: Vec<&str> = help.lines().collect();
            for command in TABLE {
                let entry = catalogs.text(locale, command.help, &[]);
                assert!(help.contains(&entry), "{locale}: /{} missing", command.name);
                for line in entry.lines() {
                    let shown = format!("/{}", command.name);
                    assert!(
                        line == shown || line.starts_with(&format!("{shown} ")),
                        "{locale}: an entry of /{} starts {line:?}",
                        command.name
                    );
                }
            }
            // Header, then the entries in table order, then the footer.
            assert_eq!(lines[0], catalogs.text(locale, m::HELP_HEADER, &[]));
            assert_eq!(
                lines.last().copied(),
                Some(catalogs.text(locale, m::HELP_FOOTER, &[]).as_str())
            );
            let firsts: Vec<usize> = TABLE
                .iter()
                .map(|c| {
                    let first = catalogs.text(locale, c.help, &[]);
                    let first = first.lines().next().unwrap_or_default().to_owned();
                    lines.iter().position(|l| *l == first).unwrap()
                })
                .collect();
            assert!(firsts.is_sorted(), "{locale}: {firsts:?}");
        }
        let en = catalogs.default_locale();
        let help = text(&catalogs, &en, TABLE);
        assert!(
            help.starts_with("Here's what I understand:\n/new — "),
            "{help}"
        );
    }
}
