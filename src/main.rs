//! The `cideldill-server` binary: parse flags, set up logging on stderr, run the server.

use std::io::Write;
use std::process::ExitCode;

use cideldill_server::app;
use cideldill_server::config::{Args, Config, Env};

fn main() -> ExitCode {
    // Before any thread starts (see `sys`).
    cideldill_server::sys::limit_malloc_arenas();
    let args: Args = argh::from_env();
    let mut err = std::io::stderr();
    if args.version {
        let _ = writeln!(err, "cideldill-server {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let config = match Config::from_args(&args, &Env::from_process(), cideldill_server::ids::now())
    {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return ExitCode::from(2);
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
                cideldill_server::error::Error::Config(_) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
