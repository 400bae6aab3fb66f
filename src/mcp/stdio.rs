//! The stdio transport: one JSON-RPC message per line on stdin and
//! stdout. Lines are read here, bounded and checked, before the SDK sees
//! them, so that bad input gets a JSON-RPC error instead of being dropped
//! without a word:
//!
//! | input | error code |
//! |---|---|
//! | a line over [`MAX_LINE`] bytes | -32600 (invalid request), `id` null |
//! | a line that is not JSON | -32700 (parse error), `id` null |
//! | JSON that is not one JSON-RPC message (a batch, no `method`) | -32600 |
//! | an unknown method (answered by the SDK) | -32601 |
//! | arguments that do not fit a tool, an unknown tool | -32602 |
//! | a request after a stop signal | -32000 (the server is shutting down) |
//!
//! On a stop (SIGTERM, SIGINT) the calls already running finish and are
//! answered; requests that arrive meanwhile get -32000; the server ends
//! once the calls are done and no line came for [`STOP_QUIET`], or
//! stdin ends.

use std::future::Future;
use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::Server;

/// The longest request line read, in bytes (4 MiB).
pub(crate) const MAX_LINE: usize = 4 * 1024 * 1024;
/// After a stop, how long the server waits for more lines once its calls
/// are done.
const STOP_QUIET: Duration = Duration::from_secs(2);
/// JSON-RPC's codes for what this layer refuses.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const SHUTTING_DOWN: i64 = -32000;

/// Serves `server` on stdin and stdout until stdin ends or `stop`
/// completes (the process's stop signals).
pub(crate) async fn serve(server: Server, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
    serve_on(server, tokio::io::stdin(), tokio::io::stdout(), stop).await
}

/// [`serve`] on any input and output, stopping when `stop` completes.
pub(crate) async fn serve_on<R, W>(
    server: Server,
    input: R,
    output: W,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (lines_out, writer) = spawn_writer(output);
    let (to_sdk, sdk_in) = tokio::io::duplex(1 << 20);
    let (sdk_out, from_sdk) = tokio::io::duplex(1 << 20);
    // The SDK's start waits for the client's `initialize`, which the loop
    // below passes on.
    let running = tokio::spawn(async move {
        match server.serve((sdk_in, sdk_out)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::warn!("the MCP session ended before it began: {e}"),
        }
    });
    let relay = tokio::spawn(relay_sdk_output(from_sdk, lines_out.clone()));
    let mut input = BufReader::new(input);
    let mut to_sdk = Some(to_sdk);
    tokio::pin!(stop);
    let mut stopping = false;
    loop {
        let line = if stopping {
            // Calls finish; lines that still come are refused until the
            // input is quiet.
            match tokio::time::timeout(STOP_QUIET, read_line(&mut input)).await {
                Ok(line) => line,
                Err(_) if relay.is_finished() => break,
                Err(_) => continue,
            }
        } else {
            tokio::select! {
                biased;
                () = &mut stop => {
                    stopping = true;
                    eprintln!("almanac mcp: stopping: the calls in progress are answered, new ones refused");
                    // The SDK answers what it has and ends.
                    to_sdk = None;
                    continue;
                }
                line = read_line(&mut input) => line,
            }
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(err) => {
                tracing::warn!("cannot read stdin: {err}");
                break;
            }
        };
        match admit(&line, stopping) {
            Admitted::Pass => {
                if let (Some(sdk), Line::Text(mut bytes)) = (to_sdk.as_mut(), line) {
                    bytes.push(b'\n');
                    if sdk.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
            }
            Admitted::Skip => {}
            Admitted::Answer(reply) => {
                let _ = lines_out.send(reply.to_string().into_bytes()).await;
            }
        }
    }
    drop(to_sdk);
    let _ = running.await;
    let _ = relay.await;
    drop(lines_out);
    let _ = writer.await;
    Ok(())
}

/// A line read: its bytes, or how long it was when over the limit.
enum Line {
    Text(Vec<u8>),
    TooLong(usize),
}

/// The next line without its end, reading at most [`MAX_LINE`] bytes of
/// it into memory; `None` at the end of the input.
async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<Option<Line>> {
    let mut kept = Vec::new();
    let mut length = 0usize;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok((length > 0).then(|| finish(kept, length)));
        }
        let (chunk, ended) = match memchr::memchr(b'\n', buf) {
            Some(at) => (&buf[..at], Some(at + 1)),
            None => (buf, None),
        };
        length += chunk.len();
        if length <= MAX_LINE {
            kept.extend_from_slice(chunk);
        } else {
            kept = Vec::new();
        }
        let used = ended.unwrap_or(buf.len());
        input.consume(used);
        if ended.is_some() {
            return Ok(Some(finish(kept, length)));
        }
    }
}

fn finish(mut kept: Vec<u8>, length: usize) -> Line {
    if length > MAX_LINE {
        return Line::TooLong(length);
    }
    if kept.last() == Some(&b'\r') {
        kept.pop();
    }
    Line::Text(kept)
}

/// What to do with a line.
enum Admitted {
    /// A JSON-RPC message for the SDK.
    Pass,
    /// Nothing to answer (a blank line, a notification refused).
    Skip,
    /// This error, at once.
    Answer(Value),
}

fn admit(line: &Line, stopping: bool) -> Admitted {
    let bytes = match line {
        Line::TooLong(length) => {
            return Admitted::Answer(error(
                Value::Null,
                INVALID_REQUEST,
                &format!(
                    "the request line is {length} bytes, over the limit of {MAX_LINE} (4 MiB)"
                ),
            ));
        }
        Line::Text(bytes) => bytes,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Admitted::Skip;
    }
    let message: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => {
            return Admitted::Answer(error(Value::Null, PARSE_ERROR, &format!("not JSON: {e}")));
        }
    };
    let Value::Object(fields) = &message else {
        let what = if message.is_array() {
            "batches are not supported: send one JSON-RPC message per line"
        } else {
            "a JSON-RPC message is a JSON object"
        };
        return Admitted::Answer(error(Value::Null, INVALID_REQUEST, what));
    };
    let id = fields.get("id").cloned();
    let is_response = fields.contains_key("result") || fields.contains_key("error");
    let well_formed = fields.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && (fields.get("method").is_some_and(Value::is_string) || (is_response && id.is_some()));
    if !well_formed {
        return match id {
            None if fields.contains_key("method") => Admitted::Skip,
            id => Admitted::Answer(error(
                id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "not a JSON-RPC 2.0 message: `jsonrpc` must be \"2.0\" and `method` a string",
            )),
        };
    }
    if stopping && !is_response {
        return match id {
            Some(id) => Admitted::Answer(error(id, SHUTTING_DOWN, "the server is shutting down")),
            None => Admitted::Skip,
        };
    }
    Admitted::Pass
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Copies the SDK's output, one message per line, to the writer.
async fn relay_sdk_output(from_sdk: tokio::io::DuplexStream, lines: mpsc::Sender<Vec<u8>>) {
    let mut from_sdk = BufReader::new(from_sdk).split(b'\n');
    while let Ok(Some(line)) = from_sdk.next_segment().await {
        if lines.send(line).await.is_err() {
            break;
        }
    }
}

/// The one writer of the output: whole lines, flushed each.
fn spawn_writer<W: AsyncWrite + Unpin + Send + 'static>(
    mut output: W,
) -> (mpsc::Sender<Vec<u8>>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let task = tokio::spawn(async move {
        while let Some(mut line) = rx.recv().await {
            line.push(b'\n');
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    (tx, task)
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;
