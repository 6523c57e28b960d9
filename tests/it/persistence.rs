//! Persistence and process life: the append-only database across `kill -9`, torn and garbled
//! tails, breakpoint settings across restarts, pauses from before a restart, port files, the
//! default database location.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::{call_start_body, complete_body, item, item_ref, pause_id, Server, TempDir};

/// Runs one paused call to completion: a breakpoint, a pause, continue, complete.
fn one_call(server: &Server, method: &str, arg: &Value, result: &Value) -> String {
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": method}));
    c.post_ok(
        &format!("/api/breakpoints/{method}/after_behavior"),
        &json!({"behavior": "go"}),
    );
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body(method, vec![item(arg, 2)], json!({})),
    );
    let p = pause_id(&start);
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "continue"}),
    );
    let call_id = start["call_id"].as_str().unwrap().to_owned();
    assert_eq!(
        c.post_ok("/api/call/complete", &complete_body(&call_id, result)),
        json!({"status": "ok"})
    );
    call_id
}

fn db_arg(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn the_database_survives_kill_9() {
    let home = TempDir::new("kill9");
    let db = home.path().join("session.db");
    let mut server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    assert!(
        server
            .stderr()
            .contains(&format!("Database: {}", db.display())),
        "{}",
        server.stderr()
    );
    let first = one_call(&server, "add", &json!([1, 2, 3]), &json!(6));
    let second = one_call(&server, "add", &json!("second"), &json!("done"));
    server.signal_and_wait("-KILL");

    let server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    let c = server.client();
    let records = c.get_ok("/api/call-records");
    assert_eq!(records["total_count"], 2, "{records}");
    assert_eq!(records["calls"][0]["call_id"], second.as_str());
    assert_eq!(records["calls"][1]["call_id"], first.as_str());
    let history = c.get_ok("/api/breakpoints/add/history");
    assert_eq!(history["history"].as_array().unwrap().len(), 2);
    // Stored objects are back: a client that believes it sent a CID need not resend it.
    let cid = item(&json!([1, 2, 3]), 0)["cid"]
        .as_str()
        .unwrap()
        .to_owned();
    let obj = c.get_ok(&format!("/api/objects/{cid}"));
    assert_eq!(obj["format"], "dill");
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("add", vec![item_ref(&json!([1, 2, 3]), 2)], json!({})),
    );
    // The breakpoint survived (it pauses before, as the default says) and so did the object
    // (a CID alone is accepted).
    pause_id(&start);
}

fn database_with_two_calls(tag: &str) -> (TempDir, PathBuf) {
    let home = TempDir::new(tag);
    let db = home.path().join("x.db");
    let mut server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    one_call(&server, "f", &json!(1), &json!(10));
    one_call(&server, "f", &json!(2), &json!(20));
    server.signal_and_wait("-TERM");
    (home, db)
}

#[test]
fn a_truncated_last_record_is_dropped_and_the_rest_reopens() {
    let (home, db) = database_with_two_calls("torn");
    let len = std::fs::metadata(&db).unwrap().len();
    // The last record is the second call's history entry: cut into it.
    let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    file.set_len(len - 7).unwrap();
    drop(file);
    let server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    let c = server.client();
    assert_eq!(
        c.get_ok("/api/call-records")["total_count"],
        2,
        "both call records are intact"
    );
    let history = c.get_ok("/api/breakpoints/f/history")["history"].clone();
    assert_eq!(
        history.as_array().unwrap().len(),
        1,
        "only the torn history entry is gone: {history}"
    );
    assert!(server.stderr().contains("torn tail"), "{}", server.stderr());
    // New writes after the repair survive the next reopen.
    one_call(&server, "f", &json!(3), &json!(30));
    drop(server);
    let server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    assert_eq!(
        server.client().get_ok("/api/call-records")["total_count"],
        3
    );
}

#[test]
fn a_garbled_last_record_is_dropped_on_reopen() {
    let (home, db) = database_with_two_calls("garbled");
    let mut bytes = std::fs::read(&db).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x55;
    std::fs::write(&db, &bytes).unwrap();
    let server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    let c = server.client();
    assert_eq!(c.get_ok("/api/call-records")["total_count"], 2);
    assert_eq!(
        c.get_ok("/api/breakpoints/f/history")["history"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_foreign_file_is_refused_not_overwritten() {
    let home = TempDir::new("foreign");
    let db = home.path().join("notes.txt");
    std::fs::write(&db, "my precious notes\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
        .args([
            "--port",
            "0",
            "--db",
            &db_arg(&db),
            "--port-file",
            &db_arg(&home.path().join("p")),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read_to_string(&db).unwrap(), "my precious notes\n");
}

#[test]
fn a_pause_from_before_a_restart_waits_and_can_still_be_continued() {
    let home = TempDir::new("orphan");
    let db = home.path().join("o.db");
    let mut server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let p = pause_id(&c.post_ok("/api/call/start", &call_start_body("f", vec![], json!({}))));
    server.signal_and_wait("-KILL");

    let server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    let c = server.client();
    // Compat: the client keeps polling its old id; the answer must be waiting, never an error.
    assert_eq!(
        c.get_ok(&format!("/api/poll/{p}")),
        json!({"status": "waiting"})
    );
    assert_eq!(
        c.get_ok(&format!("/api/poll-repl/{p}")),
        json!({"eval_id": null})
    );
    // Only continue is safe for such a pause; an id nobody polls is unknown.
    let err = c.post_err(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "skip"}),
        400,
    );
    assert_eq!(err["error"], "invalid_action");
    c.post_err("/api/paused/never-polled/continue", &json!({}), 404);
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "continue"}),
    );
    assert_eq!(
        c.get_ok(&format!("/api/poll/{p}")),
        json!({"status": "ready", "action": {"action": "continue"}})
    );
}

#[test]
fn the_default_database_is_a_new_file_under_cideldill_home() {
    let home = TempDir::new("default-db");
    let server = Server::start_in(home.path(), &[]);
    let mut entries: Vec<_> = std::fs::read_dir(home.path().join("db"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    // The database and its index (derived data, rebuilt at every open).
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(
        entries[1].as_os_str().to_str().unwrap(),
        format!("{}.idx", entries[0].display())
    );
    let name = entries[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        name.starts_with("cideldill-") && name.ends_with(".db"),
        "{name}"
    );
    assert!(
        server
            .stderr()
            .contains(&format!("Database: {}", entries[0].display())),
        "{}",
        server.stderr()
    );
}

#[test]
fn memory_mode_writes_no_database() {
    let home = TempDir::new("memory");
    let server = Server::start_in(home.path(), &["--memory"]);
    one_call(&server, "f", &json!(1), &json!(2));
    assert!(server.stderr().contains("Database: :memory:"));
    assert!(!home.path().join("db").exists());
}

#[test]
fn sigterm_and_sigint_remove_the_port_file() {
    for signal in ["-TERM", "-INT"] {
        let home = TempDir::new("sig");
        let mut server = Server::start_in(home.path(), &["--memory"]);
        let text = std::fs::read_to_string(&server.port_file).unwrap();
        assert_eq!(text, server.port.to_string(), "bare digits, no newline");
        let status = server.signal_and_wait(signal);
        assert!(status.success(), "{signal}: {status}");
        assert!(
            !server.port_file.exists(),
            "{signal}: port file left behind"
        );
    }
}

#[test]
fn a_port_file_rewritten_by_another_server_is_left_alone() {
    let home = TempDir::new("portfile-other");
    let mut server = Server::start_in(home.path(), &["--memory"]);
    std::fs::write(&server.port_file, "1").unwrap();
    server.signal_and_wait("-TERM");
    assert_eq!(std::fs::read_to_string(&server.port_file).unwrap(), "1");
}

#[test]
fn a_taken_port_falls_back_to_a_free_one() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let home = TempDir::new("fallback");
    let server = Server::start_in(home.path(), &["--memory", "--port", &port]);
    assert_ne!(server.port.to_string(), port);
    assert!(
        server
            .stderr()
            .contains(&format!("Port {port} is occupied")),
        "{}",
        server.stderr()
    );
    assert_eq!(server.client().get("/api/breakpoints").status, 200);
}

#[test]
fn bad_flags_are_refused_with_a_clear_message() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--host", "0.0.0.0"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--allow-remote"), "{err}");
    let (code, err) = run(&["--memory", "--db", "x.db"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("cannot be used together"), "{err}");
    let (code, out) = {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
            .arg("--help")
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    assert_eq!(code, Some(0));
    for flag in [
        "--host",
        "--port",
        "--memory",
        "--db",
        "--port-file",
        "--max-body-mb",
        "--allow-remote",
        "--repl-timeout-s",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}: {out}");
    }
}

/// Completes one call of `method` that does not pause (behaviors `go`), returning its call id.
fn go_call(c: &crate::support::Client, method: &str, n: u64) -> String {
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body(method, vec![item(&json!(n), 2)], json!({})),
    );
    assert_eq!(start["action"], "continue", "{start}");
    let call_id = start["call_id"].as_str().unwrap().to_owned();
    c.post_ok(
        "/api/call/complete",
        &complete_body(&call_id, &json!(n * 10)),
    );
    call_id
}

fn call_ids(page: &Value) -> Vec<String> {
    page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["call_id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn past_the_in_memory_window_records_are_read_back_from_the_database() {
    let home = TempDir::new("window-db");
    let db = home.path().join("w.db");
    let args = ["--db", &db_arg(&db), "--max-records", "3"];
    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    for name in ["a", "b"] {
        c.post_ok("/api/breakpoints", &json!({"function_name": name}));
        for path in ["behavior", "after_behavior"] {
            c.post_ok(
                &format!("/api/breakpoints/{name}/{path}"),
                &json!({"behavior": "go"}),
            );
        }
    }
    let ids: Vec<String> = (0..7)
        .map(|n| go_call(&c, if n % 2 == 0 { "a" } else { "b" }, n))
        .collect();
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();

    let check = |c: &crate::support::Client| {
        let all = c.get_ok("/api/call-records?limit=100");
        assert_eq!(all["total_count"], 7, "{all}");
        assert_eq!(call_ids(&all), newest_first);
        let oldest = c.get_ok("/api/call-records?offset=6&limit=1");
        assert_eq!(call_ids(&oldest), [ids[0].clone()]);
        assert_eq!(oldest["calls"][0]["pretty_args"], json!(["0"]));
        assert_eq!(oldest["calls"][0]["pretty_result"], json!("0"));
        let a = c.get_ok("/api/call-records?function=a&offset=2");
        assert_eq!(a["total_count"], 4);
        assert_eq!(call_ids(&a), [ids[2].clone(), ids[0].clone()]);
        let history = c.get_ok("/api/breakpoints/a/history?offset=3&limit=5");
        let h = history["history"].as_array().unwrap();
        assert_eq!(h.len(), 1, "{history}");
        assert_eq!(h[0]["call_data"]["call_id"], ids[0].as_str());
        assert_eq!(h[0]["call_data"]["pretty_result"], json!("0"));
        assert_eq!(
            c.get_ok("/api/breakpoints/b/history")["history"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
    };
    check(&c);
    let status = c.get_ok("/api/status");
    assert_eq!(status["calls_in_memory"], 3, "{status}");
    drop(server);

    let server = Server::start_in(home.path(), &args);
    check(&server.client());
}

#[test]
fn with_memory_only_the_newest_records_are_kept_and_the_others_counted() {
    let server = Server::start(&["--memory", "--max-records", "3"]);
    let c = server.client();
    let ids: Vec<String> = (0..5).map(|n| go_call(&c, "f", n)).collect();
    let page = c.get_ok("/api/call-records");
    assert_eq!(page["total_count"], 3);
    assert_eq!(
        call_ids(&page),
        [ids[4].clone(), ids[3].clone(), ids[2].clone()]
    );
    let status = c.get_ok("/api/status");
    assert_eq!(
        (
            &status["total_calls"],
            &status["calls_in_memory"],
            &status["calls_dropped"]
        ),
        (&json!(5), &json!(3), &json!(2)),
        "{status}"
    );
}

#[test]
fn the_in_memory_window_is_bounded_by_bytes_too() {
    let server = Server::start(&["--memory", "--max-records-mb", "1"]);
    let c = server.client();
    // Small calls share their parts: 50 of them weigh far less than 1 MiB.
    for n in 0..50 {
        go_call(&c, "f", n);
    }
    assert_eq!(c.get_ok("/api/call-records")["total_count"], 50);
    // Events that each keep 100 KiB of their own: only about ten fit beside them.
    for n in 0..30 {
        let big = format!("{n}{}", "x".repeat(100 << 10));
        c.post_ok(
            "/api/call/event",
            &json!({"event_id": format!("e{n}"), "method_name": "big", "status": "event",
                    "timestamp": 1.5, "process_pid": 1, "process_start_time": 1.5,
                    "pretty_args": [big]}),
        );
    }
    let status = c.get_ok("/api/status");
    let kept = status["calls_in_memory"].as_u64().unwrap();
    assert!((5..=10).contains(&kept), "{status}");
    assert_eq!(status["calls_dropped"].as_u64().unwrap(), 80 - kept);
    // The newest event is whole; the small calls fell out first.
    let page = c.get_ok("/api/call-records?limit=1");
    let args = page["calls"][0]["pretty_args"][0].as_str().unwrap();
    assert!(
        args.starts_with("29x") && args.len() == 2 + (100 << 10),
        "{}",
        &args[..10]
    );
    assert_eq!(c.get_ok("/api/call-records?function=f")["total_count"], 0);
}

#[test]
fn a_format_1_database_reopens_with_the_same_records() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1");
    let home = TempDir::new("format1");
    let db = home.path().join("v1.db");
    std::fs::copy(fixtures.join("v1.db"), &db).unwrap();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("expected.json")).unwrap())
            .unwrap();
    let args = ["--db", &db_arg(&db)];
    let check = |c: &crate::support::Client| {
        assert_eq!(c.get_ok("/api/call-records"), expected["call_records"]);
        assert_eq!(
            c.get_ok("/api/breakpoints/hist/history"),
            expected["history"]
        );
        assert_eq!(c.get_ok("/api/objects")["total_count"], expected["objects"]);
    };
    let server = Server::start_in(home.path(), &args);
    check(&server.client());
    drop(server);
    let header = std::fs::read(&db).unwrap();
    assert_eq!(header[8..12], 2u32.to_le_bytes(), "upgraded to format 2");
    // Reopened in the new format, with a record of the new format added.
    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    check(&c);
    let id = go_call(&c, "free", 9);
    drop(server);
    let server = Server::start_in(home.path(), &args);
    let page = server.client().get_ok("/api/call-records?limit=1");
    assert_eq!(call_ids(&page), [id]);
}

/// Sets breakpoints with every option, behaviors, a replacement and the default `go`; removes
/// one. Returns what `GET /api/breakpoints` and `GET /api/behavior` then answer.
fn set_every_setting(c: &crate::support::Client) -> (Value, Value) {
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "gated", "signature": "(x)", "behavior": "stop",
                "condition": "args[0] > 100", "hit_condition": ">=2"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "logged", "log_message": "x={args[0]}"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "once", "one_shot": true}),
    );
    c.post_ok(
        "/api/breakpoints/once/after_behavior",
        &json!({"behavior": "stop_exception"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "swap", "signature": "(x)"}),
    );
    c.post_ok(
        "/api/functions",
        &json!({"function_name": "other", "signature": "(x)"}),
    );
    c.post_ok(
        "/api/breakpoints/swap/replacement",
        &json!({"replacement_function": "other"}),
    );
    c.post_ok("/api/breakpoints/swap/behavior", &json!({"behavior": "go"}));
    c.post_ok(
        "/api/breakpoints/logged/after_behavior",
        &json!({"behavior": "exception"}),
    );
    c.post_ok("/api/breakpoints", &json!({"function_name": "gone"}));
    c.post_ok(
        "/api/breakpoints/gone/behavior",
        &json!({"behavior": "stop"}),
    );
    assert_eq!(c.delete("/api/breakpoints/gone").status, 200);
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    (c.get_ok("/api/breakpoints"), c.get_ok("/api/behavior"))
}

/// Starts a call of `method` with one int argument.
fn start_with(c: &crate::support::Client, method: &str, n: i64) -> Value {
    c.post_ok(
        "/api/call/start",
        &call_start_body(method, vec![item(&json!(n), 2)], json!({})),
    )
}

#[test]
fn breakpoint_settings_survive_a_restart_and_still_decide_calls() {
    let home = TempDir::new("settings");
    let db = home.path().join("s.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let (listing, behavior) = set_every_setting(&server.client());
    assert_eq!(
        listing["breakpoints"],
        json!(["gated", "logged", "once", "swap"])
    );
    assert_eq!(listing["breakpoint_conditions"]["gated"], "args[0] > 100");
    assert_eq!(behavior, json!({"behavior": "go"}));
    assert!(
        !server.stderr().contains("restored"),
        "a new database restores nothing: {}",
        server.stderr()
    );
    assert!(server.signal_and_wait("-TERM").success());

    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    assert_eq!(
        c.get_ok("/api/breakpoints"),
        listing,
        "read back identically"
    );
    assert_eq!(c.get_ok("/api/behavior"), behavior);
    assert!(
        server.stderr().contains(&format!(
            "restored 4 breakpoints, default behavior go from {}",
            db.display()
        )),
        "{}",
        server.stderr()
    );
    // The condition still gates and the hit condition still counts (from 0 again: hit
    // counts are not kept).
    assert_eq!(start_with(&c, "gated", 5)["action"], "continue");
    assert_eq!(
        start_with(&c, "gated", 500)["action"],
        "continue",
        "1st hit"
    );
    pause_id(&start_with(&c, "gated", 501));
    // The replacement and the default behavior still apply.
    let swap = start_with(&c, "swap", 1);
    assert_eq!(
        (&swap["action"], &swap["function_name"]),
        (&json!("replace"), &json!("other")),
        "{swap}"
    );
    assert_eq!(
        start_with(&c, "gone", 1)["action"],
        "continue",
        "removed stays removed"
    );
    // The logpoint logs instead of pausing.
    assert_eq!(start_with(&c, "logged", 7)["action"], "continue");
    let lines = c.get_ok("/api/logpoints");
    assert_eq!(lines["lines"][0]["message"], "x=7", "{lines}");
}

#[test]
fn an_acknowledged_settings_change_survives_kill_9() {
    let home = TempDir::new("settings-kill9");
    let db = home.path().join("k.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    c.post_ok("/api/breakpoints", &json!({"function_name": "g"}));
    c.post_ok(
        "/api/breakpoints/f/condition",
        &json!({"condition": "args[0] == 3"}),
    );
    assert_eq!(c.delete("/api/breakpoints/g").status, 200);
    server.signal_and_wait("-KILL");

    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    let listing = c.get_ok("/api/breakpoints");
    assert_eq!(listing["breakpoints"], json!(["f"]), "{listing}");
    assert_eq!(
        listing["breakpoint_conditions"],
        json!({"f": "args[0] == 3"})
    );
    assert_eq!(start_with(&c, "f", 2)["action"], "continue");
    pause_id(&start_with(&c, "f", 3));
    // Clearing an option and the last breakpoint survive too.
    c.post_ok("/api/breakpoints/f/condition", &json!({"condition": ""}));
    c.post_ok("/api/behavior", &json!({"behavior": "exception"}));
    server.signal_and_wait("-KILL");
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_conditions"],
        json!({})
    );
    assert_eq!(c.get_ok("/api/behavior"), json!({"behavior": "exception"}));
    assert_eq!(c.delete("/api/breakpoints/f").status, 200);
    server.signal_and_wait("-KILL");
    let server = Server::start_in(home.path(), &args);
    assert_eq!(
        server.client().get_ok("/api/breakpoints")["breakpoints"],
        json!([])
    );
    assert!(
        server
            .stderr()
            .contains("restored 0 breakpoints, default behavior exception"),
        "{}",
        server.stderr()
    );
}

#[test]
fn a_database_without_settings_opens_with_none() {
    // As the previous version wrote it: a call record and a history entry, no settings.
    let home = TempDir::new("no-settings");
    let db = home.path().join("old.db");
    {
        use cideldill_server::store::{IndexKey, RecordKind, Store};
        let (store, _) = Store::open(&db).unwrap();
        let call = json!({"call_id": "1.000000-001", "method_name": "old", "status": "success",
                          "process_pid": 1, "process_start_time": 1.0, "completed_at": 2.0});
        let entry = json!({"id": "h-1", "call": call});
        store
            .append_records(&[
                (RecordKind::CallRecord, &call, IndexKey::default()),
                (RecordKind::History, &entry, IndexKey::default()),
            ])
            .unwrap();
    }
    let server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    let c = server.client();
    assert_eq!(c.get_ok("/api/breakpoints")["breakpoints"], json!([]));
    assert_eq!(c.get_ok("/api/behavior"), json!({"behavior": "stop"}));
    assert_eq!(c.get_ok("/api/call-records")["total_count"], 1);
    assert_eq!(
        c.get_ok("/api/breakpoints/old/history")["history"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(!server.stderr().contains("restored"), "{}", server.stderr());
}

#[test]
fn a_one_shot_breakpoint_stays_disarmed_after_a_restart() {
    let home = TempDir::new("one-shot");
    let db = home.path().join("o.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "once", "one_shot": true, "behavior": "stop"}),
    );
    pause_id(&start_with(&c, "once", 1));
    let listing = c.get_ok("/api/breakpoints");
    assert_eq!(listing["breakpoint_behaviors"]["once"], "go", "{listing}");
    // The pause was answered after the switch to go was written.
    server.signal_and_wait("-KILL");

    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    let restored = c.get_ok("/api/breakpoints");
    assert_eq!(
        restored["breakpoint_behaviors"], listing["breakpoint_behaviors"],
        "{restored}"
    );
    assert_eq!(
        restored["breakpoint_after_behaviors"],
        listing["breakpoint_after_behaviors"]
    );
    assert_eq!(restored["breakpoint_one_shot"], json!(["once"]));
    assert_eq!(start_with(&c, "once", 2)["action"], "continue");
}

#[test]
fn the_history_of_a_removed_breakpoint_is_still_shown_after_a_restart() {
    let home = TempDir::new("removed-history");
    let db = home.path().join("h.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let call_id = one_call(&server, "f", &json!(1), &json!(2));
    assert_eq!(server.client().delete("/api/breakpoints/f").status, 200);
    server.signal_and_wait("-TERM");

    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    assert_eq!(c.get_ok("/api/breakpoints")["breakpoints"], json!([]));
    let history = c.get_ok("/api/breakpoints/f/history")["history"].clone();
    assert_eq!(
        history[0]["call_data"]["call_id"],
        call_id.as_str(),
        "{history}"
    );
    let page = c.get("/breakpoint/f/history");
    assert_eq!(page.status, 200);
    assert!(
        page.text().contains("has no breakpoint now"),
        "{}",
        page.text()
    );
    let id = history[0]["id"].as_str().unwrap();
    let entry = c.get(&format!("/breakpoint/f/history/{id}"));
    assert_eq!(entry.status, 200);
    assert!(entry.text().contains(&call_id), "{}", entry.text());
}

#[test]
fn settings_changed_through_mcp_tools_survive_a_restart() {
    use crate::mcp_support::{mcp_post, rpc, streamable_session};
    let home = TempDir::new("settings-mcp");
    let db = home.path().join("m.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let sid = streamable_session(server.port, "2025-11-25");
    let call = |id: i64, tool: &str, arguments: Value| {
        let r = mcp_post(
            server.port,
            Some(&sid),
            rpc(
                id,
                "tools/call",
                json!({"name": tool, "arguments": arguments}),
            ),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["result"]["isError"], false, "{tool}: {}", r.text());
    };
    call(
        1,
        "breakpoint_add",
        json!({"function_name": "f", "condition": "args[0] == 2", "one_shot": true}),
    );
    call(2, "breakpoint_add", json!({"function_name": "g"}));
    call(
        3,
        "breakpoint_set_after_behavior",
        json!({"function_name": "f", "behavior": "exception"}),
    );
    call(4, "breakpoint_remove", json!({"function_name": "g"}));
    call(
        5,
        "breakpoint_set_default_behavior",
        json!({"behavior": "go"}),
    );
    let listing = server.client().get_ok("/api/breakpoints");
    server.signal_and_wait("-KILL");

    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    assert_eq!(c.get_ok("/api/breakpoints"), listing);
    assert_eq!(listing["breakpoints"], json!(["f"]));
    assert_eq!(listing["breakpoint_after_behaviors"]["f"], "exception");
    assert_eq!(c.get_ok("/api/behavior"), json!({"behavior": "go"}));
}

/// Two servers started at once with the same `--port`, the same home and their own port files
/// (the original's `test_server_falls_back_if_port_occupied`): in either order, each binds,
/// writes its own port file and says which port it took; one has the port asked for. Both
/// write a database by default, so their default database files must differ (they were
/// named by the start time alone, and two starts in one microsecond made the second refuse
/// the first's file).
#[test]
fn two_servers_asking_for_one_port_at_once_both_start_and_say_where() {
    use crate::support::{binary, wait_for_port};
    use std::process::{Command, Stdio};
    for round in 0..40 {
        let home = TempDir::new("two-at-once");
        let asked = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let spawn = |name: &str| {
            let port_file = home.path().join(name);
            let stderr_path = home.path().join(format!("{name}.stderr"));
            let child = Command::new(binary("cideldill-server"))
                .args(["--port", &asked.to_string(), "--port-file"])
                .arg(&port_file)
                .env("CIDELDILL_HOME", home.path())
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&stderr_path).unwrap())
                .spawn()
                .unwrap();
            (child, port_file, stderr_path)
        };
        let mut servers = [spawn("port"), spawn("port2")];
        let ports: Vec<u16> = servers
            .iter_mut()
            .map(|(child, file, err)| wait_for_port(child, file, err))
            .collect();
        assert!(
            ports.contains(&asked),
            "round {round}: {ports:?}, asked {asked}"
        );
        assert_ne!(ports[0], ports[1], "round {round}");
        for ((child, _, err), port) in servers.iter_mut().zip(&ports) {
            let said = std::fs::read_to_string(&*err).unwrap();
            assert!(
                said.contains(&format!("http://127.0.0.1:{port}")),
                "round {round}: the banner names the port it took:\n{said}"
            );
            if *port != asked {
                assert!(
                    said.contains(&format!("Port {asked} is occupied, using free port {port}")),
                    "round {round}:\n{said}"
                );
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let dbs = std::fs::read_dir(home.path().join("db"))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().ends_with(".db")
            })
            .count();
        assert_eq!(dbs, 2, "round {round}: one database file each");
    }
}

/// A server started with `--port-file port_file` (in `home`); its stderr goes to a file in
/// `home`.
struct Custom {
    child: std::process::Child,
    stderr: PathBuf,
}

impl Custom {
    fn spawn(home: &Path, port_file: &Path) -> Custom {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stderr = home.join(format!("stderr-{n}.log"));
        let child = std::process::Command::new(crate::support::binary("cideldill-server"))
            .args(["--memory", "--port", "0", "--port-file"])
            .arg(port_file)
            .env("CIDELDILL_HOME", home.join("data"))
            .env_remove("CIDELDILL_PORT_FILE")
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start cideldill-server");
        Custom { child, stderr }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The exit status, within the deadline.
    fn exit(&mut self) -> std::process::ExitStatus {
        let until = std::time::Instant::now() + crate::support::deadline();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                std::time::Instant::now() < until,
                "no exit: {}",
                self.stderr()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits until the port file names this server, and returns its port.
    fn port(&mut self, port_file: &Path) -> u16 {
        let pid = self.child.id();
        crate::support::poll_until(crate::support::deadline(), || {
            let port: u16 = std::fs::read_to_string(port_file)
                .ok()?
                .trim()
                .parse()
                .ok()?;
            // A killed server's port answers nothing.
            crate::support::connect(port, crate::support::deadline())?;
            let status = crate::support::Client { port }.get("/api/status");
            (status.status == 200 && status.json()["pid"] == pid).then_some(port)
        })
        .unwrap_or_else(|| panic!("no port file naming this server: {}", self.stderr()))
    }

    fn stop(&mut self) {
        crate::support::signal(self.child.id(), "-TERM");
        assert!(self.exit().success(), "{}", self.stderr());
    }
}

impl Drop for Custom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A `--port-file` naming another program's file of digits (a pid file): it was overwritten,
/// then deleted at exit. Now the server refuses it (exit 1, naming it) and writes nothing.
#[test]
fn a_file_of_digits_that_we_did_not_write_is_refused_and_left_alone() {
    let home = TempDir::new("portfile-pid");
    let run = home.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let pid_file = run.join("service.pid");
    for digits in ["4242\n", "4242", "0", "65535", " 17 \n"] {
        std::fs::write(&pid_file, digits).unwrap();
        let mut s = Custom::spawn(home.path(), &pid_file);
        let status = s.exit();
        assert_eq!(status.code(), Some(1), "{digits:?}: {}", s.stderr());
        let err = s.stderr();
        assert!(
            err.contains(&pid_file.display().to_string()) && err.contains("no server of ours"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&pid_file).unwrap(), digits);
        assert_eq!(names_in(&run), ["service.pid"], "nothing written beside it");
    }
}

/// A server removes the port file it wrote, and only that one: not a file with the same
/// digits put in its place. A port file of ours left by a killed server (its secret beside
/// it) is still taken over at any path.
#[test]
fn a_server_removes_only_the_port_file_it_wrote() {
    let home = TempDir::new("portfile-own");
    let run = home.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let port_file = run.join("debugger.port");
    // Variant: untouched, it goes at exit with its secret.
    let mut s = Custom::spawn(home.path(), &port_file);
    let port = s.port(&port_file);
    assert_eq!(
        names_in(&run),
        [
            "debugger.port".to_owned(),
            format!("debugger.port.{port}.secret")
        ]
    );
    s.stop();
    assert_eq!(names_in(&run), Vec::<String>::new());
    // Variant: replaced by another program's file holding the same digits.
    let mut s = Custom::spawn(home.path(), &port_file);
    let port = s.port(&port_file);
    std::fs::remove_file(&port_file).unwrap();
    std::fs::write(&port_file, port.to_string()).unwrap();
    s.stop();
    assert_eq!(
        std::fs::read_to_string(&port_file).unwrap(),
        port.to_string()
    );
    assert_eq!(names_in(&run), ["debugger.port"], "only our secret went");
    std::fs::remove_file(&port_file).unwrap();
    // Variant: a killed server's port file is ours, and the next server takes it over.
    let mut killed = Custom::spawn(home.path(), &port_file);
    let old = killed.port(&port_file);
    crate::support::signal(killed.child.id(), "-KILL");
    killed.exit();
    let mut next = Custom::spawn(home.path(), &port_file);
    let new = next.port(&port_file);
    assert_ne!(new, old);
    assert!(
        !run.join(format!("debugger.port.{old}.secret")).exists(),
        "the stale secret goes"
    );
    next.stop();
    assert_eq!(names_in(&run), Vec::<String>::new());
}
