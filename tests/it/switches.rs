//! The switches of breakpoints: one breakpoint switched off (`POST /api/breakpoints/<name>/enabled`)
//! and the master switch (`POST /api/pausing`), played through the client protocol over HTTP,
//! and both across a restart with `--db`.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{call_start_body, complete_body, item, pause_id, Client, Server, TempDir};

/// Starts a call of `method` with one int argument.
fn start(c: &Client, method: &str, n: i64) -> Value {
    c.post_ok(
        "/api/call/start",
        &call_start_body(method, vec![item(&json!(n), 2)], json!({})),
    )
}

/// A call that runs through without any pause: its start answers `action` (continue or
/// replace), its completion `{"status":"ok"}` (no after-pause).
fn runs_through(c: &Client, method: &str, n: i64) -> Value {
    let started = start(c, method, n);
    assert_ne!(started["action"], "poll", "{method} paused: {started}");
    let done = c.post_ok(
        "/api/call/complete",
        &complete_body(started["call_id"].as_str().unwrap(), &json!(n)),
    );
    assert_eq!(
        done,
        json!({"status": "ok"}),
        "{method} paused after the call"
    );
    started
}

/// A call that pauses before it runs; it is continued at once. Returns its call id.
fn pauses_before(c: &Client, method: &str, n: i64) -> String {
    let started = start(c, method, n);
    let p = pause_id(&started);
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "continue"}),
    );
    started["call_id"].as_str().unwrap().to_owned()
}

fn log_messages(c: &Client) -> Vec<String> {
    c.get_ok("/api/logpoints")["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_breakpoint_switched_off_lets_its_calls_run_and_keeps_every_setting() {
    let server = Server::start(&[]);
    let c = server.client();
    for f in ["f", "g"] {
        c.post_ok(
            "/api/functions",
            &json!({"function_name": f, "signature": "(x)"}),
        );
    }
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": "(x)", "behavior": "stop",
                "condition": "args[0] > 1"}),
    );
    c.post_ok(
        "/api/breakpoints/f/after_behavior",
        &json!({"behavior": "stop_exception"}),
    );
    c.post_ok(
        "/api/breakpoints/f/replacement",
        &json!({"replacement_function": "g"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "log", "log_message": "x={args[0]}"}),
    );
    // Counted once while on: the count is kept while off.
    let id = pauses_before(&c, "f", 5);
    let after = c.post_ok("/api/call/complete", &complete_body(&id, &json!(5)));
    c.post_ok(
        &format!("/api/paused/{}/continue", pause_id(&after)),
        &json!({"action": "continue"}),
    );
    runs_through(&c, "log", 1);
    assert_eq!(log_messages(&c), ["x=1"]);
    let before = c.get_ok("/api/breakpoints");
    assert_eq!(
        before["breakpoint_enabled"],
        json!({"f": true, "log": true})
    );

    // Switched off: 404 for an unknown breakpoint, 400 for a body that is not a switch.
    let e = c.post_err(
        "/api/breakpoints/nope/enabled",
        &json!({"enabled": false}),
        404,
    );
    assert_eq!(e["error"], "breakpoint_not_found");
    for (body, code) in [
        (json!({}), "missing_enabled"),
        (json!({"enabled": "false"}), "invalid_enabled"),
    ] {
        let e = c.post_err("/api/breakpoints/f/enabled", &body, 400);
        assert_eq!(e["error"], code, "{e}");
        assert!(e["message"].as_str().unwrap().contains("enabled"), "{e}");
    }
    for name in ["f", "log"] {
        assert_eq!(
            c.post_ok(
                &format!("/api/breakpoints/{name}/enabled"),
                &json!({"enabled": false})
            ),
            json!({"status": "ok", "function_name": name, "enabled": false})
        );
    }
    // Its calls run as with no breakpoint: no pause before or after, no replacement, no log
    // line, no count.
    for n in [5, 6] {
        let started = runs_through(&c, "f", n);
        assert_eq!(started["action"], "continue", "{started}");
    }
    runs_through(&c, "log", 2);
    assert_eq!(
        log_messages(&c),
        ["x=1"],
        "a logpoint switched off logs nothing"
    );
    let off = c.get_ok("/api/breakpoints");
    let mut expected = before.clone();
    expected["breakpoint_enabled"] = json!({"f": false, "log": false});
    assert_eq!(off, expected, "every setting and count is kept");
    assert_eq!(off["breakpoint_hit_counts"]["f"], 1);
    assert_eq!(
        c.get_ok("/api/pausing"),
        json!({"pausing": true, "will_pause": 0, "breakpoints": 2})
    );
    // The program's re-registration leaves the switch as it is.
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": "(x)"}),
    );
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_enabled"]["f"],
        false
    );

    // Switched on again: it pauses, counts and logs as before.
    for name in ["f", "log"] {
        c.post_ok(
            &format!("/api/breakpoints/{name}/enabled"),
            &json!({"enabled": true}),
        );
    }
    pauses_before(&c, "f", 7);
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_hit_counts"]["f"],
        2
    );
    runs_through(&c, "log", 3);
    assert_eq!(log_messages(&c), ["x=1", "x=3"]);
    assert_eq!(c.get_ok("/api/pausing")["will_pause"], 1);
}

#[test]
fn with_pausing_off_no_call_pauses_and_with_it_on_they_pause_again() {
    let server = Server::start(&[]);
    let c = server.client();
    for f in ["plain", "stops", "replaced", "other"] {
        c.post_ok(
            "/api/breakpoints",
            &json!({"function_name": f, "signature": "(x)"}),
        );
    }
    c.post_ok(
        "/api/breakpoints/stops/behavior",
        &json!({"behavior": "stop"}),
    );
    c.post_ok(
        "/api/breakpoints/stops/after_behavior",
        &json!({"behavior": "stop_exception"}),
    );
    c.post_ok(
        "/api/breakpoints/replaced/replacement",
        &json!({"replacement_function": "other"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "gated", "condition": "args[0] == 1", "hit_condition": "1"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "log", "log_message": "x={args[0]}"}),
    );
    assert_eq!(c.get_ok("/api/status")["pausing"], true);
    assert_eq!(c.get_ok("/api/pausing")["will_pause"], 5);

    let e = c.post_err("/api/pausing", &json!({"pausing": "off"}), 400);
    assert_eq!(e["error"], "invalid_pausing");
    c.post_err("/api/pausing", &json!({}), 400);
    assert_eq!(
        c.post_ok("/api/pausing", &json!({"pausing": false})),
        json!({"status": "ok", "pausing": false})
    );
    assert_eq!(c.get_ok("/api/status")["pausing"], false);
    assert_eq!(c.get_ok("/api/breakpoints")["pausing"], false);
    assert_eq!(
        c.get_ok("/api/pausing"),
        json!({"pausing": false, "will_pause": 0, "breakpoints": 6})
    );
    // Nothing pauses: not the global default stop, not a breakpoint's own stop, not a
    // condition; the replacement still applies and the logpoint still logs.
    for f in ["plain", "stops", "gated", "unknown"] {
        assert_eq!(runs_through(&c, f, 1)["action"], "continue");
    }
    let replaced = runs_through(&c, "replaced", 1);
    assert_eq!(
        (&replaced["action"], &replaced["function_name"]),
        (&json!("replace"), &json!("other"))
    );
    runs_through(&c, "log", 4);
    assert_eq!(log_messages(&c), ["x=4"]);
    // A call that started while pausing was on does not pause after it once it is off.
    c.post_ok("/api/pausing", &json!({"pausing": true}));
    let started = start(&c, "plain", 2);
    let p = pause_id(&started);
    c.post_ok("/api/pausing", &json!({"pausing": false}));
    assert_eq!(
        c.get_ok("/api/paused")["paused"].as_array().unwrap().len(),
        1,
        "a call paused already stays paused"
    );
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "continue"}),
    );
    let done = c.post_ok(
        "/api/call/complete",
        &complete_body(started["call_id"].as_str().unwrap(), &json!(2)),
    );
    assert_eq!(done, json!({"status": "ok"}));
    // The settings are all kept; the hit condition counted nothing while off.
    let listing = c.get_ok("/api/breakpoints");
    assert_eq!(listing["breakpoint_behaviors"]["stops"], "stop");
    assert_eq!(listing["breakpoint_hit_counts"]["gated"], 0);

    // On again: the breakpoints pause as before.
    c.post_ok("/api/pausing", &json!({"pausing": true}));
    pauses_before(&c, "plain", 1);
    pauses_before(&c, "stops", 1);
    pauses_before(&c, "gated", 1);
    assert_eq!(runs_through(&c, "unknown", 1)["action"], "continue");
}

fn db_arg(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn both_switches_survive_a_restart_with_a_database() {
    let home = TempDir::new("switches");
    let db = home.path().join("s.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    for f in ["off", "on"] {
        c.post_ok(
            "/api/breakpoints",
            &json!({"function_name": f, "behavior": "stop"}),
        );
    }
    c.post_ok("/api/breakpoints/off/enabled", &json!({"enabled": false}));
    c.post_ok("/api/pausing", &json!({"pausing": false}));
    let listing = c.get_ok("/api/breakpoints");
    assert!(server.signal_and_wait("-TERM").success());

    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    assert_eq!(
        c.get_ok("/api/breakpoints"),
        listing,
        "read back identically"
    );
    assert_eq!(
        listing["breakpoint_enabled"],
        json!({"off": false, "on": true})
    );
    assert_eq!(listing["pausing"], false);
    assert!(
        server.stderr().contains("pausing is off"),
        "the log says why nothing pauses: {}",
        server.stderr()
    );
    runs_through(&c, "on", 1);
    runs_through(&c, "off", 1);
    // Pausing on again, after another restart: the breakpoint switched on pauses, the other
    // one still runs.
    c.post_ok("/api/pausing", &json!({"pausing": true}));
    assert!(server.signal_and_wait("-TERM").success());
    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    assert_eq!(c.get_ok("/api/status")["pausing"], true);
    pauses_before(&c, "on", 1);
    runs_through(&c, "off", 1);
}

#[test]
fn a_database_from_before_the_switches_opens_with_everything_on() {
    let home = TempDir::new("switches-old");
    let db = home.path().join("old.db");
    {
        use cideldill_server::store::{IndexKey, RecordKind, Store};
        let (store, _) = Store::open(&db).unwrap();
        // A settings record as the version before the switches wrote it.
        let settings = json!({"settings": 1, "default_behavior": "stop", "full": true,
            "breakpoints": [{"function_name": "f", "behavior": "stop",
                             "after_behavior": "go", "one_shot": false}]});
        store
            .append_records(&[(RecordKind::Settings, &settings, IndexKey::default())])
            .unwrap();
    }
    let server = Server::start_in(home.path(), &["--db", &db_arg(&db)]);
    let c = server.client();
    let listing = c.get_ok("/api/breakpoints");
    assert_eq!(listing["breakpoint_enabled"], json!({"f": true}));
    assert_eq!(listing["pausing"], true);
    pauses_before(&c, "f", 1);
}

#[test]
fn an_agent_switches_breakpoints_and_pausing_through_the_mcp_tools() {
    let s = crate::mcp_support::McpServer::initialized("2025-11-25");
    let c = s.http();
    s.call_ok("breakpoint_add", json!({"function_name": "f"}));
    s.call_ok("breakpoint_add", json!({"function_name": "g"}));
    let e = s.call_err(
        "breakpoint_set_enabled",
        json!({"function_name": "nope", "enabled": false}),
    );
    assert_eq!(e["error"], "breakpoint_not_found", "{e}");
    assert_eq!(
        s.call_ok(
            "breakpoint_set_enabled",
            json!({"function_name": "f", "enabled": false})
        ),
        json!({"status": "ok", "function_name": "f", "enabled": false})
    );
    let listing = s.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(
        (&listing["enabled"], &listing["pausing"]),
        (&json!({"f": false, "g": true}), &json!(true))
    );
    runs_through(&c, "f", 1);
    pauses_before(&c, "g", 1);
    assert_eq!(
        s.call_ok("breakpoint_set_pausing", json!({"pausing": false})),
        json!({"status": "ok", "pausing": false})
    );
    assert_eq!(
        s.call_ok("breakpoint_list_breakpoints", json!({}))["pausing"],
        false
    );
    // The after-pause of g's call does not come: pausing is off by now.
    runs_through(&c, "g", 2);
    s.call_ok("breakpoint_set_pausing", json!({"pausing": true}));
    pauses_before(&c, "g", 3);
}
