//! Files both ways through the real Gateway, on Telegram: a photo and a document a user
//! sends reach the agent (the fake model names the uploads it was shown) and land in that
//! conversation's user's thread on disk; a file the agent presents arrives in the chat as a
//! document; two private chats never see each other's files; and a group's files belong to
//! the group's DeerFlow identity, not to the member who sent them.

use im_bridge::i18n::Arg;
use im_bridge_fakes::telegram::{BotMessage, Incoming};

use super::bridge::{Bridge, Platform, echo};

/// Where the agent sees an uploaded file.
const UPLOADS: &str = "/mnt/user-data/uploads/";

/// Waits for the answer to a message with an attachment: the one starting with the echo
/// of `caption`.
async fn answer_to(b: &Bridge, user: i64, caption: &str) -> String {
    let opening = echo(caption);
    let done = |m: &BotMessage| m.text.starts_with(&opening) && !m.text.ends_with('▉');
    let messages = b.tg_wait(user, "the answer", |m| m.iter().any(done)).await;
    messages.into_iter().find(done).unwrap().text
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn a_photo_reaches_the_agent_and_its_users_uploads() {
    const USER: i64 = 26_201;
    const CAPTION: &str = "what is in this photo?";
    let b = Bridge::start(&[Platform::Telegram]).await;
    let jpeg = b"\xff\xd8\xff\xe0interop photo bytes".to_vec();
    let photo = b.tg().with_photo(
        Incoming::private(USER, CAPTION).as_caption(),
        jpeg.clone(),
        64,
        48,
    );
    let sent = b.tg().inject(photo);
    let name = format!("telegram-photo-{}.jpg", sent.message_id);
    let answer = answer_to(&b, USER, CAPTION).await;
    assert!(
        answer.contains(&format!("[saw uploads: {UPLOADS}{name}")),
        "{answer}"
    );
    let owner = b.gw.owner("telegram", "user", &USER.to_string());
    let stored =
        b.gw.user_data(&owner, &b.tg_thread(USER))
            .join("uploads")
            .join(&name);
    assert_eq!(
        std::fs::read(&stored).ok(),
        Some(jpeg),
        "{}",
        stored.display()
    );
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn a_document_reaches_the_agent_and_its_users_uploads() {
    const USER: i64 = 26_202;
    const CAPTION: &str = "summarize my notes";
    let b = Bridge::start(&[Platform::Telegram]).await;
    let notes = b"interop notes\nthe bridge met the real Gateway\n".to_vec();
    let document = b.tg().with_document(
        Incoming::private(USER, CAPTION).as_caption(),
        "interop-notes.txt",
        "text/plain",
        notes.clone(),
    );
    b.tg().inject(document);
    let answer = answer_to(&b, USER, CAPTION).await;
    assert!(
        answer.contains(&format!("[saw uploads: {UPLOADS}interop-notes.txt")),
        "{answer}"
    );
    let owner = b.gw.owner("telegram", "user", &USER.to_string());
    let stored =
        b.gw.user_data(&owner, &b.tg_thread(USER))
            .join("uploads/interop-notes.txt");
    assert_eq!(
        std::fs::read(&stored).ok(),
        Some(notes),
        "{}",
        stored.display()
    );
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn a_presented_file_arrives_in_the_chat_as_a_document() {
    const USER: i64 = 26_203;
    let b = Bridge::start(&[Platform::Telegram]).await;
    b.tg_say(USER, "MAKEFILE for the interop report");
    let en = crate::support::catalog_text("en-US");
    let name = [("name", Arg::Str("report.txt"))];
    let lost = [
        "run-file-missing",
        "run-file-unavailable",
        "run-file-refused",
    ]
    .map(|id| en(id, &name));
    let messages = b
        .tg_wait(USER, "report.txt as a document", |m| {
            m.iter()
                .any(|m| m.kind == "document" || lost.iter().any(|l| m.text.contains(l.as_str())))
        })
        .await;
    for text in messages.iter().map(|m| &m.text) {
        assert!(
            !lost.iter().any(|l| text.contains(l.as_str())),
            "{text}\n{}",
            b.logs()
        );
    }
    let owner = b.gw.owner("telegram", "user", &USER.to_string());
    let written =
        b.gw.user_data(&owner, &b.tg_thread(USER))
            .join("outputs/report.txt");
    let bytes = std::fs::read(&written).unwrap_or_else(|e| panic!("{}: {e}", written.display()));
    let sent = b.tg().calls_to("sendDocument");
    let uploaded: Vec<_> = sent
        .iter()
        .filter(|c| c.ok())
        .map(|c| &c.params["document"])
        .collect();
    assert_eq!(uploaded.len(), 1, "{sent:#?}");
    assert_eq!(uploaded[0]["file_name"], "report.txt", "{uploaded:#?}");
    assert_eq!(uploaded[0]["size"], bytes.len(), "{uploaded:#?}");
    let documents = messages.iter().filter(|m| m.kind == "document").count();
    assert_eq!(documents, 1, "{messages:#?}");
    b.assert_no_failure(messages.iter().map(|m| m.text.as_str()));
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn two_private_chats_never_see_each_others_files() {
    const ALICE: i64 = 26_204;
    const BOB: i64 = 26_205;
    // Unique, so that an earlier run against the same Gateway left no copy to find.
    let secret = format!("alice-secret-{:08x}.txt", rand::random::<u32>());
    let b = Bridge::start(&[Platform::Telegram]).await;
    let document = b.tg().with_document(
        Incoming::private(ALICE, "keep this safe").as_caption(),
        &secret,
        "text/plain",
        b"for Alice only\n".to_vec(),
    );
    b.tg().inject(document);
    let answer = answer_to(&b, ALICE, "keep this safe").await;
    assert!(
        answer.contains(&secret),
        "Alice's agent saw her file: {answer}"
    );
    // Bob's agent sees no upload at all: the answer is the bare echo.
    b.tg_say(BOB, "which files do you see?");
    b.tg_wait_text(BOB, &echo("which files do you see?")).await;
    let alice = b.gw.owner("telegram", "user", &ALICE.to_string());
    let bob = b.gw.owner("telegram", "user", &BOB.to_string());
    let (alice_thread, bob_thread) = (b.tg_thread(ALICE), b.tg_thread(BOB));
    assert_ne!(alice_thread, bob_thread);
    // The file exists once, in Alice's thread of Alice's user, and nowhere else.
    let only =
        b.gw.user_data(&alice, &alice_thread)
            .join("uploads")
            .join(&secret);
    let only = only.strip_prefix(&b.gw.home).unwrap().to_owned();
    assert_eq!(b.gw.find_files(&secret), [only]);
    let bobs = b.gw.user_data(&bob, &bob_thread).join("uploads");
    assert!(!bobs.join(&secret).exists(), "{}", bobs.display());
    if !b.gw.single_user() {
        // With auth on, each private chat is its own DeerFlow user.
        assert_ne!(alice, bob);
        assert!(
            b.gw.home.join("users").join(&alice).is_dir(),
            "no directory for {alice}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn a_groups_files_belong_to_the_group_not_to_the_member_who_sent_them() {
    const GROUP: i64 = -1_002_600_000_001;
    const ALICE: i64 = 26_206;
    let plan = format!("group-plan-{:08x}.txt", rand::random::<u32>());
    let b = Bridge::start(&[Platform::Telegram]).await;
    let document = b.tg().with_document(
        Incoming::group(GROUP, ALICE, "our plan").as_caption(),
        &plan,
        "text/plain",
        b"ship on Friday\n".to_vec(),
    );
    b.tg().inject(document);
    let answer = answer_to(&b, GROUP, "our plan").await;
    assert!(
        answer.contains(&plan),
        "the group's agent saw the file: {answer}"
    );
    // Alice's private chat is another conversation, of another DeerFlow user.
    b.tg_say(ALICE, "did I send a plan?");
    b.tg_wait_text(ALICE, &echo("did I send a plan?")).await;
    let group = b.gw.owner("telegram", "group", &GROUP.to_string());
    let alice = b.gw.owner("telegram", "user", &ALICE.to_string());
    let (group_thread, alice_thread) = (b.tg_thread(GROUP), b.tg_thread(ALICE));
    assert_ne!(group_thread, alice_thread);
    let only =
        b.gw.user_data(&group, &group_thread)
            .join("uploads")
            .join(&plan);
    let only = only.strip_prefix(&b.gw.home).unwrap().to_owned();
    assert_eq!(b.gw.find_files(&plan), [only]);
    if !b.gw.single_user() {
        assert_ne!(group, alice);
    }
}
