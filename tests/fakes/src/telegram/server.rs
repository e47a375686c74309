//! The fake's HTTP edge: routing `/bot<token>/<method>`, reading parameters in every
//! encoding the Bot API accepts, holding `getUpdates` open (a newer poll ends a waiting one with
//! a 409, as Telegram does), putting the opt-in flood limiter in front of the writes, and
//! recording each call.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{
    Answer, Call, MAX_POLL_HOLD, MAX_POLL_LIMIT, Scripted, Shared, files, flood, methods, update_id,
};

/// Every request: `/bot<token>/<method>` or `/file/bot<token>/<path>`.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        return files::download(&shared, rest, request.method());
    }
    let Some((token, method)) = path.strip_prefix("/bot").and_then(|r| r.split_once('/')) else {
        return Answer::error(404, "Not Found").into_response();
    };
    let method = method.to_owned();
    if token != shared.token {
        record(&shared, &method, Value::Null, 401, None);
        return Answer::error(401, "Unauthorized").into_response();
    }
    let (params, upload) = match parse_params(request).await {
        Ok(parsed) => parsed,
        Err(answer) => return answer.into_response(),
    };
    let scripted = {
        let mut inner = shared.lock();
        *inner.counts.entry(method.clone()).or_default() += 1;
        inner.scripted_failure(&method, &params)
    };
    let (scripted, lost) = match scripted {
        Some(Scripted::Answer(answer)) => (Some(answer), false),
        Some(Scripted::AnswerLost) => (None, true),
        None => (None, false),
    };
    if method == "getUpdates" && scripted.is_none() {
        return get_updates(&shared, params).await.into_response();
    }
    let answer = {
        let mut inner = shared.lock();
        match scripted {
            Some(failure) => failure,
            None => flood::guard(&mut inner, &method, &params, |inner| {
                match method.as_str() {
                    "getMe" => Answer::ok(shared.bot.clone()),
                    "deleteWebhook" => {
                        inner.webhook = None;
                        Answer::ok(json!(true))
                    }
                    "setWebhook" => methods::set_webhook(inner, &params),
                    "getWebhookInfo" => methods::webhook_info(inner),
                    "setMyCommands" => methods::set_my_commands(inner, &params),
                    "sendMessage" => methods::send_message(inner, &params, &shared.bot),
                    "sendChatAction" => methods::send_chat_action(inner, &params),
                    "editMessageText" => methods::edit_message_text(inner, &params, &shared.bot),
                    "sendPhoto" => methods::send_file(inner, &params, &shared.bot, "photo", upload),
                    "sendDocument" => {
                        methods::send_file(inner, &params, &shared.bot, "document", upload)
                    }
                    "getFile" => files::get_file(&inner.files, &params),
                    _ => Answer::error(404, "Not Found: method not found"),
                }
            }),
        }
    };
    let result = answer.body.get("result").cloned();
    record(&shared, &method, params, answer.status, result);
    if lost {
        // Done and recorded; the client never reads that it was.
        shared.stop.cancelled().await;
    }
    answer.into_response()
}

fn record(
    shared: &Shared,
    method: &str,
    params: Value,
    status: u16,
    result: Option<Value>,
) -> usize {
    let call = Call {
        method: method.to_owned(),
        params,
        at: Instant::now(),
        status,
        result,
    };
    if shared.tap.receiver_count() > 0 {
        let _ = shared.tap.send(call.clone());
    }
    let mut inner = shared.lock();
    inner.calls.push(call);
    let index = inner.calls.len() - 1;
    drop(inner);
    shared.changed.notify_waiters();
    index
}

async fn get_updates(shared: &Shared, params: Value) -> Answer {
    // As Telegram does, a newer poll ends the one still waiting with a conflict.
    let mine = {
        let mut inner = shared.lock();
        inner.polls += 1;
        inner.polls
    };
    let index = record(shared, "getUpdates", params.clone(), 0, None);
    let timeout = methods::int(&params, "timeout").unwrap_or(0).max(0) as u64;
    let limit = methods::int(&params, "limit")
        .map(|l| l.clamp(1, MAX_POLL_LIMIT as i64) as usize)
        .unwrap_or(MAX_POLL_LIMIT);
    let offset = methods::int(&params, "offset");
    let until = Instant::now() + Duration::from_secs(timeout).min(MAX_POLL_HOLD);
    let answer = loop {
        let notified = shared.changed.notified();
        {
            let mut inner = shared.lock();
            if inner.webhook.is_some() {
                break Answer::error(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
                );
            }
            if inner.polls != mine {
                break Answer::error(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                );
            }
            let ignore = std::mem::take(&mut inner.ignore_offset_once);
            let from = match offset {
                Some(o) if o > 0 && !ignore => {
                    inner.confirm_below(o);
                    o
                }
                _ => i64::MIN,
            };
            let batch: Vec<Value> = inner
                .pending
                .iter()
                .filter(|u| update_id(u) >= from)
                .take(limit)
                .cloned()
                .collect();
            if !batch.is_empty() || Instant::now() >= until {
                break Answer::ok(Value::Array(batch));
            }
            if ignore {
                inner.ignore_offset_once = true;
            }
        }
        tokio::select! {
            () = shared.stop.cancelled() => break Answer::ok(json!([])),
            _ = tokio::time::timeout_at(until, notified) => {}
        }
    };
    {
        let mut inner = shared.lock();
        if let Some(call) = inner.calls.get_mut(index) {
            call.status = answer.status;
            call.result = answer.body.get("result").cloned();
        }
    }
    shared.changed.notify_waiters();
    answer
}

/// Query, JSON, urlencoded or multipart parameters as one JSON object; the first
/// uploaded file's bytes are returned separately.
async fn parse_params(request: Request) -> Result<(Value, Option<Vec<u8>>), Answer> {
    let mut params = Map::new();
    if let Some(query) = request.uri().query() {
        for (k, v) in url_pairs(query) {
            params.insert(k, Value::String(v));
        }
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut upload = None;
    if content_type.starts_with("multipart/form-data") {
        let mut form = Multipart::from_request(request, &())
            .await
            .map_err(|_| Answer::error(400, "Bad Request: invalid multipart body"))?;
        while let Ok(Some(field)) = form.next_field().await {
            let name = field.name().unwrap_or("").to_owned();
            let file_name = field.file_name().map(str::to_owned);
            let mime = field.content_type().map(str::to_owned);
            let bytes = field
                .bytes()
                .await
                .map_err(|_| Answer::error(400, "Bad Request: invalid multipart body"))?;
            match file_name {
                Some(file_name) => {
                    params.insert(
                        name,
                        json!({"file_name": file_name, "content_type": mime, "size": bytes.len()}),
                    );
                    upload.get_or_insert(bytes.to_vec());
                }
                None => {
                    params.insert(
                        name,
                        Value::String(String::from_utf8_lossy(&bytes).into_owned()),
                    );
                }
            }
        }
    } else {
        let body = axum::body::to_bytes(request.into_body(), 64 << 20)
            .await
            .map_err(|_| Answer::error(400, "Bad Request: unreadable body"))?;
        if content_type.starts_with("application/json") && !body.is_empty() {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(map)) => params.extend(map),
                _ => return Err(Answer::error(400, "Bad Request: can't parse JSON object")),
            }
        } else if content_type.starts_with("application/x-www-form-urlencoded") {
            for (k, v) in url_pairs(&String::from_utf8_lossy(&body)) {
                params.insert(k, Value::String(v));
            }
        }
    }
    Ok((Value::Object(params), upload))
}

fn url_pairs(text: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://x/?{text}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}
