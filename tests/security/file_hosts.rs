//! File fetches go only to the platform's own file hosts and the Gateway's artifacts route
//! (issue 19 item 7): an inbound attachment whose URL points at another server is refused
//! before any request, and the agent is told the attachment could not be read (the
//! localized line), and a run that presents paths outside the outputs directory, or a
//! URL, makes the bridge fetch none of them.
//!
//! The "other" server is a real HTTP server on 127.0.0.1:0 that counts what reaches it; it
//! is addressed as `localhost` (a name, where the harness allows the address `127.0.0.1`)
//! or, for a port-pinned pattern, as `127.0.0.1` on its own port.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use im_bridge::i18n::Arg;
use im_bridge::simulator::Script;
use serde_json::Value;

use crate::support::catalog_text;

/// A server that answers 200 to anything and counts the requests.
struct Other {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Other {
    async fn start() -> Self {
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let app = axum::Router::new().fallback(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                "not a platform file"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// The text of the first run's human message the simulator received (a streamed run, or
/// one started and joined).
fn human_text(sim: &im_bridge::simulator::RunningSimulator) -> String {
    let run = sim
        .requests()
        .into_iter()
        .find(|r| {
            r.method == "POST" && (r.path.ends_with("/runs/stream") || r.path.ends_with("/runs"))
        })
        .unwrap_or_else(|| {
            let paths: Vec<String> = sim.requests().into_iter().map(|r| r.path).collect();
            panic!("no run among {paths:?}")
        });
    let content = &run.json().unwrap()["input"]["messages"][0]["content"];
    match content {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn unreadable(name: &str) -> String {
    catalog_text("en-US")("run-attachment-unavailable", &[("name", Arg::Str(name))])
}

#[cfg(feature = "discord")]
#[tokio::test]
async fn discord_fetches_no_attachment_off_its_file_hosts() {
    use crate::discord::harness::{Dc, Setup};
    use im_bridge_fakes::discord::Event;
    let other = Other::start().await;
    // Pinned to the fake's port: the same address on another port is not allowed either.
    let dc = Dc::start_with(Setup {
        pin_file_port: true,
        ..Setup::default()
    })
    .await;
    dc.sim.script_next_run(Script::with_answer("Seen."));
    let by_name = format!(
        "http://localhost:{}/attachments/a.png?ex=1&hm=sig",
        other.port
    );
    let by_port = format!("http://127.0.0.1:{}/attachments/b.png", other.port);
    let good = dc.fake.put_file("c.png", vec![1; 8], "image/png");
    dc.fake.push(
        &Event::guild("1300000000000000200", "1300000000000000400", "look")
            .with_attachment(&by_name, "a.png", "image/png", 8)
            .with_attachment(&by_port, "b.png", "image/png", 8)
            .with_attachment(&good, "c.png", "image/png", 8),
    );
    dc.wait_sent("the answer", "Seen.").await;
    let text = human_text(&dc.sim);
    assert!(text.contains(&unreadable("a.png")), "{text}");
    assert!(text.contains(&unreadable("b.png")), "{text}");
    assert!(
        !text.contains(&unreadable("c.png")),
        "the fake's own file was read: {text}"
    );
    assert_eq!(
        dc.fake.calls_to("attachment").len(),
        1,
        "only c.png was fetched"
    );
    dc.stop().await;
    assert_eq!(other.hits(), 0, "the other server was called");
}

#[cfg(feature = "qq")]
#[tokio::test]
async fn qq_fetches_no_attachment_off_its_file_hosts() {
    use im_bridge_fakes::qq::Event;
    let other = Other::start().await;
    let qq = crate::qq::harness::Qq::start().await;
    qq.sim.script_next_run(Script::with_answer("Seen."));
    let elsewhere = format!("localhost:{}/files/a.png?sig=x", other.port);
    let good = qq.fake.put_file("c.png", vec![1; 8], "image/png");
    qq.fake.push(
        &Event::c2c("FILEHOSTSOPENID00000000000000001", "look")
            .with_image(&elsewhere, "image/png", "a.png")
            .with_image(&good, "image/png", "c.png"),
    );
    qq.wait_reply("the answer", "Seen.").await;
    let text = human_text(&qq.sim);
    assert!(text.contains(&unreadable("a.png")), "{text}");
    assert!(
        !text.contains(&unreadable("c.png")),
        "the fake's own file was read: {text}"
    );
    assert_eq!(qq.fake.calls_to("file").len(), 1, "only c.png was fetched");
    qq.stop().await;
    assert_eq!(other.hits(), 0, "the other server was called");
}

#[cfg(feature = "dingtalk")]
#[tokio::test]
async fn dingtalk_reads_no_download_url_off_its_file_hosts() {
    use im_bridge_fakes::dingtalk::Message;
    let other = Other::start().await;
    let dt = crate::dingtalk::harness::Dt::start().await;
    dt.sim.script_next_run(Script::with_answer("Seen."));
    dt.fake.put_file_elsewhere(
        "dc-other",
        &format!("http://localhost:{}/x?sig=s", other.port),
    );
    dt.fake
        .push(&Message::p2p_picture("staff_filehosts", "dc-other").to_json());
    dt.wait_sent("the answer", "Seen.").await;
    let text = human_text(&dt.sim);
    assert!(text.contains("could not be read"), "{text}");
    dt.stop().await;
    assert_eq!(other.hits(), 0, "the other server was called");
}

#[cfg(feature = "wecom")]
#[tokio::test]
async fn wecom_reads_no_media_url_off_its_file_hosts() {
    use im_bridge_fakes::wecom::{MediaFile, Message};
    let other = Other::start().await;
    let wc = crate::wecom::harness::Wc::start().await;
    wc.sim.script_next_run(Script::with_answer("Seen."));
    let good = wc.fake.put_file(vec![7; 64], Some("photo.jpg"));
    let elsewhere = MediaFile {
        url: format!("http://localhost:{}/x?sign=s", other.port),
        ..good
    };
    wc.fake.push(&Message::image("filehosts", &elsewhere));
    wc.wait_shown("filehosts", "Seen.").await;
    let text = human_text(&wc.sim);
    assert!(text.contains("could not be read"), "{text}");
    wc.stop().await;
    assert_eq!(other.hits(), 0, "the other server was called");
}

/// Only `/mnt/user-data/outputs/…` is asked of the artifacts route; a path that climbs out
/// of it, an upload, or a URL is fetched from nowhere (the one real output is, and is sent).
#[cfg(feature = "discord")]
#[tokio::test]
async fn presented_files_outside_the_outputs_are_fetched_from_nowhere() {
    use im_bridge_fakes::discord::Event;
    let other = Other::start().await;
    let dc = crate::discord::harness::Dc::start().await;
    dc.sim.put_output("/mnt/user-data/outputs/ok.txt", "fine");
    let url = format!("http://127.0.0.1:{}/x", other.port);
    dc.sim.script_next_run(
        Script::with_answer("Here.")
            .present_files(["/mnt/user-data/outputs/../../etc/passwd"])
            .present_files(["/mnt/user-data/uploads/x"])
            .present_files([url.clone()])
            .present_files(["/mnt/user-data/outputs/ok.txt"]),
    );
    dc.fake.push(&Event::guild(
        "1300000000000000200",
        "1300000000000000400",
        "files please",
    ));
    dc.fake
        .wait_until(
            "the output sent",
            crate::discord::harness::DEADLINE,
            |fake| {
                fake.sent()
                    .iter()
                    .any(|s| s.uploads.iter().any(|u| u.bytes == b"fine"))
            },
        )
        .await
        .unwrap();
    let artifacts = crate::support::artifact_paths(&dc.sim);
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert!(artifacts[0].ends_with("/outputs/ok.txt"), "{artifacts:?}");
    dc.stop().await;
    assert_eq!(other.hits(), 0, "the URL was fetched");
}
