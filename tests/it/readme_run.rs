//! The README's "Run it" command, run literally: the first ```sh block under `## Run it` must be
//! one command that, run by `sh` from the repository root, builds and starts the server. The
//! server must answer `/api/status` on the port it writes to its port file (kept in a temporary
//! `CIDELDILL_HOME`, never the user's), and exit 0 on SIGTERM, removing the port file.
//!
//! It builds the release binary the first time (`target/release`, shared with `scripts/bench.sh`
//! and any other release build: about 100 s from nothing on 2 shared cores, at low priority so
//! the other tests keep their pace), and again after each change of the sources (about a
//! minute, the LTO link); otherwise it only checks that build is fresh (0.2 s).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{deadline, signal, Client, TempDir};

/// How long the command may take to build and start the server: a release build with LTO from
/// nothing takes about a minute on 2 cores, more when the tests share them.
/// `CIDELDILL_TEST_BUILD_DEADLINE_S` changes it.
fn build_deadline() -> Duration {
    let secs = std::env::var("CIDELDILL_TEST_BUILD_DEADLINE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(900);
    Duration::from_secs(secs).max(deadline())
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the first ```sh block under the README heading `heading` (before the next
/// `## `).
pub(crate) fn sh_block(readme: &str, heading: &str) -> Vec<String> {
    let mut lines = readme.lines().skip_while(|l| l.trim_end() != heading);
    assert!(
        lines.next().is_some(),
        "README.md has no `{heading}` heading"
    );
    let mut block = None;
    for line in lines.by_ref() {
        if line.starts_with("## ") {
            break;
        }
        if line.trim_end() == "```sh" {
            block = Some(Vec::new());
            break;
        }
    }
    let mut block =
        block.unwrap_or_else(|| panic!("no ```sh block under `{heading}` in README.md"));
    for line in lines {
        if line.trim_end() == "```" {
            return block;
        }
        block.push(line.to_owned());
    }
    panic!("the ```sh block under `{heading}` in README.md is not closed");
}

/// The one command of that block (comments and blank lines aside).
fn run_it_command() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let block = sh_block(&readme, "## Run it");
    let commands: Vec<&String> = block
        .iter()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(
        commands.len(),
        1,
        "the `## Run it` block should be the one command that starts the server: {block:?}"
    );
    commands[0].trim().to_owned()
}

/// Kills the command's process group if the test fails before stopping it.
struct Group(Option<Child>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

fn read_port(port_file: &Path) -> Option<u16> {
    std::fs::read_to_string(port_file).ok()?.trim().parse().ok()
}

#[test]
fn the_readme_run_command_starts_a_server_that_stops_cleanly() {
    let command = run_it_command();
    let home = TempDir::new("readme-run");
    let port_file = home.path().join("port");
    let log_path = home.path().join("output.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // At low priority: a first release build takes a core or two for a minute or more, and the
    // other tests (with deadlines of their own) run beside it.
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "10", "sh", "-c", &command])
        .current_dir(root())
        .env("CIDELDILL_HOME", home.path())
        .env("CIDELDILL_PORT_FILE", &port_file)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    if !cfg!(debug_assertions) {
        // Under `cargo test --release` the outer cargo holds target/release while the tests
        // run: the command builds in a directory of its own instead of waiting for it.
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_cideldill-server"));
        let target = exe.parent().and_then(Path::parent).unwrap();
        cmd.env("CARGO_TARGET_DIR", target.join("readme-run"));
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let t0 = Instant::now();
    let mut group = Group(Some(cmd.spawn().expect("run nice sh -c")));
    let output = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let until = t0 + build_deadline();
    let port = loop {
        if let Some(port) = read_port(&port_file) {
            break port;
        }
        let child = group.0.as_mut().unwrap();
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "`{command}` (the README's Run it command) exited with {status} before the \
                 server wrote its port file:\n{}",
                output()
            );
        }
        assert!(
            Instant::now() < until,
            "`{command}` started no server within {:?}:\n{}",
            build_deadline(),
            output()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let status = Client { port }.get_ok("/api/status");
    let took = t0.elapsed();
    println!("readme_run: `{command}` answered /api/status after {took:.1?}");
    assert_eq!(status["server"], "cideldill-server", "{status}");
    assert_eq!(
        status["port_file"].as_str().map(Path::new),
        Some(port_file.as_path()),
        "{status}"
    );
    let pid = status["pid"].as_u64().expect("pid in /api/status") as u32;
    // The server is the README command's own process (cargo run execs it) or its child.
    signal(pid, "-TERM");
    let mut child = group.0.take().unwrap();
    let until = Instant::now() + deadline();
    let exit = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            group.0 = Some(child);
            panic!("`{command}` did not exit after SIGTERM:\n{}", output());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = output();
    assert!(exit.success(), "`{command}` exited with {exit}:\n{out}");
    assert!(out.contains("Server running on"), "{out}");
    assert!(!port_file.exists(), "the port file was not removed:\n{out}");
    // The default database went into the data directory, which the server created.
    let dbs: Vec<_> = std::fs::read_dir(home.path().join("db"))
        .expect("the default database directory")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cideldill-") && n.ends_with(".db"))
        .collect();
    assert_eq!(dbs.len(), 1, "{dbs:?}");
}
