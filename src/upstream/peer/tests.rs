//! Unit tests of `crate::upstream::peer`.

use super::*;
use std::thread;

#[test]
fn a_version_refusal_naming_the_modern_revision_is_retried() {
    let refused = |data: Value| {
        Err(Failure::Rpc {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(data),
        })
    };
    assert_eq!(
        retry_version(&refused(
            json!({"supported": ["2027-01-01", MODERN_VERSION]})
        )),
        Some(MODERN_VERSION)
    );
    for no in [
        refused(json!({"supported": ["2025-11-25"]})),
        refused(json!({"supported": MODERN_VERSION})),
        refused(json!({})),
        Err(Failure::Rpc {
            code: -32600,
            message: String::new(),
            data: Some(json!({"supported": [MODERN_VERSION]})),
        }),
        Err(Failure::Http {
            status: 400,
            mcp_error: true,
            message: String::new(),
        }),
        Ok(json!({"supportedVersions": [MODERN_VERSION]})),
    ] {
        assert_eq!(retry_version(&no), None, "{no:?}");
    }
}

/// A link that records what is sent and lets the test answer.
struct Loop {
    sent: Sender<Value>,
}

impl Link for Loop {
    fn send(&self, _peer: &Arc<Peer>, msg: &Value) -> Result<(), String> {
        self.sent.send(msg.clone()).map_err(|e| e.to_string())
    }
    fn close(&self) {}
}

fn peer() -> (
    Arc<Peer>,
    crossbeam_channel::Receiver<Value>,
    crossbeam_channel::Receiver<Notice>,
) {
    let (ntx, nrx) = crossbeam_channel::unbounded();
    let p = Peer::new("t", move |n| {
        let _ = ntx.send(n);
    });
    let (tx, rx) = crossbeam_channel::unbounded();
    p.set_link(Box::new(Loop { sent: tx }));
    (p, rx, nrx)
}

fn modern_peer() -> (
    Arc<Peer>,
    crossbeam_channel::Receiver<Value>,
    crossbeam_channel::Receiver<Notice>,
) {
    let (p, sent, notices) = peer();
    let q = p.clone();
    let h = thread::spawn(move || q.discover(Duration::from_secs(5)));
    let m = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {
        "supportedVersions": ["2026-07-28"], "capabilities": {}, "resultType": "complete"}}));
    h.join().unwrap().unwrap();
    (p, sent, notices)
}

// subscriptions/listen asks only for what discover advertised, turns its list changes into
// notices, is re-opened once when the server ends it, and is given up when refused.
#[test]
fn listen_follows_list_changes_reopens_once_and_gives_up_when_refused() {
    let caps = |v: Value| v.as_object().unwrap().clone();
    assert_eq!(
        listen_params(&caps(json!({"tools": {}, "resources": {}}))),
        None
    );
    let (p, sent, notices) = modern_peer();
    p.listen(&caps(
        json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}}),
    ));
    let m = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(m["method"], "subscriptions/listen");
    assert_eq!(
        m["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert!(is_modern_message(&m), "{m}");
    let sub = json!({"_meta": {META_SUBSCRIPTION_ID: m["id"]}});
    p.incoming(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": sub}));
    p.incoming(
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": sub}),
    );
    assert_eq!(
        notices.recv_timeout(Duration::from_secs(5)).unwrap(),
        Notice::ToolsChanged
    );
    // Other requests are not held up by it.
    let q = p.clone();
    let h = thread::spawn(move || q.request("tools/list", json!({}), Duration::from_secs(5)));
    let r = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    p.incoming(json!({"jsonrpc": "2.0", "id": r["id"], "result": {"tools": []}}));
    assert!(h.join().unwrap().is_ok());
    // The server ends it: re-opened once after the delay, then given up.
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {}}));
    let m2 = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(m2["method"], "subscriptions/listen");
    assert_ne!(m2["id"], m["id"]);
    p.incoming(
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {META_SUBSCRIPTION_ID: m2["id"]}}}),
    );
    p.fail(&m2["id"], Failure::Disconnected("stream closed".into()));
    assert!(sent.recv_timeout(LISTEN_REOPEN_DELAY * 2).is_err());
    assert!(lock(&p.pending).is_empty());

    // Refused (a server without it): no retry, nothing left pending, no cancellation.
    let (p, sent, _) = modern_peer();
    p.listen(&caps(json!({"resources": {"listChanged": true}})));
    let m = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        m["params"]["notifications"],
        json!({"resourcesListChanged": true})
    );
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"],
        "error": {"code": -32601, "message": "Method not found"}}));
    assert!(sent.recv_timeout(LISTEN_REOPEN_DELAY * 2).is_err());
    assert!(lock(&p.pending).is_empty());
    assert!(lock(&p.listen).is_none());
}

#[test]
fn concurrent_requests_are_matched_by_id_in_any_order() {
    let (p, sent, _) = peer();
    let callers: Vec<_> = (0..8)
        .map(|i| {
            let p = p.clone();
            thread::spawn(move || {
                p.request("echo", json!({"i": i}), Duration::from_secs(5))
                    .unwrap()
            })
        })
        .collect();
    let mut msgs: Vec<Value> = (0..8)
        .map(|_| sent.recv_timeout(Duration::from_secs(5)).unwrap())
        .collect();
    msgs.reverse();
    for m in msgs {
        p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"i": m["params"]["i"]}}));
    }
    let mut got: Vec<i64> = callers
        .into_iter()
        .map(|h| h.join().unwrap()["i"].as_i64().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
}

#[test]
fn a_timeout_sends_cancelled_and_a_late_answer_is_ignored() {
    let (p, sent, _) = peer();
    let err = p
        .request("slow", json!({}), Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(err, Failure::Timeout(Duration::from_millis(50)));
    let req = sent.recv().unwrap();
    let cancel = sent.recv().unwrap();
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], req["id"]);
    p.incoming(json!({"jsonrpc": "2.0", "id": req["id"], "result": {}}));
    // Still usable.
    let q = p.clone();
    let h = thread::spawn(move || q.request("x", Value::Null, Duration::from_secs(5)));
    let m = sent.recv().unwrap();
    assert!(m.get("params").is_none());
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"ok": true}}));
    assert_eq!(h.join().unwrap().unwrap(), json!({"ok": true}));
}

#[test]
fn closing_fails_pending_calls_at_once_and_later_calls_immediately() {
    let (p, sent, notices) = peer();
    let q = p.clone();
    let h = thread::spawn(move || q.request("slow", json!({}), Duration::from_secs(30)));
    sent.recv().unwrap();
    let t0 = std::time::Instant::now();
    p.closed("process exited");
    let err = h.join().unwrap().unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(err, Failure::Disconnected("process exited".into()));
    assert_eq!(
        notices.try_recv().unwrap(),
        Notice::Closed("process exited".into())
    );
    p.closed("again");
    assert!(notices.try_recv().is_err(), "Closed is reported once");
    assert!(matches!(
        p.request("x", json!({}), Duration::from_secs(1)),
        Err(Failure::Disconnected(_))
    ));
}

#[test]
fn server_requests_get_answers_and_errors_propagate() {
    let (p, sent, notices) = peer();
    p.incoming(json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"}));
    assert_eq!(
        sent.recv().unwrap(),
        json!({"jsonrpc": "2.0", "id": "s1", "result": {}})
    );
    for m in ["sampling/createMessage", "elicitation/create", "roots/list"] {
        p.incoming(json!({"jsonrpc": "2.0", "id": 7, "method": m, "params": {}}));
        let r = sent.recv().unwrap();
        assert_eq!(r["id"], 7);
        assert_eq!(r["error"]["code"], -32601);
        assert!(r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not supported"));
    }
    p.incoming(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    assert_eq!(notices.try_recv().unwrap(), Notice::ToolsChanged);
    let q = p.clone();
    let h = thread::spawn(move || q.request("bad", json!({}), Duration::from_secs(5)));
    let m = sent.recv().unwrap();
    p.incoming(
        json!([{"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32602, "message": "nope"}}]),
    );
    assert_eq!(
        h.join().unwrap().unwrap_err(),
        Failure::Rpc {
            code: -32602,
            message: "nope".into(),
            data: None
        }
    );
}

#[test]
fn initialize_offers_the_latest_revision_and_accepts_an_older_one() {
    let (p, sent, _) = peer();
    let q = p.clone();
    let h = thread::spawn(move || q.initialize(Duration::from_secs(5)));
    let m = sent.recv().unwrap();
    assert_eq!(m["params"]["protocolVersion"], OFFERED_VERSION);
    assert_eq!(m["params"]["capabilities"], json!({}));
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {
        "protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "s"}}}));
    let init = h.join().unwrap().unwrap();
    assert_eq!(init.protocol_version, "2024-11-05");
    assert_eq!(p.protocol_version(), Some("2024-11-05"));
    assert_eq!(sent.recv().unwrap()["method"], "notifications/initialized");
}

#[test]
fn the_envelope_is_added_beside_other_meta_keys() {
    let p = with_envelope(json!({"name": "t", "_meta": {"progressToken": "x"}}));
    assert_eq!(
        p,
        json!({"name": "t", "_meta": {
            "progressToken": "x",
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "cideldill-server", "version": env!("CARGO_PKG_VERSION")},
        }})
    );
    assert_eq!(
        with_envelope(Value::Null)["_meta"],
        p["_meta"]
            .as_object()
            .map(|m| {
                let mut m = m.clone();
                m.remove("progressToken");
                Value::Object(m)
            })
            .unwrap()
    );
    assert!(is_modern_message(&json!({"method": "x", "params": p})));
    assert!(!is_modern_message(
        &json!({"method": "x", "params": {"_meta": {}}})
    ));
    assert!(!is_modern_message(&json!({"method": "x"})));
}

#[test]
fn the_probe_chooses_modern_only_on_a_result_listing_the_revision() {
    let modern = Ok(json!({
        "supportedVersions": ["2025-11-25", "2026-07-28"],
        "capabilities": {"tools": {}}, "instructions": "hi", "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "2"}},
    }));
    let init = probe_verdict(&modern).unwrap();
    assert_eq!(init.era, Era::Modern);
    assert_eq!(init.protocol_version, "2026-07-28");
    assert_eq!(init.server_info, json!({"name": "s", "version": "2"}));
    assert!(init.capabilities.contains_key("tools"));
    assert_eq!(init.instructions.as_deref(), Some("hi"));
    let legacy_only = Ok(json!({"supportedVersions": ["2025-11-25"], "capabilities": {}}));
    let empty = Ok(json!({}));
    let not_found = Err(Failure::Rpc {
        code: -32601,
        message: "Method not found".into(),
        data: None,
    });
    let other_code = Err(Failure::Rpc {
        code: -32000,
        message: "no session".into(),
        data: None,
    });
    let http = Err(Failure::Http {
        status: 404,
        mcp_error: false,
        message: "404 Not Found".into(),
    });
    let timeout = Err(Failure::Timeout(Duration::from_secs(10)));
    for reply in [legacy_only, empty, not_found, other_code, http, timeout] {
        assert!(probe_verdict(&reply).is_err(), "{reply:?}");
    }
}

#[test]
fn input_required_names_what_was_asked() {
    assert_eq!(
        input_required(&json!({"content": [], "resultType": "complete"})),
        None
    );
    assert_eq!(input_required(&json!({"content": []})), None);
    let r = json!({"resultType": "input_required", "requestState": "s", "inputRequests": {
        "a": {"method": "roots/list"}, "b": {"method": "sampling/createMessage", "params": {}},
        "c": {"method": "elicitation/create"}, "d": {"method": "roots/list"}, "e": {}}});
    assert_eq!(
        input_required(&r).unwrap(),
        ["e", "elicitation", "roots", "sampling"]
    );
    assert_eq!(
        input_required(&json!({"resultType": "input_required"})),
        Some(vec![])
    );
}

// Discover answered with -32601 (a legacy server): initialize follows on the same
// connection, and requests carry no envelope.
#[test]
fn a_failed_probe_falls_back_to_initialize() {
    let (p, sent, _) = peer();
    let q = p.clone();
    let h = thread::spawn(move || q.handshake(Duration::from_secs(5)));
    let m = sent.recv().unwrap();
    assert_eq!(m["method"], "server/discover");
    assert!(is_modern_message(&m));
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}}));
    let m = sent.recv().unwrap();
    assert_eq!(m["method"], "initialize");
    assert!(!is_modern_message(&m));
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s"}}}));
    let init = h.join().unwrap().unwrap();
    assert_eq!((init.era, p.era()), (Era::Legacy, Era::Legacy));
    assert_eq!(sent.recv().unwrap()["method"], "notifications/initialized");
    let q = p.clone();
    let h = thread::spawn(move || q.request("tools/list", json!({}), Duration::from_secs(5)));
    let m = sent.recv().unwrap();
    assert_eq!(m["params"], json!({}));
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": []}}));
    h.join().unwrap().unwrap();
}

// A probe that times out is not cancelled (the specification forbids it) and initialize
// follows within what is left of the time.
#[test]
fn a_probe_timeout_falls_back_without_cancelling() {
    let (p, sent, _) = peer();
    let q = p.clone();
    let h = thread::spawn(move || q.handshake(Duration::from_millis(400)));
    assert_eq!(sent.recv().unwrap()["method"], "server/discover");
    let m = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        m["method"], "initialize",
        "no notifications/cancelled for the probe"
    );
    p.incoming(
        json!({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "2025-06-18"}}),
    );
    assert_eq!(h.join().unwrap().unwrap().era, Era::Legacy);
}

// A modern server: every request carries the envelope; input_required fails the request
// without a retry; a modern server that refuses initialize after a timed-out probe is
// probed again.
#[test]
fn modern_requests_carry_the_envelope_and_input_required_fails_them() {
    let (p, sent, _) = peer();
    let q = p.clone();
    let h = thread::spawn(move || q.handshake(Duration::from_millis(400)));
    assert_eq!(sent.recv().unwrap()["method"], "server/discover");
    let m = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(m["method"], "initialize");
    p.incoming(
        json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32022,
        "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"]}}}),
    );
    let m = sent.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(m["method"], "server/discover");
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {
        "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete"}}));
    let init = h.join().unwrap().unwrap();
    assert_eq!((init.era, p.era()), (Era::Modern, Era::Modern));
    assert_eq!(p.protocol_version(), Some(MODERN_VERSION));

    let q = p.clone();
    let h = thread::spawn(move || {
        q.request(
            "tools/call",
            json!({"name": "ask", "arguments": {}}),
            Duration::from_secs(5),
        )
    });
    let m = sent.recv().unwrap();
    assert!(is_modern_message(&m), "{m}");
    assert_eq!(m["params"]["name"], "ask");
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "input_required",
        "inputRequests": {"x": {"method": "sampling/createMessage", "params": {}}}, "requestState": "s"}}));
    let err = h.join().unwrap().unwrap_err();
    assert_eq!(err, Failure::InputRequired(vec!["sampling".into()]));
    assert!(err.to_string().contains("(sampling)"), "{err}");
    assert!(sent.try_recv().is_err(), "not retried");

    // A timed-out modern request over stdio is still cancelled with a notification.
    let err = p
        .request("slow", json!({}), Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(err, Failure::Timeout(Duration::from_millis(50)));
    let req = sent.recv().unwrap();
    assert!(is_modern_message(&req));
    let cancel = sent.recv().unwrap();
    assert_eq!(cancel["method"], "notifications/cancelled");
}

#[test]
fn list_all_follows_cursors() {
    let (p, sent, _) = peer();
    let q = p.clone();
    let h = thread::spawn(move || q.list_all("tools/list", "tools", Duration::from_secs(5)));
    let m = sent.recv().unwrap();
    assert_eq!(m["params"], json!({}));
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "a"}], "nextCursor": "2"}}));
    let m = sent.recv().unwrap();
    assert_eq!(m["params"], json!({"cursor": "2"}));
    p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "b"}]}}));
    let names: Vec<Value> = h
        .join()
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("a"), json!("b")]);
}
