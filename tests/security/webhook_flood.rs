//! Issue 27, finding 1: webhooks could be shut off without credentials. With the daemon
//! serving a platform's webhook, 200 connections from one address trickle bodies that pass
//! the header checks (Feishu's and QQ's signatures need the body) and 1,500 connections
//! from another address sit idle; a signed event from the platform's address must still be
//! answered within a second, on Feishu, QQ, Telegram and Slack (the Events API).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use im_bridge::simulator::Script;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use crate::feishu::harness::Fs;
use crate::qq::harness::{Qq, Setup};
use crate::telegram::harness::{Mode, Tg};

/// How long a signed event may take while the flood holds its connections.
const PROMPT: Duration = Duration::from_secs(1);

/// Opens the flood against `url`'s address: 200 bodies trickling from 127.0.0.2, 1,500
/// idle connections from 127.0.0.3. Keep the streams to keep the connections.
async fn flood(url: &str) -> Vec<TcpStream> {
    let parsed = reqwest::Url::parse(url).unwrap();
    let addr = SocketAddr::new(
        parsed.host_str().unwrap().parse().unwrap(),
        parsed.port().unwrap(),
    );
    let slow: IpAddr = "127.0.0.2".parse().unwrap();
    let idle: IpAddr = "127.0.0.3".parse().unwrap();
    let trickle = format!(
        "POST {} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{",
        parsed.path()
    );
    let mut held = Vec::with_capacity(1_700);
    for _ in 0..200 {
        let mut stream = connect_from(slow, addr).await;
        // Refused at once (503) or read slowly: either way the stream stays ours.
        let _ = stream.write_all(trickle.as_bytes()).await;
        held.push(stream);
    }
    for _ in 0..1_500 {
        held.push(connect_from(idle, addr).await);
    }
    held
}

async fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    socket.connect(to).await.unwrap()
}

#[tokio::test]
async fn issue_27_a_signed_feishu_event_is_answered_through_a_flood() {
    use im_bridge_fakes::feishu::Event;
    let fs = Fs::start_webhook().await;
    fs.wait_webhook_served().await;
    let _flood = flood(fs.webhook_url.as_deref().unwrap()).await;
    fs.sim
        .script_next_run(Script::with_answer("Through the flood."));
    let event = Event::text("oc_flood", "ou_flood", "still there?").to_json();
    let (headers, body) = fs.fake.webhook_event(&event, true);
    let started = Instant::now();
    let (status, _) = fs.post_webhook(&headers, body).await;
    assert_eq!(status, 200);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    fs.wait_card("the answer", "Through the flood.").await;
    // The flood still holds its connections: the daemon stops anyway, its webhook host
    // closing them once its shutdown drain (5 s) is over. The other platforms' tests end
    // their floods first, since the drain is the shared host's, not the platform's.
    fs.stop().await;
}

#[tokio::test]
async fn issue_27_a_signed_qq_event_is_answered_through_a_flood() {
    use im_bridge_fakes::qq::Event;
    let qq = Qq::start_with(Setup {
        webhook: true,
        ..Setup::default()
    })
    .await;
    qq.wait_webhook_served().await;
    let flood = flood(qq.webhook_url.as_deref().unwrap()).await;
    qq.sim
        .script_next_run(Script::with_answer("Through the flood.").chunks(1));
    let event = qq
        .fake
        .webhook_event(&Event::c2c("FLOODOPENID", "still there?"));
    let started = Instant::now();
    let (status, _) = qq.post(&event).await;
    assert_eq!(status, 200);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    // The Feishu test waits out the shutdown drain with the flood held; here it only
    // delays the stop.
    drop(flood);
    qq.stop().await;
}

#[cfg(feature = "slack")]
#[tokio::test]
async fn issue_30_a_signed_slack_event_is_answered_through_a_flood() {
    use crate::slack::harness::{Setup as SlSetup, Sl};
    use im_bridge_fakes::slack::{Event, HttpRequest, SIGNING_SECRET};
    let sl = Sl::start_with(SlSetup {
        http: true,
        ..SlSetup::default()
    })
    .await;
    let flood = flood(sl.webhook_url.as_deref().unwrap()).await;
    sl.sim
        .script_next_run(Script::with_answer("Through the flood.").chunks(1));
    let event = Event::dm("D0FLOOD001", "U0FLOOD001", "still there?");
    sl.fake
        .add_message("D0FLOOD001", event.id(), "U0FLOOD001", None);
    let request = HttpRequest::event(&event.to_json()).signed(SIGNING_SECRET);
    let started = Instant::now();
    let (status, _) = sl.post(&request).await;
    assert_eq!(status, 200);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    sl.wait_answer("D0FLOOD001", event.id(), "Through the flood.")
        .await;
    // As on QQ: the Feishu test waits out the shutdown drain with the flood held.
    drop(flood);
    sl.stop().await;
}

#[tokio::test]
async fn issue_27_a_telegram_update_with_its_secret_is_answered_through_a_flood() {
    use im_bridge_fakes::telegram::Incoming;
    const SECRET: &str = "flood-Secret_27";
    let tg = Tg::start_in(Mode::Webhook {
        secret: SECRET,
        path: "/telegram/flood",
    })
    .await;
    let (url, _) = tg
        .fake
        .wait_for_call("setWebhook", crate::telegram::harness::DEADLINE, |c| {
            c.method == "setWebhook" && c.ok()
        })
        .await
        .map(|_| tg.fake.webhook().unwrap())
        .unwrap();
    let _flood = flood(&url).await;
    tg.sim
        .script_next_run(Script::with_answer("Through the flood.").chunks(1));
    let update = tg
        .fake
        .make_update(Incoming::private(27_027, "still there?"));
    let started = Instant::now();
    assert_eq!(
        tg.fake.deliver_webhook(&update.update, Some(SECRET)).await,
        Ok(200)
    );
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    tg.stop().await;
}
