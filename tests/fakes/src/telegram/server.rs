//! The fake's HTTP edge: routing `/bot<token>/<method>`, reading parameters in every
//! encoding the Bot API accepts, holding `getUpdates` open (a newer poll ends a waiting one with
//! a 409, as Telegram does), putting the opt-in flood limiter in front of the writes, and
//! recording each call.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::skeleton::http::{BadBody, Encoding, Head, read_body};

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
    if token != shared.lock().token {
        record(&shared, &method, Value::Null, 401, None);
        return Answer::error(401, "Unauthorized").into_response();
    }
    let (params, upload) = match parse_params(request).await {
        Ok(parsed) => parsed,
        Err(answer) => return answer.into_response(),
    };
    let scripted = {
        let mut inner = shared.lock();
        inner.failures.count(&method);
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
        let bot = inner.bot.clone();
        let bot = &bot;
        let moved = methods::int(&params, "chat_id").and_then(|c| inner.migrated.get(&c).copied());
        match (scripted, moved) {
            (Some(failure), _) => failure,
            (None, Some(to)) => Answer::migrated(to),
            (None, None) => flood::guard(&mut inner, &method, &params, |inner| {
                match method.as_str() {
                    "getMe" => Answer::ok(bot.clone()),
                    "deleteWebhook" => {
                        inner.webhook = None;
                        Answer::ok(json!(true))
                    }
                    "setWebhook" => methods::set_webhook(inner, &params),
                    "getWebhookInfo" => methods::webhook_info(inner),
                    "setMyCommands" => methods::set_my_commands(inner, &params),
                    "sendMessage" => methods::send_message(inner, &params, bot),
                    "sendChatAction" => methods::send_chat_action(inner, &params),
                    "setMessageReaction" => methods::set_message_reaction(inner, &params),
                    "editMessageText" => methods::edit_message_text(inner, &params, bot),
                    "sendPhoto" => methods::send_file(inner, &params, bot, "photo", upload),
                    "sendDocument" => methods::send_file(inner, &params, bot, "document", upload),
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
    {
        let tap = &shared.lock().tap;
        if tap.receiver_count() > 0 {
            let _ = tap.send(call.clone());
        }
    }
    shared.record(call)
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
    if let Some(call) = shared.calls().get_mut(index) {
        call.status = answer.status;
        call.result = answer.body.get("result").cloned();
    }
    shared.notify();
    answer
}

/// Query, JSON, urlencoded or multipart parameters as one JSON object (the body's win);
/// the first uploaded file's bytes are returned separately.
async fn parse_params(request: Request) -> Result<(Value, Option<Vec<u8>>), Answer> {
    let head = Head::of(&request);
    let mut params: Map<String, Value> = head
        .query
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let body = read_body(&head, request, 64 << 20, Encoding::ByContentType)
        .await
        .map_err(|bad| match bad {
            BadBody::Multipart => Answer::error(400, "Bad Request: invalid multipart body"),
            BadBody::Unreadable => Answer::error(400, "Bad Request: unreadable body"),
            BadBody::Json => Answer::error(400, "Bad Request: can't parse JSON object"),
        })?;
    match body.json {
        Value::Object(fields) => params.extend(fields),
        Value::Null => {}
        _ => return Err(Answer::error(400, "Bad Request: can't parse JSON object")),
    }
    let upload = body.files.into_iter().next().map(|(_, file)| file.bytes);
    Ok((Value::Object(params), upload))
}
