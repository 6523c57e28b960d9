//! The README's five-minute walkthrough, run literally: every line of the first ```sh block
//! under `## Five minutes with the demo`, in order, by `sh` from the repository root, against a
//! real server. Only what a reader fills in changes: the port (`5174`, the default, becomes the
//! test server's) and `<pause_id>` (the id of the pause `/api/paused` shows at that moment).
//! The demo, which the README starts "in a second terminal", runs in the background; the
//! walkthrough must leave it printing the modified call and finishing.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::readme_run::sh_block;
use crate::support::{deadline, wait_for, Server, TempDir};

/// The walkthrough's commands: continuation lines joined, comment-only lines left out.
fn commands() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let mut out: Vec<String> = Vec::new();
    let mut pending = String::new();
    for line in sh_block(&readme, "## Five minutes with the demo") {
        let trimmed = line.trim_end();
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let command = std::mem::take(&mut pending);
        if !command.trim().is_empty() && !command.trim_start().starts_with('#') {
            out.push(command.trim().to_owned());
        }
    }
    out
}

/// Stops the demo if the test fails before it finishes.
struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let commands = commands();
    assert!(
        commands.len() >= 6,
        "the walkthrough block is too short to be the walkthrough: {commands:?}"
    );
    assert!(
        commands[0].starts_with("python3 scripts/demo_app.py"),
        "the walkthrough starts the demo first: {commands:?}"
    );
    let home = TempDir::new("walkthrough");
    let server = Server::start_in(home.path(), &["--memory"]);
    let c = server.client();
    let port = server.port.to_string();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_path = home.path().join("demo.out");
    let shell = |command: &str| {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", command])
            .current_dir(&root)
            .env("CIDELDILL_HOME", home.path())
            .env("CIDELDILL_PORT_FILE", home.path().join("port"))
            .env_remove("CIDELDILL_SERVER_URL");
        cmd
    };
    let mut used: Vec<String> = Vec::new();
    let mut demo = None;
    for (i, written) in commands.iter().enumerate() {
        let mut command = written.replace(":5174", &format!(":{port}"));
        if command.contains("<pause_id>") {
            // The pause the reader sees now: one that no earlier line resumed.
            let id = wait_for(&format!("a new pause for line {}", i + 1), || {
                let paused = c.get_ok("/api/paused");
                paused["paused"]
                    .as_array()?
                    .iter()
                    .filter_map(|p| p["id"].as_str())
                    .find(|id| !used.iter().any(|u| u == id))
                    .map(str::to_owned)
            });
            command = command.replace("<pause_id>", &id);
            used.push(id);
        }
        if i == 0 {
            let child = shell(&command)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&out_path).unwrap())
                .stderr(Stdio::null())
                .spawn()
                .expect("run the demo line");
            demo = Some(Demo(child));
            continue;
        }
        let done = shell(&command).output().expect("run a walkthrough line");
        assert!(
            done.status.success(),
            "line {} exited {:?}: {command}\n{}",
            i + 1,
            done.status,
            String::from_utf8_lossy(&done.stderr)
        );
        let answer = String::from_utf8_lossy(&done.stdout);
        if command.contains("/continue") || command.contains("/api/behavior") {
            let v: Value = serde_json::from_str(answer.trim())
                .unwrap_or_else(|e| panic!("line {}: {e}: {answer}", i + 1));
            assert_eq!(v["status"], "ok", "line {}: {answer}", i + 1);
        }
    }
    // The demo printed the modified call and finished once everything was released.
    let mut demo = demo.expect("the demo was started");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = demo.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < deadline(),
            "the demo did not finish after the walkthrough: {}",
            std::fs::read_to_string(&out_path).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let printed = std::fs::read_to_string(&out_path).unwrap();
    assert!(status.success(), "the demo failed: {printed}");
    assert!(printed.contains("add(10, y=20) -> 30"), "{printed}");
    // What the README says the record shows.
    let add = c.get_ok("/api/call-records?function=add&limit=1");
    let record = &add["calls"][0];
    assert_eq!(record["pretty_args"], serde_json::json!(["2"]));
    assert_eq!(record["resolution"]["action"], "modify");
    assert_eq!(record["resolution"]["by"], "rest");
    assert_eq!(
        record["resolution"]["pretty_args"],
        serde_json::json!(["10"])
    );
    assert_eq!(
        record["resolution"]["pretty_kwargs"],
        serde_json::json!({"y": "20"})
    );
}
