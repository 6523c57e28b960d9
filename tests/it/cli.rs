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
    for group in cideldill_server::config::FLAGS {
        let (title, flags) = (group.title, group.flags.iter().map(|f| f.name));
        let heading = format!("\n{title}:\n");
        let found = help[at..]
            .find(&heading)
            .unwrap_or_else(|| panic!("{title} missing or out of order: {help}"));
        at += found + heading.len();
        let end = help[at..].find("\n\n").map_or(help.len(), |e| at + e);
        for flag in flags {
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
        (
            &["--standalone"][..],
            "--standalone only applies with --mcp",
        ),
        (
            &["--allow-origin", "not a url"][..],
            "is not an origin: give scheme://host[:port] with no path",
        ),
        (
            &["--allow-origin", "http://localhost:3000/app"][..],
            "e.g. http://localhost:3000",
        ),
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
    // A --db in a directory that does not exist is refused, and the directory is not created.
    let dir = TempDir::new("cli-nodir");
    let missing = dir.path().join("no").join("such");
    let db = missing.join("x.db");
    let out = run(&["--db", db.to_str().unwrap(), "--port", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let expected = format!("the directory {} does not exist", missing.display());
    assert!(
        text(&out.stderr).contains(&expected),
        "{expected}: {}",
        text(&out.stderr)
    );
    assert!(!missing.exists() && !dir.path().join("no").exists());
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

// `--db :memory:` is `--memory` (the original's meaning): no file appears in the working
// directory, and the banner says the database is in memory.
#[test]
fn db_memory_keeps_everything_in_memory() {
    let home = TempDir::new("cli-memory");
    let cwd = TempDir::new("cli-memory-cwd");
    let port_file = home.path().join("port");
    let stderr_path = home.path().join("stderr.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
        .args(["--db", ":memory:", "--port", "0"])
        .current_dir(cwd.path())
        .env("CIDELDILL_HOME", home.path())
        .env("CIDELDILL_PORT_FILE", &port_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("start cideldill-server");
    let port = crate::support::wait_for_port(&mut child, &port_file, &stderr_path);
    let c = crate::support::Client { port };
    c.post_ok(
        "/api/breakpoints",
        &serde_json::json!({"function_name": "add"}),
    );
    crate::support::signal(child.id(), "-TERM");
    let until = Instant::now() + deadline();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < until, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("Database: :memory:\n"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(cwd.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "files in the working directory: {left:?}");
    assert!(
        !home.path().join("db").exists(),
        "no database directory either"
    );
}

#[test]
fn the_banner_says_what_to_do_next() {
    // With the default port file ($HOME/.cideldill/port) the agent line is the plain one.
    let home = TempDir::new("banner");
    let data = home.path().join(".cideldill");
    std::fs::create_dir_all(&data).unwrap();
    let home_text = home.path().to_str().unwrap().to_owned();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_cideldill-server")).unwrap();
    let server = Server::start_in_env(&data, &["--memory"], &[("HOME", &home_text)]);
    let url = format!("http://127.0.0.1:{}", server.port);
    let banner = server.stderr();
    for line in [
        format!("Server running on {url}"),
        format!("  Web UI:   {url}/"),
        "  Python:   from cideldill_client import with_debug; with_debug(\"ON\"); f = with_debug(f)"
            .to_owned(),
        format!("CIDELDILL_SERVER_URL={url}"),
        // The registration names this executable by its absolute path (after `cargo run` no
        // cideldill-server is on PATH), and says how to put one there.
        format!("  AI agent: claude mcp add cideldill -- {} --mcp\n", exe.display()),
        "            (this build's path, gone with `cargo clean`; `cargo install --locked \
         --path . --bin cideldill-server`\n"
            .to_owned(),
        "            puts cideldill-server on PATH: then register `cideldill-server --mcp`)\n"
            .to_owned(),
    ] {
        assert!(banner.contains(&line), "banner lacks {line:?}:\n{banner}");
    }
    drop(server);
    // Another port file: the agent's registration names it.
    let other = Server::start(&[]);
    let banner = other.stderr();
    let expected = format!(
        "  AI agent: claude mcp add cideldill -- {} --mcp --port-file {}\n",
        exe.display(),
        other.port_file.display()
    );
    assert!(banner.contains(&expected), "{expected:?}:\n{banner}");
    let expected = format!(
        "then register `cideldill-server --mcp --port-file {}`)\n",
        other.port_file.display()
    );
    assert!(banner.contains(&expected), "{expected:?}:\n{banner}");
    // Run from PATH (as after `cargo install`), the cargo install advice is not given.
    let dir = exe.parent().unwrap().display().to_string();
    let path = format!("{dir}:{}", std::env::var("PATH").unwrap_or_default());
    let on_path = Server::start_in_env(
        &data,
        &["--memory"],
        &[("HOME", &home_text), ("PATH", &path)],
    );
    let banner = on_path.stderr();
    let line = format!(
        "  AI agent: claude mcp add cideldill -- {} --mcp\n",
        exe.display()
    );
    assert!(banner.contains(&line), "{line:?}:\n{banner}");
    assert!(!banner.contains("cargo install"), "{banner}");
}
