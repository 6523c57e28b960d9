//! A check that the fixture MCP server (the binary `cideldill-fixture-mcp-server`, from
//! `tests/fixtures/mcp_server.rs`; `support::fixture_server_path` finds it) speaks MCP over
//! stdio.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver};
use serde_json::{json, Value};

use crate::support::{deadline, fixture_server_path};

/// The fixture process, killed on drop.
struct Fixture {
    child: Child,
    lines: Receiver<String>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Fixture {
    fn send(&mut self, msg: &Value) {
        let stdin = self.child.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next stdout line as JSON, within the deadline.
    fn read(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(deadline())
            .expect("a line from the fixture within the deadline");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let r = self.read();
        assert_eq!(r["jsonrpc"], "2.0", "{r}");
        assert_eq!(r["id"], id, "{r}");
        r
    }
}

#[test]
fn fixture_server_answers_initialize_tools_list_and_echo() {
    let mut child = Command::new(fixture_server_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the fixture server");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (err_tx, err_rx) = unbounded();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        let _ = err_tx.send(text);
    });
    let mut f = Fixture { child, lines: rx };

    let init = f.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "it", "version": "1"}}),
    );
    assert_eq!(
        init["result"],
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}, "resources": {}},
            "serverInfo": {"name": "fixture", "version": "1"}
        })
    );
    f.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let list = f.request(2, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("a tools array");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "echo",
            "add",
            "multi",
            "slow",
            "never",
            "crash",
            "fail",
            "rpc_error",
            "huge",
            "größe_✓",
            "env",
            "no_schema",
            "ask",
            "notify_change"
        ]
    );
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(!t["description"].as_str().unwrap().is_empty(), "{t}");
    }
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["text"]));

    let echo = f.request(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "héllo ✓"}}),
    );
    assert_eq!(
        echo["result"],
        json!({"content": [{"type": "text", "text": "héllo ✓"}]})
    );

    // Closing stdin ends the server with status 0.
    drop(f.child.stdin.take());
    let until = Instant::now() + deadline();
    let status = loop {
        if let Some(status) = f.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < until,
            "the fixture did not exit on stdin EOF"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(status.success(), "{status}");
    let stderr = err_rx
        .recv_timeout(deadline())
        .expect("the fixture's stderr");
    for method in [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ] {
        assert!(
            stderr.contains(&format!("fixture: {method}\n")),
            "stderr lacks {method}: {stderr}"
        );
    }
}
