//! The `fake-llm` binary: `fake-llm serve --port 0 --script FILE` starts the server,
//! prints its base URL as the first line on stdout, and serves until SIGINT or SIGTERM.
//!
//! Exit codes: 0 after a signal, 1 when the server cannot start, 2 for bad arguments or
//! a bad script file.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fake_llm::{FakeLlm, Script, Settings};

#[derive(Parser)]
#[command(
    name = "fake-llm",
    version,
    about = "A scriptable OpenAI-compatible server on 127.0.0.1"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve until SIGINT or SIGTERM; the first stdout line is the base URL.
    Serve {
        /// Port on 127.0.0.1; 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// JSON script: {"default": reply, "replies": [reply...], "tasks": {"t_<hex>": [reply...]}}.
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
        /// Require `Authorization: Bearer KEY` on /v1/ requests.
        #[arg(long, value_name = "KEY")]
        api_key: Option<String>,
        /// Characters of content per SSE chunk.
        #[arg(long, default_value_t = 16)]
        chunk_chars: usize,
        /// Milliseconds to wait before each SSE content chunk.
        #[arg(long, default_value_t = 0)]
        chunk_delay_ms: u64,
    },
}

fn main() -> ExitCode {
    let Command::Serve {
        port,
        script,
        api_key,
        chunk_chars,
        chunk_delay_ms,
    } = Cli::parse().command;

    let script = match script.as_deref().map(Script::load).transpose() {
        Ok(script) => script.unwrap_or_default(),
        Err(err) => {
            eprintln!("fake-llm: {}", one_line(&err.to_string()));
            return ExitCode::from(2);
        }
    };
    let settings = Settings {
        port,
        api_key,
        chunk_chars,
        chunk_delay: Duration::from_millis(chunk_delay_ms),
        script,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("fake-llm: cannot start the runtime: {err}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(serve(settings))
}

async fn serve(settings: Settings) -> ExitCode {
    let llm = match FakeLlm::start(settings).await {
        Ok(llm) => llm,
        Err(err) => {
            eprintln!("fake-llm: cannot listen on 127.0.0.1: {err}");
            return ExitCode::from(1);
        }
    };
    let mut stdout = std::io::stdout().lock();
    // A closed stdout only means nobody reads the URL; the server is still useful.
    let _ = writeln!(stdout, "{}", llm.base_url());
    let _ = stdout.flush();
    drop(stdout);

    if let Err(err) = until_signal().await {
        eprintln!("fake-llm: cannot wait for signals: {err}");
        return ExitCode::from(1);
    }
    drop(llm);
    ExitCode::SUCCESS
}

#[cfg(unix)]
async fn until_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result,
        _ = terminate.recv() => Ok(()),
    }
}

#[cfg(not(unix))]
async fn until_signal() -> std::io::Result<()> {
    tokio::signal::ctrl_c().await
}

/// serde_json and io errors are one line already; this keeps a stray newline in a
/// path from breaking the one-line promise.
fn one_line(message: &str) -> String {
    message.replace(['\n', '\r'], " ")
}
