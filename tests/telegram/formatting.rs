//! Rich replies on Telegram (issue 14): the agent's Markdown arrives as Telegram HTML
//! (`parse_mode: "HTML"`) that the fake parses as Telegram does; a streamed answer with a
//! fence still open never meets a 400; a reply whose markup is refused is resent plain,
//! its links' addresses written out after their texts.

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::telegram::{Entity, Failure, Incoming, Trigger};

use super::USER;
use super::harness::{DEADLINE, Tg};

#[tokio::test]
async fn issue_14_a_formatted_answer_arrives_as_html_with_its_entities() {
    const ANSWER: &str = "**Done.** Run `cargo test` & read [the guide](https://e.x/g?a=1&b=2).\n\n```rust\nfn main() {}\n```";
    const SHOWN: &str = "Done. Run cargo test & read the guide.\n\nfn main() {}";
    let tg = Tg::start().await;
    tg.ready().await;
    tg.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(1));
    tg.fake.inject(Incoming::private(USER, "format it"));
    let calls = tg
        .fake
        .wait_for("the answer", DEADLINE, |_| {
            tg.fake.bot_messages(USER).iter().any(|m| m.text == SHOWN)
        })
        .await
        .unwrap();
    let message = tg
        .fake
        .bot_messages(USER)
        .into_iter()
        .find(|m| m.text == SHOWN)
        .unwrap();
    let utf16 = |s: &str| s.encode_utf16().count();
    let at = |s: &str| utf16(&SHOWN[..SHOWN.find(s).unwrap()]);
    assert_eq!(
        message.entities,
        [
            Entity::new("bold", 0, utf16("Done.")),
            Entity::new("code", at("cargo test"), utf16("cargo test")),
            Entity::new("text_link", at("the guide"), utf16("the guide"))
                .with_url("https://e.x/g?a=1&b=2"),
            Entity::new("pre", at("fn main"), utf16("fn main() {}")).with_language("rust"),
        ]
    );
    assert!(
        calls
            .iter()
            .filter(|c| c.method == "sendMessage" || c.method == "editMessageText")
            .all(|c| c.parse_mode() == Some("HTML")),
        "every text goes as HTML"
    );
    tg.stop().await;
}

#[tokio::test]
async fn issue_14_a_stream_with_an_open_fence_never_meets_a_400() {
    // The fence opens in the first chunks and closes only at the end; every edit in
    // between shows it as text.
    let answer = format!(
        "Here is the code:\n\n```python\n{}print('done')\n```\nThat is all.",
        "x = 1 if a < b else 2\n".repeat(12)
    );
    let tg = Tg::start().await;
    tg.ready().await;
    tg.sim.script_next_run(
        Script::with_answer(answer)
            .chunks(8)
            .chunk_delay(Duration::from_millis(400)),
    );
    tg.fake.inject(Incoming::private(USER, "code please"));
    let calls = tg
        .fake
        .wait_for("the finished code", DEADLINE, |_| {
            tg.fake
                .bot_messages(USER)
                .iter()
                .any(|m| m.entities.iter().any(|e| e.kind == "pre"))
        })
        .await
        .unwrap();
    let writes: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "sendMessage" || c.method == "editMessageText")
        .collect();
    assert!(writes.len() >= 3, "the answer streamed: {}", writes.len());
    let refused: Vec<_> = writes.iter().filter(|c| !c.ok()).collect();
    assert!(refused.is_empty(), "{refused:#?}");
    let message = tg.fake.bot_messages(USER).pop().unwrap();
    assert!(message.text.ends_with("That is all."), "{}", message.text);
    tg.stop().await;
}

#[tokio::test]
async fn issue_14_a_reply_whose_markup_is_refused_is_resent_as_plain_text() {
    let tg = Tg::start().await;
    tg.ready().await;
    tg.fake.fail(
        "sendMessage",
        Trigger::Nth(1),
        Failure::Status(
            400,
            "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0"
                .into(),
        ),
    );
    tg.sim
        .script_next_run(Script::with_answer("**Bold** & plain").chunks(1));
    tg.fake.inject(Incoming::private(USER, "go"));
    let calls = tg
        .fake
        .wait_for("the plain resend", DEADLINE, |calls| {
            calls.iter().any(|c| c.ok() && c.method == "sendMessage")
        })
        .await
        .unwrap();
    let sends: Vec<_> = calls.iter().filter(|c| c.method == "sendMessage").collect();
    assert_eq!(sends.len(), 2, "{sends:#?}");
    assert_eq!(sends[0].text(), Some("<b>Bold</b> &amp; plain"));
    assert_eq!(sends[1].text(), Some("Bold &amp; plain"));
    let shown = tg.fake.bot_messages(USER);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].text, "Bold & plain");
    assert!(shown[0].entities.is_empty());
    tg.stop().await;
}

/// An answer citing many sources: its link addresses carry more entity data than Telegram
/// takes in one message ("entities too long", long before 4096 visible characters). The
/// answer still arrives as plain text, each link's address after its text, in as many
/// messages as that takes, each within 4096 UTF-16 units.
#[tokio::test]
async fn an_answer_whose_links_are_too_much_entity_data_arrives_as_plain_text_with_its_addresses() {
    let path = "p".repeat(180);
    let url = |n: usize| format!("https://example.com/{path}/{n}");
    let answer: String = (0..60)
        .map(|n| format!("See [source {n}]({}).\n", url(n)))
        .collect();
    let tg = Tg::start().await;
    tg.ready().await;
    tg.sim
        .script_next_run(Script::with_answer(answer.trim_end()).chunks(1));
    tg.fake.inject(Incoming::private(USER, "cite everything"));
    let shown = || -> String {
        let messages = tg.fake.bot_messages(USER);
        messages
            .iter()
            .map(|m| m.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let calls = tg
        .fake
        .wait_for("every address", DEADLINE, |_| {
            let shown = shown();
            (0..60).all(|n| shown.contains(&format!("source {n} ({})", url(n))))
        })
        .await
        .unwrap();
    let refused: Vec<_> = calls.iter().filter(|c| c.status == 400).collect();
    assert_eq!(
        refused.len(),
        1,
        "Telegram refused the links, then nothing: {refused:#?}"
    );
    let messages = tg.fake.bot_messages(USER);
    assert!(messages.len() > 1, "the addresses took it past one message");
    for message in &messages {
        assert!(message.entities.is_empty(), "as plain text");
        let len = message.text.encode_utf16().count();
        assert!(len <= 4096, "{len} UTF-16 units");
    }
    // The whole answer, in order, each link as its text and address.
    let expected: String = (0..60)
        .map(|n| format!("See source {n} ({}).\n", url(n)))
        .collect();
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(words(&shown()), words(&expected));
    tg.stop().await;
}
