//! The stdio transport's screen: every line a client sends is JSON before the SDK sees it.
//! A line that is not JSON (or not UTF-8, or longer than [`MAX_LINE`]) cannot carry an id,
//! so the SDK would drop it without a word; here it is answered with JSON-RPC's error for
//! it (`-32700` Parse error, `-32600` for an oversized line, both with `"id": null`) and
//! the session goes on. Replies and these errors reach stdout whole lines at a time.

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;

/// The longest line read from a client: a message past it is refused, not buffered.
pub const MAX_LINE: usize = 4 << 20;

/// How much the pipe between the screen and the SDK holds before the writer waits.
const PIPE: usize = 64 << 10;

/// Starts the screen between `input`/`output` and the SDK; returns the SDK's end of the
/// pipe and the task that writes to `output` (it ends once the SDK's end is dropped and
/// every reply is written).
pub(crate) fn screen<R, W>(input: R, output: W) -> (DuplexStream, tokio::task::JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sdk_end, our_end) = tokio::io::duplex(PIPE);
    let (from_sdk, to_sdk) = tokio::io::split(our_end);
    let (errors, refused) = mpsc::unbounded_channel();
    tokio::spawn(read_lines(input, to_sdk, errors));
    let writer = tokio::spawn(write_lines(from_sdk, refused, output));
    (sdk_end, writer)
}

/// The error line for a line that was not a message.
fn refusal(code: i64, message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    })
    .to_string()
}

/// Forwards each JSON line to the SDK and answers every other one; closes the SDK's
/// input when the client closes its own.
async fn read_lines<R, W>(input: R, mut to_sdk: W, errors: mpsc::UnboundedSender<String>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_LINE as u64 + 1;
        match (&mut input).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            if skip_line(&mut input).await.is_err() {
                break;
            }
            let _ = errors.send(refusal(
                -32600,
                "Invalid Request: the message is longer than 4 MiB",
            ));
            continue;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
            let _ = errors.send(refusal(-32700, &format!("Parse error: {e}")));
            continue;
        }
        let forwarded = async {
            to_sdk.write_all(text).await?;
            to_sdk.write_all(b"\n").await?;
            to_sdk.flush().await
        };
        if forwarded.await.is_err() {
            break;
        }
    }
    let _ = to_sdk.shutdown().await;
}

/// Reads and drops the rest of an oversized line.
async fn skip_line<R: AsyncRead + Unpin>(input: &mut BufReader<R>) -> std::io::Result<()> {
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let all = chunk.len();
                input.consume(all);
            }
        }
    }
}

/// Writes the SDK's lines and the screen's refusals to the client, one whole line at a
/// time, until the SDK is done.
async fn write_lines<R, W>(from_sdk: R, mut refused: mpsc::UnboundedReceiver<String>, mut output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut replies = BufReader::new(from_sdk).lines();
    loop {
        let line = tokio::select! {
            reply = replies.next_line() => match reply {
                Ok(Some(line)) => line,
                Ok(None) | Err(_) => break,
            },
            Some(error) = refused.recv() => error,
        };
        let written = async {
            output.write_all(line.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await
        };
        if written.await.is_err() {
            break;
        }
    }
}
