//! Event streams read on the run's own task (issue 35): `runs/stream` and `join` over a
//! plain-HTTP/1.1 connection this module writes the request to and reads the response
//! from, with no connection task and no channel between the socket and the SSE parser.
//!
//! Through reqwest (hyper's pooled client) every chunk of a run stream woke two tasks: the
//! connection's, which read the socket and handed the chunk over a channel, and the run's,
//! which took it — and the hand-over's "want more" signal woke the connection's again. A
//! model's answer arrives as dozens of chunks milliseconds apart, so that was most of what
//! a streamed answer cost beyond the kernel's own reads. Here the run's task reads the
//! socket itself: one wake-up and one read per chunk, decoded straight into the parser.
//!
//! Only what a run stream needs is spoken: one request (method, path, the identity headers,
//! an optional JSON body), a response head parsed by `httparse`, and a body framed by
//! `Transfer-Encoding: chunked` (what uvicorn and hyper send for a streaming response),
//! `Content-Length`, or the connection's close. Connections are kept for the next stream
//! when a body ended cleanly, for [`IDLE_FOR`] at most, and checked with a peek before
//! reuse. Everything else (TLS, a proxy from the environment, a base with credentials)
//! stays with reqwest: the client uses this path only for a plain `http://` base it can
//! reach directly ([`Direct::for_base`]).

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// How long a connection is kept between streams: under uvicorn's default keep-alive of
/// 5 s, so the Gateway seldom closes one as it is being reused.
const IDLE_FOR: Duration = Duration::from_secs(4);
/// Idle connections kept at most; more are closed when their stream ends.
const MAX_IDLE: usize = 256;
/// The read buffer of a connection. Data passes through it into the SSE parser, so a
/// frame of any size streams through; only a response head must fit in [`MAX_HEAD`].
const READ_BUF: usize = 8 * 1024;
/// Bound on a response head.
const MAX_HEAD: usize = 64 * 1024;
/// Bound on a chunk-size or trailer line.
const MAX_LINE: usize = 4 * 1024;
/// Response headers parsed at most.
const MAX_HEADERS: usize = 64;

/// Environment variables that would send a plain-HTTP request through a proxy in reqwest;
/// with any of them set, the streams go through reqwest too.
const PROXY_VARS: [&str; 4] = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"];

/// Where a plain-HTTP base lives, and its idle connections.
pub(crate) struct Direct {
    /// What `connect` resolves: a domain or an address literal (no brackets).
    host: String,
    port: u16,
    /// The `Host` header.
    authority: String,
    /// The base's path, without a trailing `/`; request paths are appended to it.
    prefix: String,
    idle: Mutex<Vec<Idle>>,
}

struct Idle {
    io: TcpStream,
    since: Instant,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

impl Direct {
    /// The direct path for `base`, when it is a plain `http://` URL without credentials,
    /// query or fragment, and no proxy variable is set; otherwise `None` (reqwest serves).
    pub(crate) fn for_base(base: &str) -> Option<Arc<Self>> {
        let proxied = PROXY_VARS
            .iter()
            .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
        if proxied {
            return None;
        }
        Self::parse(base).map(Arc::new)
    }

    fn parse(base: &str) -> Option<Self> {
        let url = reqwest::Url::parse(base).ok()?;
        if url.scheme() != "http"
            || !url.username().is_empty()
            || url.password().is_some()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return None;
        }
        let port = url.port_or_known_default()?;
        let written = url.host_str()?;
        let host = written
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let authority = match url.port() {
            Some(port) => format!("{written}:{port}"),
            None => written.to_owned(),
        };
        Some(Self {
            host,
            port,
            authority,
            prefix: url.path().trim_end_matches('/').to_owned(),
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Sends `request` and reads the response head, on a kept connection when one is
    /// alive, else on a new one. `connect_timeout` bounds connecting only; the caller
    /// bounds the whole.
    pub(crate) async fn open(
        self: &Arc<Self>,
        request: &Request<'_>,
        connect_timeout: Duration,
    ) -> Result<Response, OpenError> {
        let io = match self.checkout() {
            Some(io) => io,
            None => self.connect(connect_timeout).await?,
        };
        let mut conn = Conn::new(io);
        let bytes = request.encode(&self.authority, &self.prefix);
        conn.io
            .write_all(&bytes)
            .await
            .map_err(OpenError::Request)?;
        let head = conn.read_head().await.map_err(OpenError::Request)?;
        let framing = head.framing();
        let body = Body {
            conn: Some(conn),
            framing,
            reusable: head.keep_alive && framing != Framing::Close,
            pool: Arc::clone(self),
        };
        Ok(Response { head, body })
    }

    /// A kept connection that is still open, newest first; stale ones are closed.
    fn checkout(&self) -> Option<TcpStream> {
        let now = Instant::now();
        loop {
            let idle = self.idle.lock().ok()?.pop()?;
            if now.duration_since(idle.since) < IDLE_FOR && is_open(&idle.io) {
                return Some(idle.io);
            }
        }
    }

    fn checkin(&self, io: TcpStream) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE
        {
            idle.push(Idle {
                io,
                since: Instant::now(),
            });
        }
    }

    async fn connect(&self, timeout: Duration) -> Result<TcpStream, OpenError> {
        let connect = async {
            let mut last = None;
            for addr in tokio::net::lookup_host((self.host.as_str(), self.port)).await? {
                match TcpStream::connect(addr).await {
                    Ok(io) => return Ok(io),
                    Err(error) => last = Some(error),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other("no_address")))
        };
        let io = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| OpenError::Connect(io::ErrorKind::TimedOut.into()))?
            .map_err(OpenError::Connect)?;
        io.set_nodelay(true).map_err(OpenError::Connect)?;
        Ok(io)
    }

    #[cfg(test)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().map(|idle| idle.len()).unwrap_or(0)
    }
}

/// Whether a kept connection is still open: a peek that would block says nothing arrived,
/// neither bytes (a server speaks first only to say goodbye) nor the close. A real
/// `recv`, not tokio's cached readiness, which may not have seen the close yet.
fn is_open(io: &TcpStream) -> bool {
    let mut probe = [MaybeUninit::<u8>::uninit(); 1];
    match socket2::SockRef::from(io).peek(&mut probe) {
        Err(error) => error.kind() == io::ErrorKind::WouldBlock,
        Ok(_) => false,
    }
}

/// Why a request got no response head.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// No connection could be made.
    Connect(io::Error),
    /// The request could not be written or its answer not read.
    Request(io::Error),
}

/// One request, as the client built it.
pub(crate) struct Request<'a> {
    pub method: &'a str,
    /// The path after the base's, starting with `/`, already percent-encoded.
    pub path: &'a str,
    /// Further headers, names in lower case, values checked as header values.
    pub headers: &'a [(&'static str, &'a [u8])],
    /// A JSON body.
    pub json: Option<&'a [u8]>,
}

impl Request<'_> {
    fn encode(&self, authority: &str, prefix: &str) -> Vec<u8> {
        let body = self.json.unwrap_or_default();
        let mut out = Vec::with_capacity(256 + self.path.len() + body.len());
        for part in [
            self.method,
            " ",
            prefix,
            self.path,
            " HTTP/1.1\r\nhost: ",
            authority,
        ] {
            out.extend_from_slice(part.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        for (name, value) in self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if self.json.is_some() {
            out.extend_from_slice(b"content-type: application/json\r\ncontent-length: ");
            out.extend_from_slice(body.len().to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }
}

/// A response head and its body, not read yet.
pub(crate) struct Response {
    pub head: Head,
    pub body: Body,
}

/// What the client reads off a response head.
#[derive(Debug, Default)]
pub(crate) struct Head {
    pub status: u16,
    pub content_type: Option<String>,
    pub content_location: Option<String>,
    transfer_encoding: Option<String>,
    content_length: Option<u64>,
    keep_alive: bool,
}

impl Head {
    /// How the body ends (RFC 9112 §6.3): chunked when that is the last transfer coding,
    /// at the close under any other, else after `Content-Length` bytes, else at the close.
    fn framing(&self) -> Framing {
        match (&self.transfer_encoding, self.content_length) {
            (Some(codings), _) => {
                let last = codings.rsplit(',').next().unwrap_or_default();
                if last.trim().eq_ignore_ascii_case("chunked") {
                    Framing::Chunked(Chunked::Size)
                } else {
                    Framing::Close
                }
            }
            (None, Some(length)) => Framing::Length(length),
            (None, None) => Framing::Close,
        }
    }
}

/// A connection and what was read off it and not decoded yet (`buf[start..end]`).
struct Conn {
    io: TcpStream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Conn {
    fn new(io: TcpStream) -> Self {
        Self {
            io,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Reads more after what is pending, moving it to the front (or growing the buffer up
    /// to `limit`) when there is no room. `Ok(0)` is the peer's close.
    fn poll_fill(&mut self, cx: &mut Context<'_>, limit: usize) -> Poll<io::Result<usize>> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else if self.buf.len() < limit {
                let mut grown = vec![0; (self.buf.len() * 2).min(limit)];
                grown[..self.end].copy_from_slice(&self.buf[..self.end]);
                self.buf = grown.into_boxed_slice();
            } else {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "head_too_long",
                )));
            }
        }
        let mut read = ReadBuf::new(&mut self.buf[self.end..]);
        std::task::ready!(Pin::new(&mut self.io).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        self.end += n;
        Poll::Ready(Ok(n))
    }

    /// The final response's head: an informational one (`1xx`, such as `103 Early Hints`)
    /// is skipped, as any HTTP/1.1 client must (RFC 9110 §15.2).
    async fn read_head(&mut self) -> io::Result<Head> {
        loop {
            match self.parse_head()? {
                Some(head) if (100..200).contains(&head.status) => continue,
                Some(head) => return Ok(head),
                None => {}
            }
            let n = std::future::poll_fn(|cx| self.poll_fill(cx, MAX_HEAD)).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    fn parse_head(&mut self) -> io::Result<Option<Head>> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let parsed = response
            .parse(self.pending())
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        let httparse::Status::Complete(len) = parsed else {
            return Ok(None);
        };
        let mut head = Head {
            status: response.code.unwrap_or_default(),
            keep_alive: response.version == Some(1),
            ..Head::default()
        };
        let text = |value: &[u8]| String::from_utf8_lossy(value).into_owned();
        for header in response.headers.iter() {
            let name = header.name;
            if name.eq_ignore_ascii_case("content-type") {
                head.content_type = Some(text(header.value));
            } else if name.eq_ignore_ascii_case("content-location") {
                head.content_location = Some(text(header.value));
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                let value = text(header.value);
                head.transfer_encoding = Some(match head.transfer_encoding.take() {
                    Some(before) => format!("{before}, {value}"),
                    None => value,
                });
            } else if name.eq_ignore_ascii_case("content-length") {
                let length = std::str::from_utf8(header.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .filter(|&l| head.content_length.is_none_or(|before| before == l))
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidData, "bad_content_length")
                    })?;
                head.content_length = Some(length);
            } else if name.eq_ignore_ascii_case("connection") {
                let value = text(header.value);
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        head.keep_alive = false;
                    } else if token.eq_ignore_ascii_case("keep-alive")
                        && response.version == Some(0)
                    {
                        head.keep_alive = true;
                    }
                }
            }
        }
        self.start += len;
        Ok(Some(head))
    }
}

/// How the body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Chunked(Chunked),
    /// Bytes still to come.
    Length(u64),
    /// Until the peer closes.
    Close,
    /// Ended.
    Done,
}

/// Where a chunked body's decoder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunked {
    /// Expecting a chunk-size line.
    Size,
    /// Bytes of the current chunk still to come.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
}

impl Framing {
    /// Decodes what `pending` holds, feeding the body's data to `sink`: how many bytes were
    /// used, and whether any data was fed. What is left needs more input.
    fn decode(
        &mut self,
        pending: &[u8],
        sink: &mut impl FnMut(&[u8]),
    ) -> io::Result<(usize, bool)> {
        let mut used = 0;
        let mut fed = false;
        loop {
            let rest = &pending[used..];
            match *self {
                Self::Done => return Ok((used, fed)),
                Self::Length(0) => *self = Self::Done,
                _ if rest.is_empty() => return Ok((used, fed)),
                Self::Close => {
                    sink(rest);
                    return Ok((pending.len(), true));
                }
                Self::Length(left) => {
                    let n = take(rest, left);
                    sink(&rest[..n]);
                    used += n;
                    *self = Self::Length(left - n as u64);
                    fed = true;
                }
                Self::Chunked(Chunked::Data(left)) => {
                    let n = take(rest, left);
                    sink(&rest[..n]);
                    used += n;
                    *self = Self::Chunked(match left - n as u64 {
                        0 => Chunked::DataEnd,
                        left => Chunked::Data(left),
                    });
                    fed = true;
                }
                Self::Chunked(Chunked::DataEnd) => {
                    if rest.len() < 2 {
                        return Ok((used, fed));
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(invalid("chunk_without_crlf"));
                    }
                    used += 2;
                    *self = Self::Chunked(Chunked::Size);
                }
                Self::Chunked(state @ (Chunked::Size | Chunked::Trailers)) => {
                    let Some(at) = memchr::memchr(b'\n', rest) else {
                        if rest.len() > MAX_LINE {
                            return Err(invalid("chunk_line_too_long"));
                        }
                        return Ok((used, fed));
                    };
                    let line = rest[..at].strip_suffix(b"\r").unwrap_or(&rest[..at]);
                    *self = match state {
                        Chunked::Trailers if line.is_empty() => Self::Done,
                        Chunked::Trailers => Self::Chunked(Chunked::Trailers),
                        _ => match chunk_size(line)? {
                            0 => Self::Chunked(Chunked::Trailers),
                            size => Self::Chunked(Chunked::Data(size)),
                        },
                    };
                    used += at + 1;
                }
            }
        }
    }
}

/// How much of `rest` belongs to a body part with `left` bytes to come.
fn take(rest: &[u8], left: u64) -> usize {
    usize::try_from(left).map_or(rest.len(), |left| left.min(rest.len()))
}

/// A response body read on the caller's task. Dropped before its end, it closes the
/// connection (which cancels a run that was started with the stream); ended cleanly on a
/// connection the server keeps open, it gives the connection back for the next stream.
pub(crate) struct Body {
    conn: Option<Conn>,
    framing: Framing,
    reusable: bool,
    pool: Arc<Direct>,
}

impl Body {
    /// Decodes what arrived into `sink`, reading the socket when nothing is pending.
    /// `Ready(Ok(true))`: data went to `sink`; `Ready(Ok(false))`: the body ended.
    pub(crate) fn poll_feed(
        &mut self,
        cx: &mut Context<'_>,
        sink: &mut impl FnMut(&[u8]),
    ) -> Poll<io::Result<bool>> {
        loop {
            let fed = self.decode(sink)?;
            if self.framing == Framing::Done {
                self.release();
                return Poll::Ready(Ok(fed));
            }
            if fed {
                return Poll::Ready(Ok(true));
            }
            let Some(conn) = self.conn.as_mut() else {
                return Poll::Ready(Ok(false));
            };
            if std::task::ready!(conn.poll_fill(cx, READ_BUF))? == 0 {
                if self.framing == Framing::Close {
                    self.framing = Framing::Done;
                    self.reusable = false;
                    continue;
                }
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }

    /// Reads the whole body (for an error's `detail`), keeping at most `limit` bytes.
    pub(crate) async fn read_prefix(mut self, limit: usize) -> Vec<u8> {
        let mut body = Vec::new();
        let mut keep = |data: &[u8]| {
            let room = limit - body.len();
            body.extend_from_slice(&data[..data.len().min(room)]);
        };
        while let Ok(true) = std::future::poll_fn(|cx| self.poll_feed(cx, &mut keep)).await {}
        body
    }

    /// Decodes the pending bytes, feeding data to `sink`; whether any was fed.
    fn decode(&mut self, sink: &mut impl FnMut(&[u8])) -> io::Result<bool> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(false);
        };
        let (used, fed) = self.framing.decode(conn.pending(), sink)?;
        conn.start += used;
        Ok(fed)
    }

    /// Gives a cleanly ended connection back to the pool, or closes it.
    fn release(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.framing == Framing::Done
            && self.reusable
            && conn.pending().is_empty()
        {
            self.pool.checkin(conn.io);
        }
    }
}

impl Drop for Body {
    /// A stream is dropped once its last event was read, often before the body's last
    /// chunk was: when the rest has arrived already, the body ends cleanly and the
    /// connection is kept; otherwise it is closed (which cancels a run still going).
    fn drop(&mut self) {
        if self.conn.is_some() {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            let _ = self.poll_feed(&mut cx, &mut |_| {});
        }
    }
}

fn invalid(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// A chunk-size line's size (hex digits, then optional `;extensions`).
fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let digits = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return Err(invalid("bad_chunk_size"));
    }
    digits.iter().try_fold(0u64, |size, &b| {
        let digit = (b as char)
            .to_digit(16)
            .ok_or_else(|| invalid("bad_chunk_size"))?;
        Ok(size << 4 | u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `wire` as reads of `size` bytes would deliver it: the body, where the
    /// decoder stopped, and the bytes it left undecoded.
    fn decode_in_pieces(
        mut framing: Framing,
        wire: &[u8],
        size: usize,
    ) -> io::Result<(Vec<u8>, Framing, usize)> {
        let mut body = Vec::new();
        let mut pending = Vec::new();
        for piece in wire.chunks(size) {
            pending.extend_from_slice(piece);
            let (used, _) = framing.decode(&pending, &mut |d| body.extend_from_slice(d))?;
            pending.drain(..used);
        }
        Ok((body, framing, pending.len()))
    }

    #[test]
    fn issue_35_a_chunked_body_decodes_the_same_however_the_reads_cut_it() {
        let wire = b"5;name=value\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\nHTTP/1.1";
        for size in 1..=wire.len() {
            let (body, framing, left) =
                decode_in_pieces(Framing::Chunked(Chunked::Size), wire, size).unwrap();
            assert_eq!(body, b"helloabcdefghijklmnopqrstuvwxyz", "reads of {size}");
            assert_eq!(framing, Framing::Done, "reads of {size}");
            assert_eq!(left, b"HTTP/1.1".len(), "the next response is left alone");
        }
    }

    #[test]
    fn issue_35_a_length_body_ends_at_its_length_and_a_close_body_at_the_close() {
        let (body, framing, left) = decode_in_pieces(Framing::Length(5), b"helloHTTP", 2).unwrap();
        assert_eq!(
            (body.as_slice(), framing, left),
            (&b"hello"[..], Framing::Done, 4)
        );
        let (body, framing, _) = decode_in_pieces(Framing::Close, b"all of it", 3).unwrap();
        assert_eq!(
            (body.as_slice(), framing),
            (&b"all of it"[..], Framing::Close)
        );
    }

    proptest::proptest! {
        /// Any body, framed in chunks of any sizes (some with extensions, a trailer or
        /// none), read in pieces of any size, decodes back to itself and leaves what
        /// follows; and no bytes at all make the decoder panic.
        #[test]
        fn issue_35_any_chunked_body_decodes_back_to_itself(
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..2048),
            cuts in proptest::collection::vec(1usize..300, 1..20),
            read in 1usize..512,
            extensions in proptest::bool::ANY,
            trailer in proptest::bool::ANY,
        ) {
            let mut wire = Vec::new();
            let mut rest = body.as_slice();
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at((*cut).min(rest.len()));
                let extension = if extensions { ";a=b" } else { "" };
                wire.extend_from_slice(format!("{:X}{extension}\r\n", chunk.len()).as_bytes());
                wire.extend_from_slice(chunk);
                wire.extend_from_slice(b"\r\n");
                rest = after;
            }
            wire.extend_from_slice(b"0\r\n");
            if trailer {
                wire.extend_from_slice(b"x-checksum: 1\r\n");
            }
            wire.extend_from_slice(b"\r\nnext");
            let (decoded, framing, left) =
                decode_in_pieces(Framing::Chunked(Chunked::Size), &wire, read).unwrap();
            proptest::prop_assert_eq!(decoded, body);
            proptest::prop_assert_eq!(framing, Framing::Done);
            proptest::prop_assert_eq!(left, 4);
        }

        #[test]
        fn issue_35_no_bytes_make_the_chunk_decoder_panic(
            wire in proptest::collection::vec(proptest::num::u8::ANY, 0..1024),
            read in 1usize..64,
        ) {
            let _ = decode_in_pieces(Framing::Chunked(Chunked::Size), &wire, read);
            let _ = decode_in_pieces(Framing::Length(300), &wire, read);
        }
    }

    #[test]
    fn issue_35_broken_chunk_framing_is_refused() {
        let long = format!("{}\r\n", "1".repeat(16));
        let endless = "a".repeat(MAX_LINE + 1);
        for wire in [
            "zz\r\n",
            "5\r\nhelloXY",
            "\r\n",
            long.as_str(),
            endless.as_str(),
        ] {
            let result = decode_in_pieces(Framing::Chunked(Chunked::Size), wire.as_bytes(), 64);
            assert!(result.is_err(), "{wire:?} gave {result:?}");
        }
    }

    #[test]
    fn issue_35_only_a_plain_http_base_is_read_directly() {
        let direct = Direct::parse("http://127.0.0.1:8001/api/").unwrap();
        assert_eq!(
            (
                direct.host.as_str(),
                direct.port,
                direct.authority.as_str(),
                direct.prefix.as_str()
            ),
            ("127.0.0.1", 8001, "127.0.0.1:8001", "/api")
        );
        let direct = Direct::parse("http://gateway/api").unwrap();
        assert_eq!((direct.port, direct.authority.as_str()), (80, "gateway"));
        let direct = Direct::parse("http://[::1]:9000").unwrap();
        assert_eq!(
            (
                direct.host.as_str(),
                direct.authority.as_str(),
                direct.prefix.as_str()
            ),
            ("::1", "[::1]:9000", "")
        );
        for base in [
            "https://gateway/api",
            "http://user:secret@gateway/api",
            "http://gateway/api?x=1",
            "not a url",
        ] {
            assert!(Direct::parse(base).is_none(), "{base}");
        }
    }

    #[test]
    fn issue_35_a_request_is_written_as_http_1_1() {
        let headers = [("accept", &b"text/event-stream"[..])];
        let request = Request {
            method: "POST",
            path: "/threads/t%201/runs/stream",
            headers: &headers,
            json: Some(b"{}"),
        };
        assert_eq!(
            String::from_utf8(request.encode("gw:8001", "/api")).unwrap(),
            "POST /api/threads/t%201/runs/stream HTTP/1.1\r\nhost: gw:8001\r\naccept: text/event-stream\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
        );
    }
}
