//! volley: a web-server benchmarking lab in one binary.
//!
//! `main` parses the command line, dispatches to one `cmd::*` module per subcommand and
//! chooses the exit code in one place: 0 success, 2 usage error (bad flags, bad URL,
//! missing file), 1 a run that failed.

mod cmd;
mod exit;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// A web-server benchmarking lab: load engine, built-in server, managed targets, studies.
#[derive(Parser)]
#[command(name = "volley", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process; boxing the big variants would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run one load test against a URL (closed loop like ab/wrk, open loop like wrk2/httperf).
    Bench(cmd::bench::Args),
    /// Serve a directory with the built-in event-driven HTTP/1.1 + HTTP/2 + CalDAV server.
    Serve(cmd::serve::Args),
    /// Print a users-file line `NAME:HASH` (bcrypt) for the password read from stdin.
    Passwd(cmd::passwd::Args),
    /// Write a deterministic fixture set (uniserve, sizes, groupware) into a directory.
    Fixtures(cmd::fixtures::Args),
    /// A short study against the built-in server; needs nothing else installed.
    Demo(cmd::demo::Args),
    /// List the web servers volley can start on this machine, with their versions.
    Targets(cmd::targets::Args),
    /// Run a study file (sweeps, repeats, capacity search) and keep every step in the store.
    #[command(subcommand)]
    Study(cmd::study::Args),
    /// List the runs kept in the results store.
    History(cmd::history::Args),
    /// Compare two runs or targets: medians, confidence intervals and their ratio.
    Compare(cmd::compare::Args),
    /// Render a run's report (HTML, Markdown, JSON) from the results store.
    Report(cmd::report::Args),
    /// Be one injector of a multi-injector run: join the bus and run the share assigned.
    Agent(cmd::agent::Args),
    /// Read a server's access log back: `log phases` cuts it into phases by active client.
    #[command(subcommand)]
    Log(cmd::log::Args),
    /// Deploy injectors on other machines: `agents manifest` writes Kubernetes manifests.
    #[command(subcommand)]
    Agents(cmd::agents::Args),
}

fn main() -> ExitCode {
    bound_malloc_arenas();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return exit::clap_error(&e),
    };
    let result = match closed_stdout_is_the_end(|| dispatch(cli.command)) {
        Some(result) => result,
        None => return ExitCode::SUCCESS,
    };
    exit::finish(result)
}

/// Caps glibc's malloc arenas at one per CPU volley may run on (at least two), unless
/// the user chose (`MALLOC_ARENA_MAX`, `GLIBC_TUNABLES`).
///
/// Why: glibc gives threads up to eight arenas per CPU, and an office day's fifty device
/// threads spread their short-lived request and answer buffers over fifteen of them,
/// each keeping its own freed memory: a 12-minute office study grew 4.3-5.0 KB/s with
/// the default and 1.6-2.8 KB/s with two arenas, and sat ~1 MB lower (issue 26,
/// the long run that stays flat). The threads that allocate at a high rate are the load
/// engine's workers and the server's, one per CPU, and they take small blocks from
/// their own thread caches before any arena: `bench/engine.py --baseline` with a build
/// without the cap read client CPU per request 1.00x [0.97, 1.08] and the server's 1.00x
/// [0.97, 1.05] (keep-alive, 64 connections, 4 paired rounds).
fn bound_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        if !chosen {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let max = libc::c_int::try_from(cpus.max(2)).unwrap_or(libc::c_int::MAX);
            // SAFETY: mallopt only sets an allocator parameter; it is called before any
            // thread exists. A refusal (0) leaves glibc's default, which is only larger.
            unsafe {
                libc::mallopt(libc::M_ARENA_MAX, max);
            }
        }
    }
}

/// Runs a command; `None` when it stopped because stdout was closed under it.
///
/// `volley targets --show-config nginx | head -1`: the reader is gone, and `println!`
/// panics on the broken pipe. Rust leaves SIGPIPE ignored, which volley needs (a server
/// closing a socket must not kill the load generator), so the end of a pipe shows up as
/// that panic: it is caught here, after unwinding has run every `Drop` on the way (a
/// managed target is stopped, a fixture tree removed), and ends the process quietly
/// with success, as `head` expects of what it reads (ripgrep does the same). Any other
/// panic goes on as before.
fn closed_stdout_is_the_end<T>(f: impl FnOnce() -> T + std::panic::UnwindSafe) -> Option<T> {
    fn is_broken_pipe(msg: &str) -> bool {
        msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe")
    }
    fn message(p: &(dyn std::any::Any + Send)) -> &str {
        p.downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("")
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_broken_pipe(message(info.payload())) {
            default_hook(info);
        }
    }));
    match std::panic::catch_unwind(f) {
        Ok(v) => Some(v),
        Err(p) if is_broken_pipe(message(&*p)) => None,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// One subcommand's `run`.
fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Bench(a) => cmd::bench::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Passwd(a) => cmd::passwd::run(a),
        Command::Fixtures(a) => cmd::fixtures::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Targets(a) => cmd::targets::run(a),
        Command::Study(a) => cmd::study::run(a),
        Command::History(a) => cmd::history::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Agent(a) => cmd::agent::run(a),
        Command::Agents(a) => cmd::agents::run(a),
        Command::Log(a) => cmd::log::run(a),
    }
}
