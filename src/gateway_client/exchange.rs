//! One HTTP/1.1 request and its answer over a blocking socket: what a
//! command needs to ask the gateway, without an async runtime. Starting
//! one (its I/O driver, its signal pipe, a task per connection) cost a
//! short command more than the request itself.
//!
//! The request goes in one write, with its length and `Connection:
//! close`; the answer is read until its length (`Content-Length`, or
//! chunks, or the end of the connection when it gives neither). Every
//! step is bounded by one deadline; an answer that is cut short, not
//! HTTP, or late is an error, never a wait without end.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The most an answer's status line and headers may take.
const MAX_HEAD: usize = 64 * 1024;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// The most of an announced length reserved before the bytes arrive (a
/// wrong header does not allocate for ever).
const MAX_RESERVE: usize = 1024 * 1024;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    #[error("cannot connect to the gateway at {base}: {source}")]
    Connect {
        base: String,
        source: std::io::Error,
    },
    #[error("the gateway did not answer within {} s", .0.as_secs())]
    TimedOut(Duration),
    #[error("the connection to the gateway failed: {0}")]
    Io(std::io::Error),
    #[error("the gateway's answer is not HTTP: {0}")]
    Malformed(String),
    #[error("the gateway's answer ended early")]
    Truncated,
}

/// An answer: its status and body (chunks joined).
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Sends `request` (a whole HTTP/1.1 request, head and body) to `addr`
/// and reads the answer, all within `limit`. `base` names the gateway in
/// errors.
pub(crate) fn exchange(
    addr: SocketAddr,
    base: &str,
    request: &[u8],
    limit: Duration,
) -> Result<Answer, ExchangeError> {
    let deadline = Instant::now() + limit;
    let left = left_until(deadline, limit)?;
    let stream = TcpStream::connect_timeout(&addr, left).map_err(|source| {
        if is_timeout(&source) {
            ExchangeError::TimedOut(limit)
        } else {
            ExchangeError::Connect {
                base: base.to_string(),
                source,
            }
        }
    })?;
    // The request goes in one write: nothing waits for an acknowledgement.
    stream.set_nodelay(true).map_err(ExchangeError::Io)?;
    let mut conn = Connection {
        deadline,
        limit,
        stream,
        buf: Vec::with_capacity(READ_CHUNK),
        at: 0,
        ended: false,
    };
    conn.write_all(request)?;
    let (status, framing) = conn.head()?;
    let body = match framing {
        Framing::Empty => Vec::new(),
        Framing::Length(n) => conn.exactly(n)?,
        Framing::Chunked => conn.chunked()?,
        Framing::UntilClose => conn.until_close()?,
    };
    Ok(Answer { status, body })
}

/// How the body's end is known.
enum Framing {
    Empty,
    Length(usize),
    Chunked,
    UntilClose,
}

/// A connected socket, what was read from it and not yet used
/// (`buf[at..]`), and the deadline.
struct Connection {
    deadline: Instant,
    limit: Duration,
    stream: TcpStream,
    buf: Vec<u8>,
    at: usize,
    ended: bool,
}

impl Connection {
    /// The time left, or [`ExchangeError::TimedOut`] when none is.
    fn remaining(&self) -> Result<Duration, ExchangeError> {
        left_until(self.deadline, self.limit)
    }

    fn failed(&self, err: std::io::Error) -> ExchangeError {
        if is_timeout(&err) {
            ExchangeError::TimedOut(self.limit)
        } else {
            ExchangeError::Io(err)
        }
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), ExchangeError> {
        while !bytes.is_empty() {
            let left = self.remaining()?;
            let stream = &mut self.stream;
            stream
                .set_write_timeout(Some(left))
                .map_err(ExchangeError::Io)?;
            match stream.write(bytes) {
                Ok(0) => return Err(ExchangeError::Io(std::io::ErrorKind::WriteZero.into())),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.failed(e)),
            }
        }
        Ok(())
    }

    /// Reads more into the buffer; `false` at the end of the connection.
    fn fill(&mut self) -> Result<bool, ExchangeError> {
        if self.ended {
            return Ok(false);
        }
        // Bytes already used go first, so the buffer does not grow with
        // a long answer read in pieces.
        if self.at > 0 && self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        let start = self.buf.len();
        self.buf.resize(start + READ_CHUNK, 0);
        let read = loop {
            let left = match self.remaining() {
                Ok(left) => left,
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(e);
                }
            };
            let stream = &mut self.stream;
            if let Err(e) = stream.set_read_timeout(Some(left)) {
                self.buf.truncate(start);
                return Err(ExchangeError::Io(e));
            }
            match stream.read(&mut self.buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(self.failed(e));
                }
            }
        };
        self.buf.truncate(start + read);
        self.ended = read == 0;
        Ok(read > 0)
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.at..]
    }

    /// The status line and headers: the status and how the body ends.
    fn head(&mut self) -> Result<(u16, Framing), ExchangeError> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(self.unread()) {
                Ok(httparse::Status::Complete(used)) => {
                    let status = parsed.code.unwrap_or_default();
                    let framing = framing_of(status, parsed.headers)?;
                    self.at += used;
                    return Ok((status, framing));
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(ExchangeError::Malformed(e.to_string())),
            }
            if self.unread().len() > MAX_HEAD {
                return Err(ExchangeError::Malformed(format!(
                    "its head is longer than {MAX_HEAD} bytes"
                )));
            }
            if !self.fill()? {
                return Err(if self.unread().is_empty() {
                    ExchangeError::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the connection closed before an answer",
                    ))
                } else {
                    ExchangeError::Truncated
                });
            }
        }
    }

    /// The next `n` bytes of the body.
    fn exactly(&mut self, n: usize) -> Result<Vec<u8>, ExchangeError> {
        let mut body = Vec::with_capacity(n.min(MAX_RESERVE));
        loop {
            let take = self.unread().len().min(n - body.len());
            body.extend_from_slice(&self.unread()[..take]);
            self.at += take;
            if body.len() == n {
                return Ok(body);
            }
            if !self.fill()? {
                return Err(ExchangeError::Truncated);
            }
        }
    }

    /// The body up to the end of the connection.
    fn until_close(&mut self) -> Result<Vec<u8>, ExchangeError> {
        while self.fill()? {}
        let body = self.unread().to_vec();
        self.at = self.buf.len();
        Ok(body)
    }

    /// The chunks of a chunked body, joined (trailers are skipped).
    fn chunked(&mut self) -> Result<Vec<u8>, ExchangeError> {
        let mut body = Vec::new();
        loop {
            let size = loop {
                match httparse::parse_chunk_size(self.unread()) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        self.at += used;
                        break size;
                    }
                    Ok(httparse::Status::Partial) if self.unread().len() <= MAX_HEAD => {
                        if !self.fill()? {
                            return Err(ExchangeError::Truncated);
                        }
                    }
                    _ => {
                        return Err(ExchangeError::Malformed(
                            "a chunk's size is unreadable".into(),
                        ));
                    }
                }
            };
            if size == 0 {
                return Ok(body);
            }
            let size = usize::try_from(size)
                .map_err(|_| ExchangeError::Malformed("a chunk is too large".into()))?;
            body.extend(self.exactly(size)?);
            if self.exactly(2)? != b"\r\n" {
                return Err(ExchangeError::Malformed(
                    "a chunk does not end its line".into(),
                ));
            }
        }
    }
}

/// How the body of an answer with `status` and `headers` ends.
fn framing_of(status: u16, headers: &[httparse::Header<'_>]) -> Result<Framing, ExchangeError> {
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Framing::Empty);
    }
    let named = |name: &'static str| {
        headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    if named("transfer-encoding").any(|v| v.rsplit(',').next().map(str::trim) == Some("chunked")) {
        return Ok(Framing::Chunked);
    }
    let mut lengths = named("content-length");
    match (lengths.next(), lengths.next()) {
        (None, _) => Ok(Framing::UntilClose),
        (Some(n), None) => n
            .parse()
            .map(Framing::Length)
            .map_err(|_| ExchangeError::Malformed(format!("Content-Length {n:?}"))),
        (Some(_), Some(_)) => Err(ExchangeError::Malformed(
            "more than one Content-Length".into(),
        )),
    }
}

/// The time left until `deadline`, or [`ExchangeError::TimedOut`] (for
/// an exchange given `limit`) when none is.
fn left_until(deadline: Instant, limit: Duration) -> Result<Duration, ExchangeError> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or(ExchangeError::TimedOut(limit))
}

fn is_timeout(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}
