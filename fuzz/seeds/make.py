#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/seeds/<target>/: a few real-shaped inputs per target,
taken from the adapters' fixtures and the fakes in tests/fakes (run from anywhere; it
overwrites only the files it names). Crash inputs found by fuzzing live beside them as
`crash-*` and are kept by hand, not written here."""
import json, os, struct, shutil

ROOT = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(ROOT))


def put(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def fixture(path):
    with open(os.path.join(REPO, path), "rb") as f:
        return f.read()


def js(value):
    return json.dumps(value, ensure_ascii=False)


# ---- sse: one pattern byte, then a run stream body ----
SSE = (
    ": heartbeat\n\n"
    "event: metadata\ndata: {\"run_id\":\"r1\",\"thread_id\":\"t1\"}\nid: 1766000000000-0\n\n"
    "event: messages\ndata: [{\"content\":\"Hé\",\"type\":\"AIMessageChunk\",\"id\":\"lc_run--a\"},{\"langgraph_node\":\"model\"}]\nid: 1766000000000-1\n\n"
    "event: messages\ndata: [{\"content\":\"你好，世界\",\"type\":\"AIMessageChunk\",\"id\":\"lc_run--a\"},{}]\n\n"
    "event: values\ndata: {\"messages\":[{\"type\":\"human\",\"content\":\"hi\"},{\"type\":\"ai\",\"content\":[{\"type\":\"text\",\"text\":\"Hé你好\"}],\"additional_kwargs\":{\"hide_from_ui\":false},\"tool_calls\":[{\"name\":\"present_files\",\"args\":{\"filepaths\":[\"/mnt/user-data/outputs/a.md\"]}}]}],\"goal\":{\"continuation_count\":1,\"max_continuations\":5},\"title\":\"Grüße\"}\n\n"
    "event: error\ndata: {\"message\":\"boom\",\"name\":\"ValueError\"}\n\n"
    "event: end\ndata: null\n\n"
)
put("sse", "run", b"\x37" + SSE.encode())
put("sse", "crlf", b"\x11" + SSE.replace("\n", "\r\n").encode())
put("sse", "bom_cr", b"\xf0" + b"\xef\xbb\xbf" + SSE.replace("\n", "\r").encode())
put("sse", "constructor", b"\x23" + (
    "event: messages|agent:1\ndata: [{\"lc\":1,\"type\":\"constructor\",\"id\":[\"langchain\",\"schema\",\"messages\",\"AIMessageChunk\"],"
    "\"kwargs\":{\"content\":\"ok\",\"id\":\"run-1\"}},{\"id\":\"m1\"}]\n\n"
    "event: messages-tuple\ndata: [{\"type\":\"tool\",\"content\":\"x\",\"name\":\"web_search\"},{}]\n\n"
    "event: updates\ndata: {}\n\n"
).encode())

# ---- telegram_update: a webhook body (one update) or a getUpdates result ----
for name in ["update_private_text", "update_group_reply_command", "update_photo_caption",
             "update_document", "update_edited_message", "updates_voice_audio_video"]:
    put("telegram_update", name, fixture(f"channels/telegram/tests/fixtures/{name}.json"))
updates = json.loads(fixture("channels/telegram/tests/fixtures/response_get_updates.json"))
put("telegram_update", "get_updates_result", js(updates["result"]))
put("telegram_update", "forum_topic_command", js({
    "update_id": 9, "message": {
        "message_id": 77, "date": 1767225900, "message_thread_id": 5, "is_topic_message": True,
        "chat": {"id": -1001, "type": "supergroup", "is_forum": True},
        "from": {"id": 42, "is_bot": False, "first_name": "Ada", "language_code": "zh-hans"},
        "text": "/goal@DeerBridgeBot ship it", "reply_to_message": {
            "message_id": 70, "date": 1767225800, "chat": {"id": -1001, "type": "supergroup"}}}}))

# ---- config: DeerFlow's config.yaml shapes ----
put("config", "deerflow_channels", fixture("tests/fixtures/deerflow-channels.yaml"))
put("config", "every_channel", """channels:
  langgraph_url: http://127.0.0.1:8001/api
  gateway_url: $DEER_FLOW_CHANNELS_GATEWAY_URL
  inbound_queue_maxsize: 100
  max_concurrency: 8
  shutdown_grace_period_seconds: 2.5
  session: {assistant_id: lead_agent, config: {recursion_limit: 100}, context: {thinking_enabled: true}}
  telegram:
    enabled: true
    bot_token: $TELEGRAM_BOT_TOKEN
    allowed_users: [42, "43"]
    admin_users: [42]
    locale: zh-CN
    busy_policy: queue
    webhook: {listen: 127.0.0.1:0, public_url: https://bot.example/hook, secret_token: abc}
  feishu: {enabled: true, app_id: cli_x, app_secret: $FEISHU_APP_SECRET, domain: https://open.feishu.cn, mode: webhook, verification_token: v, encrypt_key: k}
  dingtalk: {enabled: true, client_id: ding1, client_secret: s, card_template_id: "", api_url: https://api.dingtalk.com}
  qq: {enabled: true, app_id: "102000000", client_secret: s, sandbox: true, mode: webhook, webhook: {listen: 127.0.0.1:0, path: /qq}}
  discord: {enabled: true, bot_token: t, allowed_guilds: [1], mention_only: true, thread_mode: true}
  wecom: {enabled: true, bot_id: aibBot, bot_secret: $WECOM_BOT_SECRET, max_markdown_bytes: 4096}
  wechat: {enabled: true, qrcode_login_enabled: true, base_url: http://127.0.0.1:9, polling_timeout: 35, allowed_file_extensions: [pdf]}
  slack: {enabled: true}
channel_connections:
  notification_locale: en-US
bridge:
  store: postgres://im@127.0.0.1/db
  admin_listen: 127.0.0.1:9464
  internal_token: $MISSING
  goal_from_chat_timeout_seconds: 120
  max_reply_messages: 5
  conversation_ttl_days: 30
""")
put("config", "bad_values", """channels:
  max_concurrency: -1
  telegram: {enabled: yes, bot_token: $UNSET, allowed_users: [null, ""], unknown_key: 1}
bridge: {store: mysql://x, admin_listen: nowhere, extra: 1}
channel_connections: {enabled: true}
""")

# ---- markdown: markup, unit, limit bytes, then the text ----
MD = ("# Title\n\nSome **bold**, *italic*, ~~gone~~, `code` and a [link](https://x.y/?q=1&r=\"2\").\n\n"
      "> quoted <at id=all> & more\n\n- one\n- two\n  1. nested\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
      "```rust\nfn main() { println!(\"<&>\"); }\n```\n\n中文字符 👍🏽 👨‍👩‍👧 e\u0301\n")
for i, (markup, unit, limit) in enumerate([(2, 0, 40), (3, 1, 60), (4, 2, 30), (0, 0, 12), (1, 1, 255), (2, 0, 3)]):
    put("markdown", f"doc{i}", bytes([markup, unit, limit]) + MD.encode())
put("markdown", "open_fence", bytes([2, 0, 20]) + "intro\n~~~py\nprint(1)\nprint(2)\n".encode())
put("markdown", "nesting", bytes([3, 2, 16]) + ("> " * 30 + "- " * 30 + "**x** [a](b) <b>").encode())

# ---- feishu_frame: mode 0 = long connection frames separated by \0\0; 1 = webhook body ----
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def field(tag, wire, payload):
    key = varint(tag << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload

def header(k, v):
    return field(5, 2, field(1, 2, k.encode()) + field(2, 2, v.encode()))

def frame(method, headers, payload=None, seq=11):
    out = field(1, 0, seq) + field(2, 0, 22) + field(3, 0, 7) + field(4, 0, method)
    for k, v in headers:
        out += header(k, v)
    if payload is not None:
        out += field(8, 2, payload if isinstance(payload, bytes) else payload.encode())
    return out

def feishu_event(text, chat_type="p2p", extra=None):
    message = {"message_id": "om_1", "chat_id": "oc_chat", "chat_type": chat_type,
               "message_type": "text", "content": js({"text": text})}
    message.update(extra or {})
    return js({"schema": "2.0",
               "header": {"event_id": "ev1", "event_type": "im.message.receive_v1", "token": "v"},
               "event": {"sender": {"sender_id": {"open_id": "ou_alice"}, "sender_type": "user"},
                         "message": message}})

ev = feishu_event("hello @_user_1", "group", {"root_id": "om_root", "mentions": [{"key": "@_user_1", "name": "Bridge"}]})
post = feishu_event("", "group")
post_obj = json.loads(post)
post_obj["event"]["message"].update({"message_type": "post", "content": js({"title": "T", "content": [[
    {"tag": "at", "user_id": "@_user_1", "user_name": "Bridge"}, {"tag": "text", "text": "/goal ship it"},
    {"tag": "img", "image_key": "img_1"}], [{"tag": "a", "text": "link", "href": "https://x"}]]})})
half = len(ev) // 2
frames = [
    frame(0, [("type", "pong")], js({"PingInterval": 90, "ReconnectCount": 3, "ReconnectInterval": 60, "ReconnectNonce": 5})),
    frame(1, [("type", "event"), ("message_id", "m1"), ("trace_id", "t1")], ev),
    frame(1, [("type", "event"), ("message_id", "m2"), ("sum", "2"), ("seq", "1")], ev[half:], 12),
    frame(1, [("type", "event"), ("message_id", "m2"), ("sum", "2"), ("seq", "0")], ev[:half], 13),
    frame(1, [("type", "card"), ("message_id", "m3")], "{}"),
    frame(1, [("type", "event"), ("message_id", "m4")], js(post_obj)),
]
for f in frames:
    assert b"\0\0" not in f, f
put("feishu_frame", "long_connection", b"\x00" + b"\0\0".join(frames))
put("feishu_frame", "one_event", b"\x00" + frames[1])
put("feishu_frame", "webhook_event", b"\x01" + ev.encode())
put("feishu_frame", "webhook_challenge", b"\x01" + js({"type": "url_verification", "challenge": "c", "token": "v"}).encode())
def feishu_encrypt(key, plain):
    """The webhook's encryption: AES-256-CBC, key = SHA-256(encrypt_key), IV first, PKCS#7."""
    import base64, hashlib
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    iv = bytes(range(16))
    padder = padding.PKCS7(128).padder()
    data = padder.update(plain.encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + enc.update(data) + enc.finalize()).decode()
# The key is the one the target passes (`fuzz-encrypt-key`). Needs Python's
# `cryptography` package; without it the committed seed is left as it is.
try:
    put("feishu_frame", "webhook_encrypted", b"\x01" + js({"encrypt": feishu_encrypt("fuzz-encrypt-key", ev)}).encode())
except ImportError:
    print("cryptography is not installed: kept feishu_frame/webhook_encrypted as it is")

# ---- dingtalk_frame: one stream-mode text frame ----
robot = {"conversationId": "cidGROUP", "conversationType": "2", "msgId": "msg-1",
         "senderStaffId": "staff-1", "senderNick": "Ann", "senderId": "$:LWCP:x",
         "msgtype": "text", "text": {"content": "@Bridge /goal ship it"}, "robotCode": "dingrobot",
         "isInAtList": True, "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=x"}
def ding(kind, topic, data, mid="m-1"):
    return js({"specVersion": "1.0", "type": kind,
               "headers": {"appId": "a", "connectionId": "c", "contentType": "application/json",
                           "messageId": mid, "time": "1690000000000", "topic": topic},
               "data": data})
put("dingtalk_frame", "group_text", ding("CALLBACK", "/v1.0/im/bot/messages/get", js(robot)))
rich = dict(robot, conversationType="1", msgtype="richText", content={"richText": [
    {"text": "look"}, {"type": "picture", "downloadCode": "dl1"}, {"text": "here"}]})
put("dingtalk_frame", "private_rich", ding("CALLBACK", "/v1.0/im/bot/messages/get", js(rich)))
put("dingtalk_frame", "file", ding("CALLBACK", "/v1.0/im/bot/messages/get", js(dict(robot, msgtype="file", content={"downloadCode": "d", "fileName": "a.pdf"}))))
put("dingtalk_frame", "ping", ding("SYSTEM", "ping", js({"opaque": "o"})))
put("dingtalk_frame", "disconnect", ding("SYSTEM", "disconnect", js({"reason": "r"})))
put("dingtalk_frame", "event", ding("EVENT", "chat_update", "{}"))

# ---- qq_payload: mode 0 = gateway frame, 1 = webhook body; the clock is 2025-06-01T00:00Z ----
group = json.loads(fixture("channels/qq/tests/fixtures/gateway_group_at_message.json"))
group["d"]["timestamp"] = "2025-06-01T07:58:00+08:00"
c2c = json.loads(fixture("channels/qq/tests/fixtures/gateway_c2c_message.json"))
c2c["d"]["timestamp"] = "2025-05-31T23:30:00Z"
for mode in (0, 1):
    put("qq_payload", f"group_{mode}", bytes([mode]) + js(group).encode())
    put("qq_payload", f"c2c_{mode}", bytes([mode]) + js(c2c).encode())
put("qq_payload", "ready", b"\x00" + fixture("channels/qq/tests/fixtures/gateway_ready.json"))
put("qq_payload", "hello", b"\x00" + js({"op": 10, "d": {"heartbeat_interval": 41250}}).encode())
put("qq_payload", "invalid_session", b"\x00" + js({"op": 9, "d": True}).encode())
put("qq_payload", "validation", b"\x01" + js({"op": 13, "d": {"plain_token": "p", "event_ts": "1725442341"}}).encode())

# ---- discord_payload: mode 0 = MESSAGE_CREATE data, 1 = REST answer ----
def user(uid, name, bot=False):
    return {"id": uid, "username": name, "discriminator": "0", "global_name": None, "avatar": None, "bot": bot}
msg = {"id": "1400000000000000004", "channel_id": "1200000000000000002", "type": 0,
       "author": user("20", "ann"), "content": "<@1100000000000000001> /new  please",
       "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": None, "tts": False,
       "mention_everyone": False, "mentions": [user("1100000000000000001", "bridge", True)],
       "mention_roles": [], "attachments": [{"id": "5", "filename": "a.png", "size": 10,
       "url": "https://cdn.discordapp.com/attachments/1/5/a.png", "proxy_url": "https://media/a.png",
       "content_type": "image/png"}], "embeds": [], "pinned": False, "guild_id": "1300000000000000003"}
put("discord_payload", "guild_mention", b"\x00" + js(msg).encode())
dm = dict(msg, content="hello", mentions=[], attachments=[])
del dm["guild_id"]
put("discord_payload", "dm", b"\x00" + js(dm).encode())
reply = dict(msg, type=19, content="and then?", message_reference={"message_id": "1400000000000000003", "channel_id": "1200000000000000002"})
put("discord_payload", "reply", b"\x00" + js(reply).encode())
put("discord_payload", "created", b"\x01" + struct.pack("<H", 200) + b"\n" + js({"id": "1400000000000000009", "channel_id": "1200000000000000002"}).encode())
put("discord_payload", "rate_limited", b"\x01" + struct.pack("<H", 429) + b"1.5\n" + js({"retry_after": 0.25, "global": False}).encode())
put("discord_payload", "refused", b"\x01" + struct.pack("<H", 403) + b"\n" + js({"code": 50013, "message": "Missing Permissions"}).encode())

# ---- slack_payload: mode 0 = Socket Mode frame, 1 = signed Events API body, 2 = pieces ----
SLACK = "channels/slack/tests/fixtures/"
for name in ["socket_envelope_events_api", "socket_envelope_slash_commands", "socket_hello",
             "socket_disconnect", "parse_only_socket_envelope_unknown"]:
    put("slack_payload", name, b"\x00" + fixture(SLACK + name + ".json"))
for name in ["event_message_im", "event_app_mention", "event_message_file_share",
             "event_message_bot", "event_url_verification"]:
    put("slack_payload", name, b"\x01" + fixture(SLACK + name + ".json"))
put("slack_payload", "slash_command_form", b"\x01" + b"command=%2Fgoal&text=ship+it&user_id=U2147483697"
    b"&channel_id=C0LAN2Q65&team_id=T0LAN2Q3S&trigger_id=13345224609.738474920.8088930838d88f008e0")
put("slack_payload", "unsigned_pieces", b"\x02" + b"1748736000\0\0v0=00\0\0"
    + fixture(SLACK + "event_message_im.json"))

# ---- wecom_frame: one long-connection text frame (the adapter's recorded fixtures) ----
WECOM_FIXTURES = "channels/wecom/tests/fixtures"
for name in sorted(os.listdir(os.path.join(REPO, WECOM_FIXTURES))):
    if name.startswith(("msg_", "event_", "subscribe_", "ping", "upload_finish_ack")):
        put("wecom_frame", name[:-len(".json")], fixture(os.path.join(WECOM_FIXTURES, name)))

# ---- wechat_poll: a getupdates answer (the adapter's recorded fixtures), or CDN bytes ----
WECHAT_FIXTURES = "channels/wechat/tests/fixtures"
for name in ["updates_text.json", "updates_media.json", "updates_empty_without_ret.json",
             "session_expired.json"]:
    put("wechat_poll", name[:-len(".json")], fixture(os.path.join(WECHAT_FIXTURES, name)))
put("wechat_poll", "handle", "wechat-media:00112233445566778899aabbccddeeff:++//ZmFrZQ==:https://novac2c.cdn.weixin.qq.com/c2c/download?encrypted_query_param=x")
put("wechat_poll", "cipher_block", bytes(range(32)))
