//! The kit's HTTP helpers against an in-test server on loopback: bounds, hosts, redirects,
//! and errors that never carry a URL.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;

use super::*;

/// Serves `/small` (5 bytes), `/big` (2000 bytes), `/chunked` (2000 bytes, no length),
/// `/gone` (404), `/hop` (a redirect to `/small` on the same host) and `/away` (a redirect
/// to another host). Returns the base URL.
async fn serve() -> String {
    let app = Router::new()
        .route("/small", get(|| async { "hello" }))
        .route("/big", get(|| async { vec![b'x'; 2000] }))
        .route(
            "/chunked",
            get(|| async {
                let chunks = (0..20).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 100]));
                axum::body::Body::from_stream(futures_util::stream::iter(chunks))
            }),
        )
        .route("/gone", get(|| async { StatusCode::NOT_FOUND }))
        .route("/hop", get(|| async { Redirect::temporary("/small") }))
        .route(
            "/away",
            get(|| async {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, "http://localhost:9/secret?sig=1")],
                )
                    .into_response()
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn loopback() -> FileHosts {
    FileHosts::new(["127.0.0.1"]).unwrap()
}

#[tokio::test]
async fn downloads_are_bounded_by_length_and_while_reading() {
    let base = serve().await;
    let client = file_client(&loopback()).unwrap();
    let hosts = loopback();
    let ok = download(&client, &hosts, &format!("{base}/small"), 5).await;
    assert_eq!(ok.unwrap().as_ref(), b"hello");
    for path in ["big", "chunked"] {
        let e = download(&client, &hosts, &format!("{base}/{path}"), 1000).await;
        assert!(
            matches!(e, Err(HttpError::TooLarge { limit: 1000 })),
            "{path}: {e:?}"
        );
    }
    let e = download(&client, &hosts, &format!("{base}/gone"), 10).await;
    assert!(
        matches!(e, Err(HttpError::Status { status: 404, .. })),
        "{e:?}"
    );
}

#[tokio::test]
async fn downloads_go_only_to_listed_hosts_and_plain_urls() {
    let base = serve().await;
    let client = file_client(&loopback()).unwrap();
    let elsewhere = FileHosts::new(["cdn.example.com"]).unwrap();
    let e = download(&client, &elsewhere, &format!("{base}/small"), 10).await;
    assert!(matches!(e, Err(HttpError::HostNotAllowed)), "{e:?}");
    for bad in [
        "ftp://127.0.0.1/x",
        "http://user:pw@127.0.0.1/x",
        "not a url",
        "file:///etc/passwd",
    ] {
        let e = download(&client, &loopback(), bad, 10).await;
        assert!(matches!(e, Err(HttpError::BadUrl)), "{bad}: {e:?}");
    }
}

#[tokio::test]
async fn a_file_redirect_is_followed_only_to_a_listed_host() {
    let base = serve().await;
    let client = file_client(&loopback()).unwrap();
    let hop = download(&client, &loopback(), &format!("{base}/hop"), 10).await;
    assert_eq!(hop.unwrap().as_ref(), b"hello");
    let away = download(&client, &loopback(), &format!("{base}/away"), 10).await;
    assert!(
        matches!(away, Err(HttpError::Status { status: 302, .. })),
        "{away:?}"
    );
}

#[tokio::test]
async fn an_api_client_follows_no_redirect_and_answers_are_bounded() {
    let base = serve().await;
    let http = client().unwrap();
    let hop = http.get(format!("{base}/hop")).send().await.unwrap();
    assert_eq!(hop.status(), StatusCode::TEMPORARY_REDIRECT);
    let small = http.get(format!("{base}/small")).send().await.unwrap();
    assert_eq!(read_answer("small", small, 5).await.unwrap(), b"hello");
    let big = http.get(format!("{base}/chunked")).send().await.unwrap();
    let e = read_answer("chunked", big, 1000).await.unwrap_err();
    assert!(
        matches!(e, HttpError::Decode { op: "chunked", .. }),
        "{e:?}"
    );
    assert!(e.is_transient() && e.may_have_delivered());
}

#[tokio::test]
async fn transport_errors_carry_no_url_and_say_whether_anything_left() {
    // A port nothing listens on: the connect fails, so nothing was sent.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let error = client()
        .unwrap()
        .get(format!("http://{addr}/path?token=SECRET-1"))
        .send()
        .await
        .unwrap_err();
    let e = HttpError::transport("probe", error);
    assert!(!e.may_have_delivered() && e.is_transient());
    let text = format!("{e} {e:?}");
    assert!(
        !text.contains("SECRET-1") && !text.contains("/path"),
        "{text}"
    );
    assert!(matches!(ChannelError::from(e), ChannelError::Transport(_)));
}

#[test]
fn failures_map_onto_channel_errors() {
    let wait = Duration::from_secs(3);
    assert!(matches!(
        ChannelError::from(HttpError::RetryAfter(wait)),
        ChannelError::RetryAfter(d) if d == wait
    ));
    assert!(matches!(
        ChannelError::from(HttpError::TooLarge { limit: 9 }),
        ChannelError::TooLarge { limit: 9 }
    ));
    let server = HttpError::Status {
        op: "send",
        status: 502,
    };
    assert!(server.may_have_delivered());
    assert!(matches!(
        ChannelError::from(server),
        ChannelError::Transport(_)
    ));
    let refused = HttpError::Status {
        op: "send",
        status: 403,
    };
    assert!(!refused.is_transient() && !refused.may_have_delivered());
    assert!(matches!(
        ChannelError::from(refused),
        ChannelError::Rejected { .. }
    ));
    let id = HttpError::bad_id("message id", &"x".repeat(500));
    let HttpError::BadId { value, .. } = &id else {
        panic!("{id:?}");
    };
    assert_eq!(value.len(), 64);
    assert!(matches!(
        ChannelError::from(id),
        ChannelError::Rejected { .. }
    ));
}

#[test]
fn file_urls_are_plain_http() {
    assert!(file_url(" https://cdn.example.com/a.png ").is_some());
    assert!(file_url("http://127.0.0.1:8080/a").is_some());
    for bad in [
        "//cdn.example.com/a",
        "https://u@h/a",
        "data:text/plain,x",
        "",
    ] {
        assert!(file_url(bad).is_none(), "{bad}");
    }
}

#[tokio::test]
async fn a_call_keeps_the_status_headers_and_bounded_answer() {
    let (base, http) = (serve().await, client().unwrap());
    let answer = call("small", http.get(format!("{base}/small")), 5)
        .await
        .unwrap();
    assert_eq!(answer.status, reqwest::StatusCode::OK);
    assert_eq!(answer.headers[header::CONTENT_LENGTH], "5");
    assert_eq!(answer.body, b"hello");
    let gone = call("gone", http.get(format!("{base}/gone")), 5).await;
    assert_eq!(gone.unwrap().status, reqwest::StatusCode::NOT_FOUND);
    let big = call("big", http.get(format!("{base}/big")), 1000).await;
    assert!(
        matches!(&big, Err(HttpError::Decode { op: "big", .. })),
        "{big:?}"
    );
    // A request that cannot leave names its operation, not its URL (which may carry a
    // token).
    let request = http.post("http://127.0.0.1:1/bot123:SECRET/getMe");
    let error = call("getMe", request, 100).await.unwrap_err();
    assert!(
        matches!(
            error,
            HttpError::Transport {
                op: "getMe",
                sent: false,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        !format!("{error} {error:?}").contains("SECRET"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_call_answered_with_a_refusal_is_checked_into_its_status() {
    let base = serve().await;
    let http = client().unwrap();
    let gone = call("gone", http.get(format!("{base}/gone")), 100)
        .await
        .unwrap();
    let refused = gone.checked("gone");
    assert!(
        matches!(
            refused,
            Err(HttpError::Status {
                op: "gone",
                status: 404
            })
        ),
        "{refused:?}"
    );
    let small = send("small", http.get(format!("{base}/small")))
        .await
        .unwrap();
    assert_eq!(checked("small", small).unwrap().status(), StatusCode::OK);
}

#[test]
fn a_rate_limit_waits_what_was_named_within_bounds() {
    let wait = |named| match HttpError::rate_limited(named) {
        HttpError::RetryAfter(wait) => wait,
        other => panic!("{other:?}"),
    };
    assert_eq!(wait(None), DEFAULT_RETRY_AFTER);
    assert_eq!(wait(Some(Duration::from_secs(7))), Duration::from_secs(7));
    assert_eq!(wait(Some(Duration::MAX)), MAX_RETRY_AFTER);
}

#[test]
fn codes_and_ids_keep_only_what_cannot_carry_text() {
    assert_eq!(
        clean_code("bad code <b> \"x-y.z\"", 64, &['_']),
        "badcodebxyz"
    );
    assert_eq!(
        clean_code("Forbidden.Qps-Limit", 64, &['.', '-']),
        "Forbidden.Qps-Limit"
    );
    assert_eq!(clean_code(&"x".repeat(100), 8, &[]).len(), 8);
    assert!(is_plain_id("oc_a-1", 64));
    for refused in ["", "a/b", "a b", "a?b", &"x".repeat(65)] {
        assert!(!is_plain_id(refused, 64), "{refused:?}");
    }
}

#[test]
fn a_download_is_labeled_by_its_headers() {
    use reqwest::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderMap, HeaderValue};
    let label = |disposition: &[u8], kind: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_DISPOSITION,
            HeaderValue::from_bytes(disposition).unwrap(),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_str(kind).unwrap());
        label_of(&headers)
    };
    let plain = label(b"attachment; filename=\"report.pdf\"", "application/pdf");
    assert_eq!(plain.filename.as_deref(), Some("report.pdf"));
    assert_eq!(plain.mime_type.as_deref(), Some("application/pdf"));
    // RFC 6266's extended name wins, percent-decoded; a generic type says nothing.
    let extended = label(
        b"attachment; filename=\"r.docx\"; filename*=UTF-8''%E5%91%A8%E6%8A%A5.docx",
        "application/octet-stream",
    );
    assert_eq!(extended.filename.as_deref(), Some("周报.docx"));
    assert_eq!(extended.mime_type, None);
    // A raw UTF-8 name (as WeCom writes it), and a broken extended one beside a plain one.
    let raw = label(
        "attachment; filename=\"季度报告.xlsx\"".as_bytes(),
        "text/plain; charset=utf-8",
    );
    assert_eq!(raw.filename.as_deref(), Some("季度报告.xlsx"));
    assert_eq!(raw.mime_type.as_deref(), Some("text/plain"));
    let broken = label(b"attachment; filename*=nonsense; filename=a.txt", "x");
    assert_eq!(broken.filename.as_deref(), Some("a.txt"));
    assert_eq!(broken.mime_type, None);
    assert_eq!(label(b"inline", "image/png").filename, None);
}
