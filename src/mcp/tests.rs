//! Unit tests of `crate::mcp`.

use super::*;
use crate::config::Config;
use crate::state::State;
use crate::store::Store;

fn setup() -> (Arc<Mcp>, Arc<Session>, Receiver<Outgoing>) {
    let shared = Arc::new(Shared::new(
        Config::for_tests("/nonexistent".into()),
        Store::memory(),
        State::default(),
    ));
    let mcp = Mcp::new(shared, 2);
    let (tx, rx) = unbounded();
    let s = mcp.open_session(Transport::Stdio, Some(tx));
    (mcp, s, rx)
}

fn req(id: i64, method: &str, params: Value) -> Request {
    Request {
        id: RequestId::Num(id),
        method: method.into(),
        params,
    }
}

fn init(mcp: &Mcp, s: &Session, v: &str) -> Value {
    mcp.handle_request(
        s,
        req(
            0,
            "initialize",
            json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "t"}}),
        ),
    )
    .unwrap()
    .outcome
    .unwrap()
}

fn envelope() -> Value {
    json!({modern::PROTOCOL_VERSION_KEY: "2026-07-28", modern::CLIENT_CAPABILITIES_KEY: {}})
}

fn outcome(
    mcp: &Mcp,
    s: &Session,
    id: i64,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    mcp.handle_request(s, req(id, method, params))
        .unwrap()
        .outcome
}

fn next_note(rx: &Receiver<Outgoing>) -> Value {
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Outgoing::Message(text)) => serde_json::from_str(&text).unwrap(),
        other => panic!("no message: {other:?}"),
    }
}

#[test]
fn a_stdio_connection_takes_the_era_of_its_first_deciding_request() {
    let (mcp, s, _rx) = setup();
    // A ping decides nothing (it works before initialize, as it always did).
    assert_eq!(
        outcome(&mcp, &s, 1, "ping", Value::Null).unwrap(),
        json!({})
    );
    assert!(!s.is_modern());
    let tools = outcome(&mcp, &s, 2, "tools/list", json!({"_meta": envelope()})).unwrap();
    assert!(s.is_modern());
    assert_eq!(tools["resultType"], "complete");
    assert_eq!(tools["ttlMs"], modern::STATIC_TTL_MS);
    assert_eq!(tools["cacheScope"], "private");
    assert_eq!(tools["_meta"][modern::SERVER_INFO_KEY]["name"], SERVER_NAME);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        tools::TOOLS[..2].iter().map(|t| t.name).collect::<Vec<_>>()
    );
    assert!(tools["tools"][0]["outputSchema"].is_object());
    // Now modern: initialize is not a method (-32601, naming our revisions), removed
    // methods are gone, the envelope is needed.
    let e = outcome(
        &mcp,
        &s,
        3,
        "initialize",
        json!({"protocolVersion": "2025-11-25"}),
    )
    .unwrap_err();
    assert_eq!(e.code, jsonrpc::METHOD_NOT_FOUND);
    assert_eq!(
        e.data.unwrap()["supported"],
        json!(version::all_supported())
    );
    for m in modern::REMOVED {
        let e = outcome(
            &mcp,
            &s,
            4,
            m,
            json!({"_meta": envelope(), "uri": "breakpoint://status", "level": "info"}),
        )
        .unwrap_err();
        assert_eq!(e.code, jsonrpc::METHOD_NOT_FOUND, "{m}");
    }
    let e = outcome(&mcp, &s, 5, "tools/list", json!({})).unwrap_err();
    assert_eq!(e.code, jsonrpc::INVALID_PARAMS);
    assert!(
        e.message.contains(modern::PROTOCOL_VERSION_KEY),
        "{}",
        e.message
    );
    let e = outcome(
        &mcp,
        &s,
        6,
        "resources/read",
        json!({"_meta": envelope(), "uri": "breakpoint://nope"}),
    )
    .unwrap_err();
    assert_eq!(
        e.code,
        jsonrpc::INVALID_PARAMS,
        "not found is -32602 in the modern era"
    );
    let read = outcome(
        &mcp,
        &s,
        7,
        "resources/read",
        json!({"_meta": envelope(), "uri": "breakpoint://status"}),
    )
    .unwrap();
    assert_eq!(read["ttlMs"], 0);
    // `server/discover` needs the envelope too.
    let e = outcome(&mcp, &s, 8, "server/discover", Value::Null).unwrap_err();
    assert_eq!(e.code, jsonrpc::INVALID_PARAMS);
    let d = outcome(&mcp, &s, 8, "server/discover", json!({"_meta": envelope()})).unwrap();
    assert_eq!(d["supportedVersions"], json!(version::all_supported()));
    // Log messages reach listen streams whose request names a level in `_meta`.
    assert_eq!(d["capabilities"]["logging"], json!({}));
    assert_eq!(
        d["capabilities"]["extensions"][NOTIFICATIONS_EXTENSION]["notifications"],
        json!(CUSTOM_NOTIFICATIONS)
    );
    assert_eq!(d["resultType"], "complete");
    // A log level that is not one of the RFC 5424 names is refused.
    let mut meta = envelope();
    meta[modern::LOG_LEVEL_KEY] = json!("loud");
    let bad = mcp
        .handle_request_now(
            &s,
            req(
                9,
                "subscriptions/listen",
                json!({"_meta": meta, "notifications": {}}),
            ),
        )
        .unwrap();
    assert_eq!(bad.outcome.unwrap_err().code, jsonrpc::INVALID_PARAMS);
}

#[test]
fn the_custom_capability_is_read_from_extensions_or_experimental() {
    let yes = [
        json!({"extensions": {NOTIFICATIONS_EXTENSION: {}}}),
        json!({"experimental": {NOTIFICATIONS_EXTENSION: {"x": 1}}}),
        json!({"experimental": {NOTIFICATIONS_EXTENSION: true}}),
    ];
    for caps in yes {
        assert!(wants_custom_notifications(Some(&caps)), "{caps}");
    }
    let no = [
        json!({}),
        json!({"experimental": {}}),
        json!({"experimental": {NOTIFICATIONS_EXTENSION: null}}),
        json!({"experimental": {NOTIFICATIONS_EXTENSION: false}}),
        json!({"extensions": {"io.github.other/notifications": {}}}),
        json!({NOTIFICATIONS_EXTENSION: {}}),
    ];
    for caps in no {
        assert!(!wants_custom_notifications(Some(&caps)), "{caps}");
    }
    assert!(!wants_custom_notifications(None));
}

#[test]
fn legacy_sessions_get_custom_notes_only_when_declared_and_log_lines_at_their_level() {
    let (mcp, plain, plain_rx) = setup();
    let (tx, opted_rx) = unbounded();
    let opted = mcp.open_session(Transport::Stdio, Some(tx));
    init(&mcp, &plain, "2025-11-25");
    let r = mcp
        .handle_request(
            &opted,
            req(
                0,
                "initialize",
                json!({"protocolVersion": "2025-06-18",
                       "capabilities": {"experimental": {NOTIFICATIONS_EXTENSION: {}}},
                       "clientInfo": {"name": "t"}}),
            ),
        )
        .unwrap()
        .outcome
        .unwrap();
    assert_eq!(
        r["capabilities"]["experimental"][NOTIFICATIONS_EXTENSION]["notifications"],
        json!(CUSTOM_NOTIFICATIONS)
    );
    assert!(r["instructions"]
        .as_str()
        .unwrap()
        .contains("resources/subscribe to breakpoint://paused"));
    for s in [&plain, &opted] {
        mcp.handle_notification(
            s,
            &Notification {
                method: "notifications/initialized".into(),
                params: Value::Null,
            },
        );
    }
    outcome(
        &mcp,
        &plain,
        1,
        "logging/setLevel",
        json!({"level": "debug"}),
    )
    .unwrap();
    outcome(
        &mcp,
        &opted,
        1,
        "logging/setLevel",
        json!({"level": "info"}),
    )
    .unwrap();
    let events = [
        EventKind::ExecutionPaused {
            pause_id: "p1".into(),
            method_name: "add".into(),
            pause_reason: "breakpoint".into(),
            paused_at: 1.0,
        },
        EventKind::ExecutionResumed {
            pause_id: "p1".into(),
            method_name: "add".into(),
            action: "continue".into(),
        },
        EventKind::CallCompleted {
            call_id: "c1".into(),
            method_name: "add".into(),
            status: "success".into(),
            process_key: None,
        },
    ];
    for (seq, kind) in events.into_iter().enumerate() {
        mcp.broadcast(&Event {
            seq: seq as u64,
            kind: kind.into(),
        });
    }
    let drain = |rx: &Receiver<Outgoing>| {
        let mut got = Vec::new();
        while let Ok(Outgoing::Message(text)) = rx.try_recv() {
            got.push(serde_json::from_str::<Value>(&text).unwrap());
        }
        got
    };
    let method_of = |v: &Value| v["method"].as_str().unwrap().to_owned();
    let plain_got = drain(&plain_rx);
    assert!(
        plain_got
            .iter()
            .all(|v| !method_of(v).starts_with("notifications/breakpoint/")),
        "{plain_got:?}"
    );
    let lines = |got: &[Value]| -> Vec<(String, String)> {
        got.iter()
            .filter(|v| v["method"] == "notifications/message")
            .map(|v| {
                (
                    v["params"]["level"].as_str().unwrap().to_owned(),
                    v["params"]["data"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let plain_lines = lines(&plain_got);
    assert_eq!(
        plain_lines
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>(),
        ["info", "info", "debug"],
        "{plain_lines:?}"
    );
    assert!(plain_lines[0]
        .1
        .starts_with("add paused (breakpoint), pause p1"));
    assert!(plain_lines[1]
        .1
        .contains("add resumed with continue, pause p1"));
    assert!(plain_lines[2]
        .1
        .contains("add completed (success), call c1"));
    let opted_got = drain(&opted_rx);
    let custom: Vec<String> = opted_got
        .iter()
        .map(method_of)
        .filter(|m| m.starts_with("notifications/breakpoint/"))
        .collect();
    assert_eq!(
        custom,
        [
            "notifications/breakpoint/execution_paused",
            "notifications/breakpoint/execution_resumed",
            "notifications/breakpoint/call_completed"
        ]
    );
    assert_eq!(lines(&opted_got).len(), 2, "no debug line at info");
}

#[test]
fn a_legacy_connection_stays_legacy_and_answers_discover() {
    let (mcp, s, _rx) = setup();
    init(&mcp, &s, "2025-11-25");
    let tools = outcome(&mcp, &s, 1, "tools/list", json!({"_meta": envelope()})).unwrap();
    assert!(!s.is_modern());
    assert!(
        tools.get("resultType").is_none(),
        "legacy results are as they were"
    );
    let d = outcome(&mcp, &s, 2, "server/discover", Value::Null).unwrap();
    assert_eq!(d["supportedVersions"][0], "2026-07-28");
    let e = outcome(
        &mcp,
        &s,
        3,
        "resources/read",
        json!({"uri": "breakpoint://nope"}),
    )
    .unwrap_err();
    assert_eq!(e.code, RESOURCE_NOT_FOUND);
    // Legacy HTTP sessions never switch era (stateless HTTP requests get sessions of their
    // own, modern from the start).
    let (tx, _rx2) = unbounded();
    let sse = mcp.open_session(Transport::Sse, Some(tx));
    let e = outcome(&mcp, &sse, 1, "tools/list", json!({"_meta": envelope()})).unwrap_err();
    assert_eq!(e.code, jsonrpc::INVALID_REQUEST, "{e}");
    // A probe before the handshake is refused there, so the client falls back to it.
    let e = outcome(
        &mcp,
        &sse,
        2,
        "server/discover",
        json!({"_meta": envelope()}),
    )
    .unwrap_err();
    assert_eq!(e.code, jsonrpc::INVALID_REQUEST, "{e}");
    assert!(!sse.is_modern());
}

#[test]
fn a_listen_stream_is_acknowledged_gets_its_events_and_ends_when_cancelled() {
    let (mcp, s, rx) = setup();
    // A client that declared our notifications and asked for log messages at info.
    let listen_with = |id: i64, filter: Value, custom: bool| {
        let mut meta = envelope();
        if custom {
            meta[modern::CLIENT_CAPABILITIES_KEY] =
                json!({"extensions": {NOTIFICATIONS_EXTENSION: {}}});
            meta[modern::LOG_LEVEL_KEY] = json!("info");
        }
        mcp.handle_request_now(
            &s,
            req(
                id,
                "subscriptions/listen",
                json!({"_meta": meta, "notifications": filter}),
            ),
        )
    };
    let listen = |id: i64, filter: Value| listen_with(id, filter, true);
    let opened = listen(
        7,
        json!({"resourcesListChanged": true, "toolsListChanged": true,
               "resourceSubscriptions": ["breakpoint://paused", "breakpoint://nope"]}),
    );
    assert!(
        opened.is_none(),
        "a listen stream gets no response while open"
    );
    assert!(s.is_modern());
    let ack = next_note(&rx);
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"][modern::SUBSCRIPTION_ID_KEY], 7);
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourcesListChanged": true, "resourceSubscriptions": ["breakpoint://paused"]})
    );
    // Without an envelope, it is refused at once.
    let refused = mcp
        .handle_request_now(
            &s,
            req(8, "subscriptions/listen", json!({"notifications": {}})),
        )
        .unwrap();
    assert_eq!(refused.outcome.unwrap_err().code, jsonrpc::INVALID_PARAMS);
    let paused = Event {
        seq: 1,
        kind: EventKind::ExecutionPaused {
            pause_id: "p1".into(),
            method_name: "add".into(),
            pause_reason: "breakpoint".into(),
            paused_at: 1.0,
        }
        .into(),
    };
    mcp.broadcast(&paused);
    let mut got = Vec::new();
    while let Ok(Outgoing::Message(text)) = rx.try_recv() {
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["params"]["_meta"][modern::SUBSCRIPTION_ID_KEY], 7, "{v}");
        got.push(v);
    }
    let methods: Vec<&str> = got.iter().map(|v| v["method"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        [
            "notifications/breakpoint/execution_paused",
            "notifications/resources/list_changed",
            "notifications/resources/updated",
            "notifications/message"
        ]
    );
    assert_eq!(got[0]["params"]["pause_id"], "p1");
    assert_eq!(got[2]["params"]["uri"], "breakpoint://paused");
    assert_eq!(got[3]["params"]["level"], "info");
    assert!(got[3]["params"]["data"]
        .as_str()
        .unwrap()
        .contains("add paused (breakpoint), pause p1"));
    // A completed call is a debug line: below the stream's level.
    mcp.broadcast(&Event {
        seq: 2,
        kind: EventKind::CallCompleted {
            call_id: "c1".into(),
            method_name: "add".into(),
            status: "success".into(),
            process_key: None,
        }
        .into(),
    });
    let next = next_note(&rx);
    assert_eq!(next["method"], "notifications/breakpoint/call_completed");
    assert!(rx.try_recv().is_err(), "no debug line at info");
    // At most MCP_MAX_LISTENS streams; cancelling one ends it (no response, no more events).
    // Every other one declares our notifications; the rest get none of them.
    for i in 1..limits::MCP_MAX_LISTENS as i64 {
        assert!(listen_with(100 + i, json!({}), i % 2 == 1).is_none());
    }
    let over = listen(999, json!({})).unwrap();
    assert_eq!(over.outcome.unwrap_err().code, jsonrpc::LIMIT_EXCEEDED);
    mcp.handle_notification(
        &s,
        &Notification {
            method: "notifications/cancelled".into(),
            params: json!({"requestId": 7}),
        },
    );
    assert!(!s.state().listens.contains_key(&RequestId::Num(7)));
    while rx.try_recv().is_ok() {}
    mcp.broadcast(&paused);
    let mut after = Vec::new();
    while let Ok(Outgoing::Message(text)) = rx.try_recv() {
        after.push(serde_json::from_str::<Value>(&text).unwrap());
    }
    let declared = (1..limits::MCP_MAX_LISTENS).filter(|i| i % 2 == 1).count();
    let custom = after
        .iter()
        .filter(|v| v["method"] == "notifications/breakpoint/execution_paused")
        .count();
    assert_eq!(
        custom, declared,
        "one custom note per open stream that declared them"
    );
    assert_eq!(after.len(), 2 * declared, "and one log line: {after:?}");
    assert!(after
        .iter()
        .all(|v| v["params"]["_meta"][modern::SUBSCRIPTION_ID_KEY] != 7));
    assert!(after
        .iter()
        .all(|v| v["params"]["_meta"][modern::SUBSCRIPTION_ID_KEY]
            .as_i64()
            .is_some_and(|id| id % 2 == 1)));
}

#[test]
fn requests_before_initialize_are_refused_but_ping_works() {
    let (mcp, s, _rx) = setup();
    let r = mcp
        .handle_request(&s, req(1, "tools/list", json!({})))
        .unwrap();
    assert_eq!(r.outcome.unwrap_err().code, jsonrpc::INVALID_REQUEST);
    assert_eq!(
        mcp.handle_request(&s, req(2, "ping", Value::Null))
            .unwrap()
            .outcome
            .unwrap(),
        json!({})
    );
}

#[test]
fn initialize_negotiates_and_cannot_repeat() {
    let (mcp, s, _rx) = setup();
    let r = init(&mcp, &s, "2099-01-01");
    assert_eq!(r["protocolVersion"], version::LATEST);
    assert_eq!(r["serverInfo"]["name"], SERVER_NAME);
    assert_eq!(r["capabilities"]["resources"]["subscribe"], true);
    let again = mcp
        .handle_request(
            &s,
            req(1, "initialize", json!({"protocolVersion": "2025-06-18"})),
        )
        .unwrap();
    assert!(again.outcome.is_err());
}

#[test]
fn old_revisions_get_no_completions_capability() {
    let (mcp, s, _rx) = setup();
    let r = init(&mcp, &s, "2024-11-05");
    assert_eq!(r["protocolVersion"], "2024-11-05");
    assert!(r["capabilities"].get("completions").is_none());
}

#[test]
fn lists_are_paginated_with_opaque_cursors() {
    let (mcp, s, _rx) = setup();
    init(&mcp, &s, "2025-11-25");
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..20 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = mcp
            .handle_request(&s, req(1, "tools/list", params))
            .unwrap()
            .outcome
            .unwrap();
        let tools = page["tools"].as_array().unwrap();
        assert!(tools.len() <= 2);
        names.extend(tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        match page.get("nextCursor") {
            Some(c) => cursor = Some(c.as_str().unwrap().to_owned()),
            None => break,
        }
    }
    assert_eq!(names.len(), tools::TOOLS.len());
    let bad = mcp
        .handle_request(&s, req(2, "tools/list", json!({"cursor": "zzz"})))
        .unwrap();
    assert_eq!(bad.outcome.unwrap_err().code, jsonrpc::INVALID_PARAMS);
}

#[test]
fn batches_only_in_2025_03_26() {
    let (mcp, s, _rx) = setup();
    init(&mcp, &s, "2025-06-18");
    let items = vec![Ok(Message::Request(req(1, "ping", Value::Null)))];
    let Some(BatchAnswer::Refused(out)) = mcp.handle_batch(&s, items) else {
        panic!("refused")
    };
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["error"]["code"], jsonrpc::INVALID_REQUEST);

    let (mcp, s, _rx) = setup();
    init(&mcp, &s, "2025-03-26");
    let items = vec![
        Ok(Message::Request(req(1, "ping", Value::Null))),
        Ok(Message::Notification(Notification {
            method: "notifications/initialized".into(),
            params: Value::Null,
        })),
        Ok(Message::Request(req(2, "nope", Value::Null))),
    ];
    let Some(BatchAnswer::Answers(out)) = mcp.handle_batch(&s, items) else {
        panic!("answers")
    };
    let out: Value = serde_json::from_str(&out).unwrap();
    let arr = out.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0]["result"], json!({}));
    assert_eq!(arr[1]["error"]["code"], jsonrpc::METHOD_NOT_FOUND);
    // Notifications alone get nothing back.
    let only_note = vec![Ok(Message::Notification(Notification {
        method: "notifications/initialized".into(),
        params: Value::Null,
    }))];
    assert_eq!(mcp.handle_batch(&s, only_note), None);
}

#[test]
fn a_batch_stops_handling_requests_once_its_answers_reach_the_limit() {
    let (mcp, s, _rx) = setup();
    init(&mcp, &s, "2025-03-26");
    let one = Message::Response(
        mcp.handle_request(&s, req(1, "tools/list", json!({})))
            .unwrap(),
    )
    .to_text()
    .len();
    // Room for two answers and a half: the third is handled but its answer is replaced,
    // the rest are not handled; the notification in between still is.
    let mut items: Vec<_> = (1..=5)
        .map(|i| Ok(Message::Request(req(i, "tools/list", json!({})))))
        .collect();
    items.insert(
        3,
        Ok(Message::Notification(Notification {
            method: "notifications/cancelled".into(),
            params: json!({"requestId": 99}),
        })),
    );
    let Some(BatchAnswer::Answers(text)) = mcp.handle_batch_within(&s, items, one * 5 / 2) else {
        panic!("answers")
    };
    assert!(text.len() <= one * 5 / 2 + 3 * 400, "{}", text.len());
    let out: Value = serde_json::from_str(&text).unwrap();
    let arr = out.as_array().unwrap();
    assert_eq!(arr.len(), 5);
    let ids: Vec<i64> = arr.iter().map(|a| a["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    assert!(arr[0]["result"]["tools"].is_array() && arr[1]["result"]["tools"].is_array());
    for (a, handled) in arr[2..].iter().zip([true, false, false]) {
        assert_eq!(a["error"]["code"], jsonrpc::LIMIT_EXCEEDED, "{a}");
        assert_eq!(a["error"]["data"]["handled"], handled, "{a}");
        assert!(a["error"]["message"]
            .as_str()
            .unwrap()
            .contains("smaller batch"));
    }
}

#[test]
fn a_request_stopped_by_the_shutdown_is_answered_and_one_its_client_cancelled_is_not() {
    let (mcp, s, _rx) = setup();
    init(&mcp, &s, "2025-11-25");
    let wait = |id: i64| {
        let (mcp, s) = (Arc::clone(&mcp), Arc::clone(&s));
        thread::spawn(move || {
            let args = json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 50}});
            mcp.handle_request(&s, req(id, "tools/call", args))
        })
    };
    let in_flight = |n: usize| {
        let until = Instant::now() + Duration::from_secs(10);
        while s.state().in_flight.len() != n {
            assert!(Instant::now() < until, "{n} requests never in flight");
            thread::sleep(Duration::from_millis(5));
        }
    };
    let cancelled = wait(1);
    in_flight(1);
    mcp.handle_notification(
        &s,
        &Notification {
            method: "notifications/cancelled".into(),
            params: json!({"requestId": 1}),
        },
    );
    assert!(
        cancelled.join().unwrap().is_none(),
        "no answer once cancelled"
    );
    let stopped = wait(2);
    in_flight(1);
    mcp.close_all();
    let r = stopped.join().unwrap().expect("an answer at shutdown");
    assert_eq!(r.id, Some(RequestId::Num(2)));
    let e = r.outcome.unwrap_err();
    assert_eq!(e.code, jsonrpc::SHUTTING_DOWN);
    assert!(e.message.contains("shutting down"), "{}", e.message);
}

#[test]
fn what_a_session_keeps_of_its_client_is_bounded() {
    let (mcp, s, _rx) = setup();
    let big = "x".repeat(1 << 20);
    mcp.handle_request(
        &s,
        req(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "clientInfo": {"name": big, "version": "1", "extra": big}}),
        ),
    )
    .unwrap()
    .outcome
    .unwrap();
    let kept = s.state().client_info.to_string().len();
    assert!(kept < 1024, "{kept}");
    assert_eq!(s.state().client_info["version"], "1");
    let r = mcp
        .handle_request(
            &s,
            req(1, "tools/list", json!({"_meta": {"progressToken": big}})),
        )
        .unwrap();
    assert_eq!(r.outcome.unwrap_err().code, jsonrpc::INVALID_PARAMS);
    let r = mcp
        .handle_request(
            &s,
            req(2, "tools/list", json!({"_meta": {"progressToken": "t-1"}})),
        )
        .unwrap();
    assert!(r.outcome.is_ok());
}

#[test]
fn subscriptions_are_bounded_and_prune_what_is_gone() {
    let (mcp, s, _rx) = setup();
    init(&mcp, &s, "2025-11-25");
    {
        let mut st = s.state();
        for i in 0..limits::MCP_MAX_SUBSCRIPTIONS {
            st.subscriptions
                .insert(format!("breakpoint://paused/gone-{i}"));
        }
    }
    let r = mcp
        .handle_request(
            &s,
            req(
                1,
                "resources/subscribe",
                json!({"uri": "breakpoint://status"}),
            ),
        )
        .unwrap();
    assert_eq!(r.outcome.unwrap(), json!({}));
    assert_eq!(s.state().subscriptions.len(), 1, "ended pauses pruned");
    assert!(s.is_subscribed("breakpoint://status"));
}

#[test]
fn log_level_is_validated_and_gates_messages() {
    let (mcp, s, rx) = setup();
    init(&mcp, &s, "2025-11-25");
    s.log("info", json!("not yet"));
    assert!(rx.try_recv().is_err(), "nothing before setLevel");
    let bad = mcp
        .handle_request(&s, req(1, "logging/setLevel", json!({"level": "loud"})))
        .unwrap();
    assert_eq!(bad.outcome.unwrap_err().code, jsonrpc::INVALID_PARAMS);
    mcp.handle_request(&s, req(2, "logging/setLevel", json!({"level": "warning"})))
        .unwrap()
        .outcome
        .unwrap();
    s.log("info", json!("below"));
    assert!(rx.try_recv().is_err());
    s.log("error", json!("above"));
    let Outgoing::Message(text) = rx.try_recv().unwrap() else {
        panic!()
    };
    assert!(text.contains("notifications/message") && text.contains("above"));
}
