//! The `cideldill-server` binary: parse flags, set up logging on stderr, run the server.
//!
//! Exit status: 0 ok (`--help` and `--version` too), 1 a runtime failure (the port cannot be
//! bound, the database cannot be opened, the joined server went away), 2 a usage or
//! configuration error (a bad flag or flag value, a bad MCP clients file). `--help` and
//! `--version` print to stdout, as is the convention, and nothing else in this file does:
//! stdout belongs to the MCP stdio transport (tidy-checked).

use std::io::Write;
use std::process::ExitCode;

use argh::FromArgs;
use cideldill_server::app;
use cideldill_server::config::{Args, Config, Env};

/// A usage or configuration error.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    // Before any thread starts (see `sys`).
    cideldill_server::sys::limit_malloc_arenas();
    let mut err = std::io::stderr();
    let args = match parse_args() {
        Ok(args) => args,
        Err(code) => return code,
    };
    if args.version {
        return help_or_version_to_stdout(&format!(
            "cideldill-server {}\n",
            env!("CARGO_PKG_VERSION")
        ));
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let config = match Config::from_args(&args, &Env::from_process(), cideldill_server::ids::now())
        .and_then(|c| c.check_paths(&args).map(|()| c))
    {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return ExitCode::from(USAGE_ERROR);
        }
    };
    if config.allow_remote && !cideldill_server::config::is_loopback_host(&config.host) {
        log::warn!(
            "binding {} with --allow-remote: anyone who reaches this port can evaluate code in the debugged \
             program, and every open connection holds a thread (up to --max-connections). Use only on a \
             trusted network.",
            config.host
        );
    }
    match app::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            // A configuration error (such as a bad MCP clients file) exits 2, like a bad flag.
            match e {
                cideldill_server::error::Error::Config(_) => ExitCode::from(USAGE_ERROR),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

/// The flags of this process. `--help` prints the grouped help and exits 0; a flag argh cannot
/// parse (unknown, missing or bad value, an argument that is not UTF-8) is reported on stderr
/// and exits 2, like every other usage error.
fn parse_args() -> Result<Args, ExitCode> {
    let mut strings = Vec::new();
    for arg in std::env::args_os().skip(1) {
        match arg.into_string() {
            Ok(s) => strings.push(s),
            Err(bad) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "error: the argument {bad:?} is not valid UTF-8"
                );
                return Err(ExitCode::from(USAGE_ERROR));
            }
        }
    }
    let refs: Vec<&str> = strings.iter().map(String::as_str).collect();
    match Args::from_args(&["cideldill-server"], &refs) {
        Ok(args) => Ok(args),
        Err(early) if early.status.is_ok() => Err(help_or_version_to_stdout(
            &cideldill_server::config::grouped_help(),
        )),
        Err(early) => {
            let _ = writeln!(
                std::io::stderr(),
                "{}\nRun cideldill-server --help for more information.",
                early.output.trim_end()
            );
            Err(ExitCode::from(USAGE_ERROR))
        }
    }
}

/// Writes the `--help` or `--version` text to stdout, the only output of this file there. A
/// closed stdout (`cideldill-server --help | head -1`) is not an error.
fn help_or_version_to_stdout(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
