//! The debug-client protocol end to end (protocol doc §0, §2.4, §2.5, §2.9, §2.11): what the
//! Python client sends, in the order it sends it, against the real binary.

use serde_json::{json, Value};

use crate::support::{
    call_start_body, complete_body, corpus_pickle, item, item_ref, pause_id, raw_item, Server,
};
use cideldill_server::cas::{cid_of, decode_base64_lenient};
use cideldill_server::pickle_write::dumps;

fn obj_keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn a_python_client_session_pauses_twice_per_call() {
    let server = Server::start(&[]);
    let c = server.client();
    // 1. Connection check, 2. registration (breakpoint, function, registration event).
    assert_eq!(c.get("/api/breakpoints").status, 200);
    let bp = c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "add", "timestamp": 1.5, "signature": "(x, y=1)"}),
    );
    assert_eq!(bp, json!({"status": "ok", "function_name": "add"}));
    let f = c.post_ok(
        "/api/functions",
        &json!({"function_name": "add", "signature": "(x, y=1)", "function_client_ref": 1}),
    );
    assert_eq!(f["status"], "ok");
    let identity = json!({"process_pid": 16759, "process_start_time": 1795311683.7211661});
    let mut register = json!({
        "method_name": "with_debug.register", "status": "registered", "timestamp": 2.0,
        "call_site": {"timestamp": 2.0, "stack_trace": []},
        "pretty_args": [{"__cideldill_placeholder__": true, "summary": "add", "client_ref": 1}],
        "pretty_kwargs": {},
        "pretty_result": {"event": "with_debug_registration", "function_name": "add", "signature": "(x, y=1)",
                          "alias": null, "target_type": "builtins.function"},
    });
    register
        .as_object_mut()
        .unwrap()
        .extend(identity.as_object().unwrap().clone());
    assert_eq!(
        c.post_ok("/api/call/event", &register),
        json!({"status": "ok"})
    );
    let functions = c.get_ok("/api/functions");
    assert_eq!(functions["functions"], json!(["add"]));
    assert_eq!(functions["function_signatures"]["add"], "(x, y=1)");
    let meta = &functions["function_metadata"]["add"];
    assert_eq!(meta["client_ref"], 1);
    assert!(meta["registered_at"].is_f64());
    assert_eq!(meta["last_process_key"], "1795311683.721166+16759");

    // 3. The spurious attribute-lookup event on every call.
    let mut spurious = json!({
        "method_name": "__getattr__('_cideldill_alias_name')", "status": "exception", "timestamp": 3.0,
        "call_site": {"timestamp": 3.0, "target_cid": "x", "stack_trace": []},
        "pretty_args": [], "pretty_kwargs": {},
        "exception": {"type": "AttributeError", "message": "no alias", "target_type": "function",
                      "requested_attribute": "_cideldill_alias_name"},
    });
    spurious
        .as_object_mut()
        .unwrap()
        .extend(identity.as_object().unwrap().clone());
    assert_eq!(
        c.post_ok("/api/call/event", &spurious),
        json!({"status": "ok"})
    );

    // 4. Call start pauses (breakpoint + global stop).
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body(
            "add",
            vec![item(&json!(2), 2)],
            json!({"y": item(&json!(3), 3)}),
        ),
    );
    assert_eq!(start["action"], "poll");
    assert_eq!(start["poll_interval_ms"], 100);
    assert_eq!(start["timeout_ms"], 60000);
    let call_id = start["call_id"].as_str().unwrap().to_owned();
    let before = pause_id(&start);

    // 5. Polling while waiting, with the REPL poll beside it.
    assert_eq!(
        c.get_ok(&format!("/api/poll/{before}")),
        json!({"status": "waiting"})
    );
    assert_eq!(
        c.get_ok(&format!("/api/poll-repl/{before}")),
        json!({"eval_id": null})
    );
    let paused = c.get_ok("/api/paused");
    assert_eq!(paused["paused"][0]["id"], before.as_str());
    c.post_ok(
        &format!("/api/paused/{before}/continue"),
        &json!({"action": "continue"}),
    );
    let ready = c.get_ok(&format!("/api/poll/{before}"));
    assert_eq!(
        ready,
        json!({"status": "ready", "action": {"action": "continue"}})
    );
    assert_eq!(
        c.get_ok(&format!("/api/poll/{before}")),
        ready,
        "polling is idempotent"
    );
    assert_eq!(c.get_ok("/api/paused")["paused"], json!([]));

    // 6. Completion answers with the after-pause, which has no call_id.
    let done = c.post_ok("/api/call/complete", &complete_body(&call_id, &json!(5)));
    assert_eq!(done["action"], "poll");
    assert!(
        done.get("call_id").is_none(),
        "after-pause answer carries no call_id: {done}"
    );
    let after = pause_id(&done);
    assert_ne!(after, before);
    assert_eq!(
        c.get_ok(&format!("/api/poll/{before}")),
        json!({"status": "waiting"}),
        "before-pause action cleaned up"
    );
    let paused = c.get_ok("/api/paused");
    let p = &paused["paused"][0];
    assert_eq!(p["id"], after.as_str());
    assert!(
        p["call_data"].get("pretty_result").is_some(),
        "after-pauses carry pretty_result"
    );
    assert_eq!(p["call_data"]["pause_reason"], "breakpoint");

    // 7. After pause: continue.
    c.post_ok(
        &format!("/api/paused/{after}/continue"),
        &json!({"action": "continue"}),
    );
    assert_eq!(c.get_ok(&format!("/api/poll/{after}"))["status"], "ready");

    // Two events and one call became call records, newest first.
    let records = c.get_ok("/api/call-records");
    assert_eq!(records["total_count"], 3);
    let names: Vec<&str> = records["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["method_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "add",
            "__getattr__('_cideldill_alias_name')",
            "with_debug.register"
        ]
    );
    let rec = &records["calls"][0];
    assert_eq!(rec["call_id"], call_id.as_str());
    assert_eq!(rec["status"], "success");
    assert_eq!(rec["started_at"], 1795311683.7775);
    assert_eq!(rec["completed_at"], 1795311690.5);
    assert_eq!(rec["result_cid"], item(&json!(5), 0)["cid"]);
    let history = c.get_ok("/api/breakpoints/add/history");
    assert_eq!(history["history"].as_array().unwrap().len(), 1);
    assert_eq!(history["history"][0]["call_data"]["status"], "success");
}

#[test]
fn call_start_requires_process_identity() {
    let server = Server::start(&[]);
    let c = server.client();
    for field in ["process_pid", "process_start_time"] {
        let mut body = call_start_body("f", vec![], json!({}));
        body.as_object_mut().unwrap().remove(field);
        let err = c.post_err("/api/call/start", &body, 400);
        assert_eq!(err["error"], "missing_process_identity");
    }
    let mut body = call_start_body("f", vec![], json!({}));
    body["process_pid"] = json!("not a number");
    assert_eq!(
        c.post_err("/api/call/start", &body, 400)["error"],
        "missing_process_identity"
    );
    // Python's int() and float() accept numeric strings.
    let mut body = call_start_body("f", vec![], json!({}));
    body["process_pid"] = json!("12");
    body["process_start_time"] = json!("2.5");
    assert_eq!(c.post_ok("/api/call/start", &body)["action"], "continue");
}

#[test]
fn missing_cids_are_reported_then_the_resend_is_accepted() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let a = json!("never sent before");
    let body = call_start_body(
        "f",
        vec![item_ref(&a, 2), item(&json!(1), 3)],
        json!({"k": item_ref(&json!([1, 2]), 4)}),
    );
    let err = c.post_err("/api/call/start", &body, 400);
    assert_eq!(err["error"], "cid_not_found");
    assert_eq!(err["message"], "Resend with full data");
    assert_eq!(
        err["missing_cids"],
        json!([item(&a, 0)["cid"], item(&json!([1, 2]), 0)["cid"]])
    );
    assert_eq!(
        c.get_ok("/api/status")["open_calls"],
        0,
        "nothing registered by the refused start"
    );
    // The client resends once with data for the listed items.
    let body = call_start_body(
        "f",
        vec![item(&a, 2), item(&json!(1), 3)],
        json!({"k": item(&json!([1, 2]), 4)}),
    );
    let ok = c.post_ok("/api/call/start", &body);
    assert_eq!(ok["action"], "poll");
    // Now stored: a later reference without data is fine.
    let body = call_start_body("f", vec![item_ref(&a, 2)], json!({}));
    assert_eq!(c.post_ok("/api/call/start", &body)["action"], "poll");
}

#[test]
fn an_item_whose_twin_in_the_same_request_has_data_is_not_missing() {
    let server = Server::start(&[]);
    let c = server.client();
    let v = json!("shared object");
    let body = call_start_body("f", vec![item(&v, 2), item_ref(&v, 2)], json!({}));
    assert_eq!(c.post_ok("/api/call/start", &body)["action"], "continue");
}

#[test]
fn call_start_rejects_bad_payloads_with_the_original_bodies() {
    let server = Server::start(&[]);
    let c = server.client();
    let good = item(&json!(10), 2);
    let mut wrong = good.clone();
    wrong["cid"] = json!(cid_of(b"something else"));
    let err = c.post_err(
        "/api/call/start",
        &call_start_body("f", vec![wrong.clone()], json!({})),
        400,
    );
    assert_eq!(err["error"], "cid_mismatch");
    assert_eq!(
        err["message"],
        "Provided CID does not match SHA-512 hash of data"
    );
    assert_eq!(err["expected_cid"], good["cid"]);
    assert_eq!(err["provided_cid"], wrong["cid"]);

    let bad_b64 = json!({"cid": "abc", "client_ref": 2, "data": "Q"});
    let err = c.post_err(
        "/api/call/start",
        &call_start_body("f", vec![bad_b64], json!({})),
        400,
    );
    assert_eq!(
        err,
        json!({"error": "invalid_dill", "message": "Invalid dill payload"})
    );

    let bad_json = json!({"cid": "abc", "data": "{nope", "serialization_format": "json"});
    let err = c.post_err(
        "/api/call/start",
        &call_start_body("f", vec![bad_json], json!({})),
        400,
    );
    assert_eq!(
        err,
        json!({"error": "invalid_json", "message": "Invalid JSON payload"})
    );

    let bad_format = json!({"cid": "abc", "data": "1", "serialization_format": "yaml"});
    let err = c.post_err(
        "/api/call/start",
        &call_start_body("f", vec![bad_format], json!({})),
        400,
    );
    assert_eq!(err["error"], "invalid_serialization_format");

    let mut body = call_start_body("f", vec![], json!({}));
    body["preferred_format"] = json!("xml");
    assert_eq!(
        c.post_err("/api/call/start", &body, 400)["error"],
        "invalid_preferred_format"
    );

    let mut body = call_start_body("f", vec![], json!({}));
    body["args"] = json!("not a list");
    assert_eq!(
        c.post_err("/api/call/start", &body, 400)["error"],
        "invalid_payload"
    );
    assert_eq!(c.get_ok("/api/status")["open_calls"], 0);
}

#[test]
fn json_items_from_the_browser_client_are_verified_and_rendered() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let text = r#"{"a": [1, 2.5, null]}"#;
    let it = json!({"cid": cid_of(text.as_bytes()), "client_ref": 1, "data": text, "serialization_format": "json"});
    let mut body = call_start_body("f", vec![it], json!({}));
    body["preferred_format"] = json!("json");
    body["process_pid"] = json!(0);
    body["page_url"] = json!("http://localhost:8000/");
    let start = c.post_ok("/api/call/start", &body);
    let pid = pause_id(&start);
    let paused = c.get_ok("/api/paused");
    let cd = &paused["paused"][0]["call_data"];
    assert_eq!(cd["pretty_args"], json!([{"a": [1, 2.5, null]}]));
    assert_eq!(cd["page_url"], "http://localhost:8000/");
    // A JSON caller gets JSON-encoded modified arguments.
    c.post_ok(
        &format!("/api/paused/{pid}/continue"),
        &json!({"action": "modify", "modified_args": [[1, "x"]]}),
    );
    let action = c.get_ok(&format!("/api/poll/{pid}"))["action"].clone();
    let arg = &action["modified_args"][0];
    assert_eq!(arg["serialization_format"], "json");
    assert_eq!(arg["data"], r#"[1,"x"]"#);
    assert_eq!(arg["cid"], cid_of(br#"[1,"x"]"#));
}

#[test]
fn call_ids_carry_server_time_a_counter_and_128_random_bits() {
    let server = Server::start(&[]);
    let c = server.client();
    let ids: Vec<String> = (0..3)
        .map(|_| {
            c.post_ok("/api/call/start", &call_start_body("f", vec![], json!({})))["call_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut keys = std::collections::HashSet::new();
    for (i, id) in ids.iter().enumerate() {
        let (time, rest) = id.split_once('-').unwrap();
        let (counter, key) = rest.split_once('-').unwrap();
        let (secs, frac) = time.split_once('.').unwrap();
        assert!(secs.parse::<u64>().unwrap() > 1_700_000_000, "{id}");
        assert_eq!(frac.len(), 6, "{id}");
        assert_eq!(counter, format!("{:03}", i + 1), "{id}");
        // The random part: what makes a call id unguessable (only its caller completes it).
        assert_eq!(key.len(), 32, "{id}");
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert!(keys.insert(key.to_owned()), "{id}");
    }
}

#[test]
fn items_with_a_client_ref_leave_object_snapshots() {
    let server = Server::start(&[]);
    let c = server.client();
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("f", vec![item(&json!(["alpha"]), 7)], json!({})),
    );
    let call_id = start["call_id"].as_str().unwrap();
    c.post_ok(
        "/api/call/complete",
        &complete_body(call_id, &json!(["alpha", "beta"])),
    );
    let snaps = c.get_ok("/api/snapshots?client_ref=7")["snapshots"].clone();
    assert_eq!(snaps.as_array().unwrap().len(), 1, "{snaps}");
    assert_eq!(snaps[0]["role"], "arg:0");
    assert_eq!(snaps[0]["process_key"], "1795311683.721166+16759");
    assert_eq!(snaps[0]["call_id"], call_id);
    let result = c.get_ok("/api/snapshots?client_ref=9")["snapshots"].clone();
    assert_eq!(result[0]["role"], "result");
    assert_eq!(result[0]["cid"], item(&json!(["alpha", "beta"]), 0)["cid"]);
    assert_eq!(
        c.get_ok("/api/snapshots?client_ref=1")["snapshots"][0]["role"],
        "target"
    );
}

#[test]
fn paused_call_data_has_the_documented_fields() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body(
            "add",
            vec![item(&json!(2), 2)],
            json!({"y": item(&json!(3), 3)}),
        ),
    );
    let p = &c.get_ok("/api/paused")["paused"][0];
    assert_eq!(
        obj_keys(p),
        [
            "id",
            "when",
            "call_data",
            "paused_at",
            "repl_sessions",
            "last_poll_at",
            "gone"
        ]
    );
    assert_eq!(p["when"], "before");
    assert!(p["paused_at"].is_f64());
    assert!(p["last_poll_at"].is_f64());
    assert_eq!(p["gone"], false);
    let cd = &p["call_data"];
    for key in [
        "method_name",
        "target",
        "pretty_target",
        "args",
        "kwargs",
        "pretty_args",
        "pretty_kwargs",
        "signature",
        "call_site",
        "page_url",
        "preferred_format",
        "process_pid",
        "process_start_time",
        "process_key",
        "call_id",
        "pause_reason",
    ] {
        assert!(cd.get(key).is_some(), "call_data lacks {key}: {cd}");
    }
    assert_eq!(cd["call_id"], start["call_id"]);
    assert_eq!(cd["process_pid"], 16759);
    assert_eq!(cd["process_start_time"], 1795311683.7211661);
    assert_eq!(cd["preferred_format"], "dill");
    assert_eq!(
        cd["args"][0]["data"],
        item(&json!(2), 2)["data"],
        "raw items keep their data"
    );
    assert_eq!(cd["pause_reason"], "breakpoint");
    assert_eq!(
        cd["pretty_kwargs"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["y"]
    );
}

#[test]
fn a_call_without_pause_continues_or_is_replaced() {
    let server = Server::start(&[]);
    let c = server.client();
    assert_eq!(
        c.post_ok(
            "/api/call/start",
            &call_start_body("free", vec![], json!({}))
        )["action"],
        "continue"
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "slow", "signature": "(x)"}),
    );
    c.post_ok(
        "/api/functions",
        &json!({"function_name": "fast", "signature": "(x)"}),
    );
    c.post_ok(
        "/api/breakpoints/slow/replacement",
        &json!({"replacement_function": "fast"}),
    );
    // With the breakpoint stopping, the pause wins over the replacement.
    assert_eq!(
        c.post_ok(
            "/api/call/start",
            &call_start_body("slow", vec![], json!({}))
        )["action"],
        "poll"
    );
    c.post_ok("/api/breakpoints/slow/behavior", &json!({"behavior": "go"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("slow", vec![], json!({})),
    );
    assert_eq!(obj_keys(&start), ["call_id", "action", "function_name"]);
    assert_eq!(start["action"], "replace");
    assert_eq!(start["function_name"], "fast");
    // Global go: nothing pauses, not even after.
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    c.post_ok("/api/breakpoints", &json!({"function_name": "other"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("other", vec![], json!({})),
    );
    assert_eq!(start["action"], "continue");
    let done = c.post_ok(
        "/api/call/complete",
        &complete_body(start["call_id"].as_str().unwrap(), &json!(1)),
    );
    assert_eq!(done, json!({"status": "ok"}));
}

#[test]
fn continue_actions_are_encoded_for_the_python_client() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let start_pause = || {
        pause_id(&c.post_ok(
            "/api/call/start",
            &call_start_body("f", vec![item(&json!(2), 2)], json!({})),
        ))
    };

    let p = start_pause();
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "modify", "modified_args": [10], "modified_kwargs": {"y": 20}}),
    );
    let action = c.get_ok(&format!("/api/poll/{p}"))["action"].clone();
    assert_eq!(action["action"], "modify");
    let decode = |it: &Value| decode_base64_lenient(it["data"].as_str().unwrap()).unwrap();
    assert_eq!(decode(&action["modified_args"][0]), dumps(&json!(10)));
    assert_eq!(
        action["modified_args"][0]["data"], "gARLCi4=",
        "the verified bytes of pickle.dumps(10, protocol=4)"
    );
    assert_eq!(
        action["modified_args"][0]["cid"],
        cid_of(&dumps(&json!(10)))
    );
    assert_eq!(action["modified_args"][0]["serialization_format"], "dill");
    assert_eq!(decode(&action["modified_kwargs"]["y"]), dumps(&json!(20)));
    // The encoded objects are stored too.
    let obj = c.get_ok(&format!(
        "/api/objects/{}",
        action["modified_args"][0]["cid"].as_str().unwrap()
    ));
    assert_eq!(obj["size"], 5);

    let p = start_pause();
    let original = item_ref(&json!(2), 2);
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "modify", "modified_args": [original]}),
    );
    let action = c.get_ok(&format!("/api/poll/{p}"))["action"].clone();
    assert_eq!(
        action["modified_args"][0],
        item_ref(&json!(2), 2),
        "items pass through untouched"
    );

    let p = start_pause();
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "skip", "fake_result": 99}),
    );
    let action = c.get_ok(&format!("/api/poll/{p}"))["action"].clone();
    assert_eq!(action["fake_result_data"], "gARLYy4=");
    assert_eq!(action["fake_result_serialization_format"], "dill");
    assert_eq!(action["fake_result_cid"], cid_of(&dumps(&json!(99))));

    let p = start_pause();
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "raise", "exception_type": "ValueError", "exception_message": "bad"}),
    );
    let action = c.get_ok(&format!("/api/poll/{p}"))["action"].clone();
    assert_eq!(
        action,
        json!({"action": "raise", "exception_type": "ValueError", "exception_message": "bad"})
    );

    let p = start_pause();
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "continue", "replacement_function": "g"}),
    );
    let action = c.get_ok(&format!("/api/poll/{p}"))["action"].clone();
    assert_eq!(action, json!({"action": "replace", "function_name": "g"}));
}

#[test]
fn completion_records_results_and_exceptions() {
    let server = Server::start(&[]);
    let c = server.client();
    // No breakpoint: no pauses, but every call is recorded.
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("div", vec![item(&json!(1), 2)], json!({})),
    );
    let call_id = start["call_id"].as_str().unwrap();
    let exc = raw_item(&corpus_pickle("exc_zero_division"), 11);
    let body = json!({
        "call_id": call_id, "timestamp": 5.0, "status": "exception",
        "process_pid": 16759, "process_start_time": 1795311683.7211661,
        "exception_type": "ZeroDivisionError", "exception_message": "division by zero",
        "exception_traceback": "Traceback (most recent call last): ...",
        "exception_cid": exc["cid"], "exception_client_ref": 11, "exception_data": exc["data"],
    });
    assert_eq!(
        c.post_ok("/api/call/complete", &body),
        json!({"status": "ok"})
    );
    let rec = c.get_ok("/api/call-records?status=exception")["calls"][0].clone();
    assert_eq!(rec["call_id"], call_id);
    assert_eq!(rec["exception_type"], "ZeroDivisionError");
    // The pickled exception decodes to the original's exception dict (protocol doc §4.5).
    assert_eq!(rec["exception"]["__cideldill_exception__"], true);
    assert_eq!(
        rec["exception"]["summary"],
        "builtins.ZeroDivisionError: division by zero"
    );
    assert_eq!(
        rec["exception"]["repr_text"],
        "ZeroDivisionError('division by zero')"
    );
    assert_eq!(rec["exception"]["args"], json!(["division by zero"]));
    assert_eq!(
        rec["exception_traceback"],
        "Traceback (most recent call last): ..."
    );
    assert_eq!(rec["exception_cid"], exc["cid"]);

    // A placeholder (the exception could not be pickled) gives way to the text form (§4.3).
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("div", vec![], json!({})),
    );
    let ph = raw_item(&corpus_pickle("placeholder_minimal_no_name"), 12);
    let mut body2 = body.clone();
    body2["call_id"] = start["call_id"].clone();
    body2["exception_cid"] = ph["cid"].clone();
    body2["exception_data"] = ph["data"].clone();
    c.post_ok("/api/call/complete", &body2);
    let rec = c.get_ok("/api/call-records?status=exception")["calls"][0].clone();
    assert_eq!(
        rec["exception"]["summary"],
        "ZeroDivisionError: division by zero"
    );
    assert_eq!(
        rec["exception"]["traceback"],
        "Traceback (most recent call last): ..."
    );
    assert!(
        c.get(&format!("/api/objects/{}", exc["cid"].as_str().unwrap()))
            .status
            == 200
    );

    // A result CID that was never stored renders as missing; nothing fails.
    let start = c.post_ok("/api/call/start", &call_start_body("g", vec![], json!({})));
    let cid = cid_of(b"lost");
    let body = json!({"call_id": start["call_id"], "timestamp": 6.0, "status": "success",
                      "process_pid": 16759, "process_start_time": 1795311683.7211661,
                      "result_cid": cid, "result_client_ref": 3});
    c.post_ok("/api/call/complete", &body);
    let rec = c.get_ok("/api/call-records?function=g")["calls"][0].clone();
    assert_eq!(rec["pretty_result"], format!("<cid:{cid} missing>"));
}

#[test]
fn completion_rejects_bad_payloads_and_ignores_unknown_calls() {
    let server = Server::start(&[]);
    let c = server.client();
    let start = c.post_ok("/api/call/start", &call_start_body("f", vec![], json!({})));
    let mut body = complete_body(start["call_id"].as_str().unwrap(), &json!(1));
    body["result_cid"] = json!(cid_of(b"other"));
    let err = c.post_err("/api/call/complete", &body, 400);
    assert_eq!(err["error"], "cid_mismatch");
    assert_eq!(
        c.get_ok("/api/call-records")["total_count"],
        0,
        "a refused completion records nothing"
    );
    // Compat: an unknown call id answers ok and records nothing.
    assert_eq!(
        c.post_ok(
            "/api/call/complete",
            &complete_body("9.000000-999", &json!(1))
        ),
        json!({"status": "ok"})
    );
    assert_eq!(c.get_ok("/api/call-records")["total_count"], 0);
    assert_eq!(
        c.post_err("/api/call/complete", &json!({"status": "success"}), 400)["error"],
        "missing_call_id"
    );
}

#[test]
fn after_pauses_follow_the_after_behavior_and_accept_only_continue() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    c.post_ok("/api/breakpoints/f/behavior", &json!({"behavior": "go"}));
    // Before go, after yield under global stop: pauses only after (protocol doc §5.3).
    let start = c.post_ok("/api/call/start", &call_start_body("f", vec![], json!({})));
    assert_eq!(start["action"], "continue");
    let done = c.post_ok(
        "/api/call/complete",
        &complete_body(start["call_id"].as_str().unwrap(), &json!(1)),
    );
    let after = pause_id(&done);
    for action in ["skip", "modify", "raise", "replace"] {
        let err = c.post_err(
            &format!("/api/paused/{after}/continue"),
            &json!({"action": action}),
            400,
        );
        assert_eq!(err["error"], "invalid_action", "{action}");
    }
    c.post_ok(&format!("/api/paused/{after}/continue"), &json!({}));
    assert_eq!(
        c.get_ok(&format!("/api/poll/{after}"))["action"],
        json!({"action": "continue"})
    );

    // Global stop does not pause after an exception; after-behavior exception does.
    let start = c.post_ok("/api/call/start", &call_start_body("f", vec![], json!({})));
    let exc_body = |call_id: &Value| {
        json!({"call_id": call_id, "timestamp": 5.0, "status": "exception", "process_pid": 16759,
               "process_start_time": 1795311683.7211661, "exception_type": "mod.Boom", "exception_message": "",
               "exception_traceback": "tb"})
    };
    assert_eq!(
        c.post_ok("/api/call/complete", &exc_body(&start["call_id"])),
        json!({"status": "ok"})
    );
    c.post_ok(
        "/api/breakpoints/f/after_behavior",
        &json!({"behavior": "exception"}),
    );
    let start = c.post_ok("/api/call/start", &call_start_body("f", vec![], json!({})));
    let done = c.post_ok("/api/call/complete", &exc_body(&start["call_id"]));
    let p = pause_id(&done);
    let paused = c.get_ok("/api/paused")["paused"][0].clone();
    assert_eq!(paused["id"], p.as_str());
    assert_eq!(paused["call_data"]["pause_reason"], "exception");
    assert_eq!(paused["call_data"]["exception"]["summary"], "mod.Boom");
    assert_eq!(paused["call_data"]["exception"]["module"], "mod");
}

#[test]
fn events_become_call_records_with_fallback_fields() {
    let server = Server::start(&[]);
    let c = server.client();
    assert_eq!(
        c.post_err("/api/call/event", &json!({"method_name": "x"}), 400)["error"],
        "missing_process_identity"
    );
    c.post_ok("/api/call/event", &json!({"process_pid": 0, "process_start_time": 1.0, "event_type": "click", "page_url": "http://x/"}));
    let rec = c.get_ok("/api/call-records")["calls"][0].clone();
    assert_eq!(rec["method_name"], "click");
    assert_eq!(rec["status"], "click");
    assert_eq!(rec["pretty_args"], json!([]));
    assert_eq!(rec["pretty_kwargs"], json!({}));
    assert_eq!(rec["process_key"], "1.000000+0");
    assert_eq!(
        rec["call_id"].as_str().unwrap().len(),
        36,
        "a UUID4 when no event_id"
    );
    c.post_ok(
        "/api/call/event",
        &json!({"process_pid": 0, "process_start_time": 1.0, "event_id": "ev-1"}),
    );
    let rec = c.get_ok("/api/call-records")["calls"][0].clone();
    assert_eq!(
        (rec["call_id"].as_str(), rec["method_name"].as_str()),
        (Some("ev-1"), Some("event"))
    );

    // A pickle_error event with its placeholder payload, as sent from inside serialization.
    let placeholder = raw_item(&corpus_pickle("placeholder_minimal_no_name"), 0);
    let report =
        json!({"event_type": "pickle_error", "object_type": "socket", "error": "cannot pickle"});
    let body = json!({
        "method_name": "pickle_error", "status": "serialization_error", "timestamp": 9.0,
        "call_site": {"timestamp": 9.0, "stack_trace": []}, "process_pid": 5, "process_start_time": 6.0,
        "pretty_args": [], "pretty_kwargs": {"object_type": "socket", "object_id": "0x1"},
        "exception": report, "exception_cid": placeholder["cid"], "exception_data": placeholder["data"],
    });
    assert_eq!(c.post_ok("/api/call/event", &body), json!({"status": "ok"}));
    let rec = c.get_ok("/api/call-records?function=pickle_error")["calls"][0].clone();
    assert_eq!(rec["status"], "serialization_error");
    // The placeholder pickle decodes to the original's placeholder dict (protocol doc §4.4).
    assert_eq!(
        rec["exception"]["__cideldill_placeholder__"], true,
        "{}",
        rec["exception"]
    );
    assert!(rec["exception"]["summary"]
        .as_str()
        .unwrap()
        .starts_with("<Unpicklable "));
    assert_eq!(rec["exception"]["type_name"], "Lock");
    assert_eq!(rec["exception_cid"], placeholder["cid"]);
    let mut bad = body.clone();
    bad["exception_cid"] = json!("0000");
    assert_eq!(
        c.post_err("/api/call/event", &bad, 400)["error"],
        "cid_mismatch"
    );
}

#[test]
fn oversized_bodies_get_413_and_the_server_keeps_serving() {
    let server = Server::start(&["--max-body-mb", "1"]);
    let c = server.client();
    let big = format!(
        "{{\"function_name\": \"{}\"}}",
        "x".repeat(1024 * 1024 + 10)
    );
    let r = c.request("POST", "/api/breakpoints", Some(big.as_bytes()));
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"], "payload_too_large");
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("--max-body-mb"));
    // A chunked body without a declared length is capped while reading.
    let mut raw = b"POST /api/call/start HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    let chunk = vec![b'a'; 256 * 1024];
    for _ in 0..5 {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(&chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(c.raw(&raw).status, 413);
    // Just under the cap is fine.
    let ok = format!("{{\"function_name\": \"{}\"}}", "y".repeat(1000 * 1000));
    assert_eq!(
        c.request("POST", "/api/breakpoints", Some(ok.as_bytes()))
            .status,
        200
    );
    assert_eq!(c.get("/api/status").status, 200);
}

#[test]
fn malformed_requests_get_json_errors() {
    let server = Server::start(&[]);
    let c = server.client();
    let r = c.request("POST", "/api/call/start", Some(b"{not json"));
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_json"))
    );
    let r = c.request("POST", "/api/call/complete", Some(b"[1, 2]"));
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_body"))
    );
    let r = c.get("/api/does-not-exist");
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("not_found"))
    );
    // Not a browser-client endpoint: no CORS grant.
    assert_eq!(r.header("Access-Control-Allow-Origin"), None);
    let r = c.get("/nowhere");
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("not_found"))
    );
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        None,
        "no CORS outside /api"
    );
    // Python's json module may emit NaN; the server tolerates it.
    let r = c.request(
        "POST",
        "/api/report-com-error",
        Some(br#"{"summary": "x", "status_code": NaN}"#),
    );
    assert_eq!(r.status, 200);
    // Garbage that is not HTTP does not take the server down.
    let _ = std::net::TcpStream::connect(("127.0.0.1", server.port)).and_then(|mut s| {
        use std::io::Write;
        s.write_all(b"\x00\x01\x02 garbage\r\n\r\n")
    });
    assert_eq!(c.get("/api/status").status, 200);
}

#[test]
fn call_records_keep_cids_but_not_payload_data() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    c.post_ok("/api/breakpoints/f/behavior", &json!({"behavior": "go"}));
    c.post_ok(
        "/api/breakpoints/f/after_behavior",
        &json!({"behavior": "go"}),
    );
    let arg = item(&json!("x".repeat(1000)), 2);
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("f", vec![arg.clone()], json!({"k": item(&json!(1), 3)})),
    );
    c.post_ok(
        "/api/call/complete",
        &complete_body(start["call_id"].as_str().unwrap(), &json!(1)),
    );
    let rec = c.get_ok("/api/call-records")["calls"][0].clone();
    assert_eq!(rec["args"][0]["cid"], arg["cid"]);
    assert_eq!(rec["args"][0]["client_ref"], 2);
    assert!(rec["args"][0].get("data").is_none(), "{}", rec["args"][0]);
    assert!(rec["kwargs"]["k"].get("data").is_none());
    assert!(rec["target"].get("data").is_none());
    let hist = c.get_ok("/api/breakpoints/f/history")["history"][0].clone();
    assert!(hist["call_data"]["args"][0].get("data").is_none());
    // The payload itself is one request away.
    let obj = c.get_ok(&format!(
        "/api/objects/{}?data=true",
        arg["cid"].as_str().unwrap()
    ));
    assert_eq!(obj["data"], arg["data"]);
}

#[test]
fn a_request_declaring_an_absurd_body_does_not_take_the_server_down() {
    let server = Server::start(&[]);
    let answer = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.write_all(b"POST /api/breakpoints HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1099511627776\r\n\r\n")
            .unwrap();
        s.set_read_timeout(Some(crate::support::deadline()))
            .unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    };
    // Answered 413 without the body, and the connection closed.
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    let status = crate::support::wait_for("the server to answer", || {
        Some(server.client().get("/api/status").status)
    });
    assert_eq!(status, 200);
}

/// REST callers and the original's browser client complete a call without `process_pid` and
/// `process_start_time`: from where the call came from (a program: no browser origin), the
/// random call id is enough, as the original accepts it; whatever is sent must still be the
/// call's.
#[test]
fn a_completion_without_process_fields_is_accepted_from_where_the_call_came() {
    let server = Server::start(&["--memory"]);
    let c = server.client();
    let silent = |call_id: &str, result: &Value| {
        let mut b = complete_body(call_id, result);
        let m = b.as_object_mut().unwrap();
        m.remove("process_pid");
        m.remove("process_start_time");
        b
    };
    let start = |name: &str| {
        let mut body = call_start_body(name, vec![item(&json!(2), 2)], json!({}));
        body["process_pid"] = json!(4242);
        body["process_start_time"] = json!(123.456);
        c.post_ok("/api/call/start", &body)
    };

    // A plain call: ok, recorded with the process of its start.
    let a = start("plain");
    let call_id = a["call_id"].as_str().unwrap();
    assert_eq!(
        c.post_ok("/api/call/complete", &silent(call_id, &json!(5))),
        json!({"status": "ok"})
    );
    let recs = c.get_ok("/api/call-records?function=plain")["calls"].clone();
    assert_eq!(recs[0]["process_pid"], 4242, "{recs}");
    assert_eq!(recs[0]["process_start_time"], 123.456);

    // Only one field, the call's own: accepted too.
    let a = start("plain");
    let mut pid_only = silent(a["call_id"].as_str().unwrap(), &json!(5));
    pid_only["process_pid"] = json!(4242);
    assert_eq!(c.post_ok("/api/call/complete", &pid_only)["status"], "ok");

    // An after-breakpoint pauses: the answer is a poll action.
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "after", "behavior": "go", "after_behavior": "stop"}),
    );
    let a = start("after");
    assert_eq!(a["action"], "continue", "{a}");
    let done = c.post_ok(
        "/api/call/complete",
        &silent(a["call_id"].as_str().unwrap(), &json!(5)),
    );
    assert_eq!(done["action"], "poll", "{done}");
    let paused = c.get_ok("/api/paused")["paused"].clone();
    assert_eq!(paused.as_array().unwrap().len(), 1, "{paused}");
    assert_eq!(paused[0]["when"], "after");

    // A result whose CID is not its data's: 400 cid_mismatch, as the original answers.
    let a = start("plain");
    let mut wrong = silent(a["call_id"].as_str().unwrap(), &json!(5));
    wrong["result_cid"] = json!("0".repeat(128));
    assert_eq!(
        c.post_err("/api/call/complete", &wrong, 400)["error"],
        "cid_mismatch"
    );

    // Fields that are sent and contradict the call's are still refused, one at a time.
    let a = start("plain");
    let id = a["call_id"].as_str().unwrap();
    for (field, value) in [
        ("process_pid", json!(4243)),
        ("process_start_time", json!(123.457)),
        ("process_pid", json!("x")),
    ] {
        let mut b = silent(id, &json!(5));
        b[field] = value;
        let e = c.post_err("/api/call/complete", &b, 403);
        assert_eq!(e["error"], "not_owner", "{field}: {e}");
    }
    assert_eq!(
        c.post_ok("/api/call/complete", &silent(id, &json!(5)))["status"],
        "ok",
        "the refusals changed nothing"
    );
}
