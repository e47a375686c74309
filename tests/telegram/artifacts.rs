//! Files back (issue 14): the files an agent presents are read from the Gateway and sent
//! after the answer (a PDF with `sendDocument`, a PNG with `sendPhoto`, replying to the
//! answer); a file over Telegram's 50 MB or missing is named in the answer; a path
//! outside `/mnt/user-data/outputs/` is never fetched, and a file the `present_files` tool
//! refused is neither fetched nor named.

use im_bridge::simulator::{HOST_OUTPUTS, Script};
use im_bridge_fakes::telegram::{Call, Incoming};

use super::USER;
use super::harness::{DEADLINE, Tg};

const OUTPUTS: &str = "/mnt/user-data/outputs";
const PDF: &[u8] = b"%PDF-1.7\n% a tiny report\n%%EOF\n";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";

#[tokio::test]
async fn issue_14_presented_files_arrive_after_the_answer_and_the_rest_are_named() {
    let tg = Tg::start().await;
    tg.ready().await;
    tg.sim.put_output(format!("{OUTPUTS}/report.pdf"), PDF);
    tg.sim.put_output(format!("{OUTPUTS}/chart.png"), PNG);
    // One byte over Telegram's 50 MB: refused from its Content-Length, never transferred.
    tg.sim.put_output(
        format!("{OUTPUTS}/huge.bin"),
        vec![0u8; 50 * 1024 * 1024 + 1],
    );
    tg.sim.script_next_run(
        Script::with_answer("Here are your files.")
            .chunks(1)
            .present_files([
                format!("{OUTPUTS}/report.pdf"),
                format!("{OUTPUTS}/chart.png"),
                format!("{OUTPUTS}/huge.bin"),
                format!("{OUTPUTS}/gone.txt"),
            ])
            .present_files(["/mnt/user-data/uploads/secret.txt"]),
    );
    let asked = tg.fake.inject(Incoming::private(USER, "make me a report"));
    let calls = tg
        .fake
        .wait_for("both files", DEADLINE, |calls| {
            ["sendDocument", "sendPhoto"]
                .iter()
                .all(|m| calls.iter().any(|c| c.ok() && c.method == *m))
        })
        .await
        .unwrap();
    let answer_at = calls
        .iter()
        .position(|c| {
            c.ok()
                && c.text()
                    .is_some_and(|t| t.starts_with("Here are your files."))
        })
        .expect("the answer");
    let answer = calls[answer_at].text().unwrap();
    assert!(
        answer.contains("Created 4 files: 📎 report.pdf, chart.png, huge.bin, gone.txt"),
        "{answer}"
    );
    assert!(
        answer.contains("huge.bin is too big to send here (the limit is 50 MB)"),
        "{answer}"
    );
    assert!(
        answer.contains("I couldn't find gone.txt among the agent's files"),
        "{answer}"
    );
    let upload = |method: &str| -> (usize, &Call) {
        calls
            .iter()
            .enumerate()
            .find(|(_, c)| c.ok() && c.method == method)
            .unwrap()
    };
    let (doc_at, doc) = upload("sendDocument");
    let (photo_at, photo) = upload("sendPhoto");
    assert!(
        doc_at > answer_at && photo_at > answer_at,
        "files go after the answer"
    );
    assert_eq!(doc.params["document"]["file_name"], "report.pdf");
    assert_eq!(doc.params["document"]["size"], PDF.len());
    assert_eq!(photo.params["photo"]["file_name"], "chart.png");
    assert_eq!(photo.params["photo"]["size"], PNG.len());
    let reply_to = |c: &Call| {
        let p = &c.params["reply_parameters"];
        let p: serde_json::Value = match p.as_str() {
            Some(s) => serde_json::from_str(s).unwrap(),
            None => p.clone(),
        };
        p["message_id"].as_i64()
    };
    let answer_id = calls[answer_at].result.as_ref().unwrap()["message_id"].as_i64();
    assert!(answer_id.is_some());
    assert_eq!(reply_to(doc), answer_id, "the file answers the answer");
    assert_eq!(reply_to(photo), answer_id);
    assert_ne!(answer_id, Some(asked.message_id));
    // Only outputs are ever asked for, and the oversized file's bytes never came over.
    let fetched = crate::support::artifact_paths(&tg.sim);
    assert_eq!(fetched.len(), 4, "{fetched:?}");
    assert!(
        fetched
            .iter()
            .all(|p| p.contains("/artifacts/mnt/user-data/outputs/")),
        "{fetched:?}"
    );
    tg.stop().await;
}

/// What DeerFlow's `present_files` recorded is what arrives: a file presented by its host
/// path under the thread's outputs directory is read back by its virtual path and sent,
/// while a call the tool refused (one path outside the outputs refuses them all) or that
/// raised is neither fetched nor named.
#[tokio::test]
async fn only_files_the_tool_recorded_are_sent() {
    let tg = Tg::start().await;
    tg.ready().await;
    for name in ["report.pdf", "draft.pdf", "broken.pdf"] {
        tg.sim.put_output(format!("{OUTPUTS}/{name}"), PDF);
    }
    tg.sim.script_next_run(
        Script::with_answer("Here is the report.")
            .chunks(1)
            .present_files([format!("{HOST_OUTPUTS}/report.pdf")])
            .present_files([
                format!("{OUTPUTS}/draft.pdf"),
                "/mnt/user-data/uploads/secret.txt".to_owned(),
            ])
            .present_files_raising([format!("{OUTPUTS}/broken.pdf")]),
    );
    tg.fake.inject(Incoming::private(USER, "the report"));
    let calls = tg
        .fake
        .wait_for("the report", DEADLINE, |calls| {
            calls.iter().any(|c| c.ok() && c.method == "sendDocument")
        })
        .await
        .unwrap();
    let answer = calls
        .iter()
        .find_map(|c| {
            c.text()
                .filter(|t| c.ok() && t.starts_with("Here is the report."))
        })
        .expect("the answer");
    assert!(answer.contains("Created a file: 📎 report.pdf"), "{answer}");
    assert!(
        !["draft", "broken", "secret"]
            .iter()
            .any(|name| answer.contains(name)),
        "{answer}"
    );
    let documents: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "sendDocument")
        .map(|c| c.params["document"]["file_name"].clone())
        .collect();
    assert_eq!(documents, ["report.pdf"]);
    let fetched = crate::support::artifact_paths(&tg.sim);
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    assert!(
        fetched[0].ends_with("/artifacts/mnt/user-data/outputs/report.pdf"),
        "{fetched:?}"
    );
    tg.stop().await;
}
