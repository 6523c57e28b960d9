//! The command line as a newcomer meets it: `--version` and `--help` on stdout (the help grouped
//! by face under a short usage), every usage error exiting 2 with a message on stderr, and a
//! start-up banner that says what to do next.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{deadline, Server, TempDir};

/// Runs the binary with `args` to its end (within the deadline), in an empty home.
fn run(args: &[&str]) -> Output {
    let home = TempDir::new("cli");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
        .args(args)
        .env("CIDELDILL_HOME", home.path())
        .env("CIDELDILL_PORT_FILE", home.path().join("port"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cideldill-server");
    let until = Instant::now() + deadline();
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("cideldill-server {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn version_prints_on_stdout_and_exits_0() {
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        format!("cideldill-server {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn help_prints_the_flags_grouped_by_face_on_stdout() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    assert_eq!(help, cideldill_server::config::grouped_help());
    assert!(help.starts_with("Usage: cideldill-server "), "{help}");
    for line in help.lines() {
        assert!(line.chars().count() <= 80, "a long line: {line}");
    }
    let mut at = 0;
    for (title, flags) in cideldill_server::config::FLAG_GROUPS {
        let heading = format!("\n{title}:\n");
        let found = help[at..]
            .find(&heading)
            .unwrap_or_else(|| panic!("{title} missing or out of order: {help}"));
        at += found + heading.len();
        let end = help[at..].find("\n\n").map_or(help.len(), |e| at + e);
        for flag in *flags {
            assert!(
                help[at..end].contains(&format!("  {flag}")),
                "{flag} is not under {title}: {}",
                &help[at..end]
            );
        }
    }
    assert!(help.contains("Exit status: 0 ok, 1 runtime failure, 2 usage"));
}

#[test]
fn every_usage_error_exits_2_with_a_message_on_stderr() {
    for (args, says) in [
        (
            &["--no-such-flag"][..],
            "Unrecognized argument: --no-such-flag",
        ),
        (&["--port", "x"][..], "--port"),
        (&["--port"][..], "--port"),
        (&["positional"][..], "positional"),
        (&["--memory", "--db", "x.db"][..], "--memory and --db"),
        (&["--exit-on-stdin-close"][..], "only applies with --mcp"),
        (&["--max-records", "0"][..], "--max-records"),
        (&["--host", "0.0.0.0"][..], "--allow-remote"),
    ] {
        let out = run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        assert!(
            text(&out.stderr).contains(says),
            "{args:?} should say {says:?}: {}",
            text(&out.stderr)
        );
    }
    // A runtime failure is 1: the database path is a directory.
    let dir = TempDir::new("cli-db");
    let out = run(&["--db", dir.path().to_str().unwrap(), "--port", "0"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("error: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_banner_says_what_to_do_next() {
    // With the default port file ($HOME/.cideldill/port) the agent line is the plain one.
    let home = TempDir::new("banner");
    let data = home.path().join(".cideldill");
    std::fs::create_dir_all(&data).unwrap();
    let home_text = home.path().to_str().unwrap().to_owned();
    let server = Server::start_in_env(&data, &["--memory"], &[("HOME", &home_text)]);
    let url = format!("http://127.0.0.1:{}", server.port);
    let banner = server.stderr();
    for line in [
        format!("Server running on {url}"),
        format!("  Web UI:   {url}/"),
        "  Python:   from cideldill_client import with_debug; with_debug(\"ON\"); f = with_debug(f)"
            .to_owned(),
        format!("CIDELDILL_SERVER_URL={url}"),
        "  AI agent: claude mcp add cideldill -- cideldill-server --mcp\n".to_owned(),
    ] {
        assert!(banner.contains(&line), "banner lacks {line:?}:\n{banner}");
    }
    // Another port file: the agent's registration names it.
    let other = Server::start(&[]);
    let banner = other.stderr();
    let expected = format!(
        "  AI agent: claude mcp add cideldill -- cideldill-server --mcp --port-file {}\n",
        other.port_file.display()
    );
    assert!(banner.contains(&expected), "{expected:?}:\n{banner}");
}
