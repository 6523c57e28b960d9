//! Unit tests of `crate::records`.

use super::*;

#[test]
fn a_forgotten_process_leaves_the_window_and_frees_its_bytes() {
    let mut w = Records::new(10, usize::MAX);
    let of = |pid: i64, id: &str| {
        let mut c = CallRecord::for_tests("f", id);
        c.process.pid = pid;
        Record::Call(Arc::new(c))
    };
    w.push(of(1, "a"));
    let one = w.bytes();
    w.push(of(2, "b"));
    w.push(of(1, "c"));
    w.push_history(HistoryEntry::new(
        Sym::new("h"),
        Arc::new(CallRecord::for_tests("f", "c")),
    ));
    let key = Process {
        pid: 1,
        start_time: 1.0,
    }
    .key();
    assert_eq!(w.forget_process(&key), (2, 1));
    assert_eq!(w.len(), 1);
    assert!(w.bytes() <= one, "{} > {one}", w.bytes());
    assert!(w.by_call_id("a").is_none() && w.by_call_id("b").is_some());
    assert_eq!(w.history("f", 0, 10).len(), 0);
    // The numbering goes on; the empty slots leave the window in turn.
    assert_eq!(w.next_seq(), 3);
    assert_eq!(w.before(3, 3, |_| true).found.len(), 1);
    for n in 0..10 {
        w.push(of(2, &format!("n{n}")));
    }
    assert_eq!((w.len(), w.next_seq(), w.dropped()), (10, 13, 3));
    assert_eq!(w.forget_process(&key), (0, 0));
}

#[test]
fn a_hidden_record_is_seen_by_no_reader_until_shown_and_leaves_with_the_window() {
    let mut w = Records::new(3, usize::MAX);
    let call = |id: &str| Record::Call(Arc::new(CallRecord::for_tests("f", id)));
    w.push(call("a"));
    let seq = w.push_hidden(call("b"));
    let every = RecordFilter::default();
    let ids = |w: &Records| -> Vec<&str> {
        let page = w.page(&every, 0, 10).0;
        ["a", "b", "c", "d", "e", "f"]
            .into_iter()
            .rev()
            .filter(|id| page.iter().any(|r| r.call_id_is(id)))
            .collect()
    };
    assert_eq!(ids(&w), ["a"]);
    assert!(w.by_call_id("b").is_none() && w.call_by_id("b").is_none());
    assert_eq!(w.calls().count(), 1);
    assert!(w.newest_call().is_some_and(|c| c.call_id.matches("a")));
    let step = w.before(u64::MAX, 10, |_| true);
    assert_eq!(step.found.len(), 1);
    assert_eq!(w.next_seq(), seq + 1, "it holds its place");
    w.show(seq);
    assert_eq!(ids(&w), ["b", "a"]);
    assert_eq!(w.before(u64::MAX, 10, |_| true).found.len(), 2);
    // A record never shown stays hidden until it falls out of the window.
    let lost = w.push_hidden(call("c"));
    w.push(call("d"));
    w.push(call("e"));
    assert_eq!(ids(&w), ["e", "d"]);
    assert!(w.hidden.contains(&lost));
    w.push(call("f"));
    assert_eq!(ids(&w), ["f", "e", "d"]);
    assert!(w.hidden.is_empty(), "forgotten with its record");
}

struct NoRender;
impl Render for NoRender {
    fn item(&self, item: &Item) -> Value {
        json!(format!(
            "<{}>",
            item.cid().unwrap_or_default().get(..4).unwrap_or("")
        ))
    }
    fn cid(&self, cid: &Val, _hint: Hint) -> Value {
        match cid {
            Val::Cid(c) => json!(format!("<{}>", &c.hex()[..4])),
            _ => Value::Null,
        }
    }
}

fn cid(n: u8) -> String {
    format!("{:02x}", n).repeat(64)
}

fn sample(interner: &mut Interner, n: u64) -> CallRecord {
    let item = |i: &mut Interner, c: u8, r: i64| {
        Item::parse(i, &json!({"cid": cid(c), "client_ref": r, "data": "gAQu"}))
    };
    CallRecord {
        call_id: CallId::Ours {
            at: 1795311683.784533,
            n,
        },
        method: interner.sym("add"),
        process: Process {
            pid: 42,
            start_time: 1795311683.5,
        },
        target: Some(item(interner, 1, 1)),
        args: vec![item(interner, 2, 2)].into(),
        kwargs: vec![(interner.sym("y"), item(interner, 3, 3))].into(),
        signature: interner.val(&json!("(x, y=1)")),
        call_site: CallSite::parse(
            interner,
            Some(
                &json!({"timestamp": 1.5, "target_cid": cid(1), "stack_trace": [{"filename": "/a.py", "lineno": 3}]}),
            ),
        ),
        page_url: Val::Null,
        preferred_json: false,
        paused_before: false,
        seen_at: 10.0,
        done_at: 11.0,
        status: interner.val(&json!("success")),
        completed_at: 2.5,
        result_cid: interner.val(&json!(cid(4))),
        result_client_ref: Val::Int(4),
        result_format: Hint::Absent,
        exception: None,
        repl_sessions: Box::default(),
        notes: None,
    }
}

#[test]
fn items_and_call_sites_read_from_a_request_body_equal_those_read_from_json() {
    let cid = "ab".repeat(64);
    let items = [
        json!({"cid": cid, "client_ref": 3, "data": "gARLBS4="}),
        json!({"cid": cid, "serialization_format": "json"}),
        json!({"cid": cid, "client_ref": null, "serialization_format": null}),
        json!({"cid": cid, "data": "x", "extra": [1, 2], "client_ref": 7}),
        json!({"cid": "short", "data": "x"}),
        json!({"cid": cid, "serialization_format": "yaml"}),
        json!("not an object"),
        json!(12.5),
        json!({}),
    ];
    let sites = [
        json!({"timestamp": 5.5, "target_cid": cid, "stack_trace": [{"lineno": 1}]}),
        json!({"stack_trace": []}),
        json!("odd"),
        json!(null),
    ];
    let mut i = Interner::default();
    for v in items {
        let text = serde_json::to_vec(&v).unwrap();
        let node = JsonNode::parse(&text).unwrap();
        let (a, b) = (Item::parse(&mut i, &v), Item::from_node(&mut i, &node));
        assert_eq!(a, b, "{v}");
        assert_eq!(a.to_value(), b.to_value(), "{v}");
    }
    for v in sites {
        let text = serde_json::to_vec(&v).unwrap();
        let node = JsonNode::parse(&text).unwrap();
        let a = CallSite::parse(&mut i, Some(&v));
        let b = CallSite::from_node(&mut i, Some(&node));
        assert_eq!(a, b, "{v}");
        assert_eq!(a.to_value(), v);
        assert_eq!(b.to_value(), v);
    }
    assert_eq!(
        CallSite::parse(&mut i, None),
        CallSite::from_node(&mut i, None)
    );
}

#[test]
fn call_ids_print_like_the_original_and_read_back() {
    let id = CallId::Ours {
        at: 1795311683.784533,
        n: 1,
    };
    assert_eq!(id.to_string(), "1795311683.784533-001");
    assert_eq!(CallId::parse("1795311683.784533-001"), id);
    assert_eq!(CallId::parse("1.000000-1234").to_string(), "1.000000-1234");
    assert!(matches!(CallId::parse("mcp-abc"), CallId::Text(_)));
    assert!(matches!(CallId::parse("1.5-001"), CallId::Text(_)));
}

#[test]
fn a_record_has_the_wire_shape_and_survives_the_disk_form() {
    let mut i = Interner::default();
    let r = sample(&mut i, 1);
    let v = Value::Object(r.to_json(&NoRender));
    assert_eq!(v["call_id"], "1795311683.784533-001");
    assert_eq!(v["target"], json!({"cid": cid(1), "client_ref": 1}));
    assert_eq!(v["kwargs"]["y"]["cid"], cid(3));
    assert_eq!(v["pretty_args"], json!(["<0202>"]));
    assert_eq!(v["process_key"], "1795311683.500000+42");
    assert_eq!(v["call_site"]["stack_trace"][0]["lineno"], 3);
    assert_eq!(v["started_at"], 1.5);
    assert_eq!(v["pretty_result"], "<0404>");
    assert_eq!(v["exception"], Value::Null);
    assert_eq!(v["exception_traceback"], Value::Null);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys[..3], ["method_name", "target", "pretty_target"]);
    assert_eq!(keys.last(), Some(&"repl_sessions"));

    let disk = r.to_disk();
    assert!(disk.get("pretty_args").is_none());
    let back = CallRecord::from_disk(&mut i, &disk).unwrap();
    assert_eq!(back.to_disk(), disk);
    assert_eq!(back.to_json(&NoRender), r.to_json(&NoRender));
    // The previous format kept rendered values; they are ignored.
    let back = CallRecord::from_disk(&mut i, &v).unwrap();
    assert_eq!(Value::Object(back.to_json(&NoRender)), v);
}

#[test]
fn unusual_items_are_kept_as_sent() {
    let mut i = Interner::default();
    for v in [
        json!({"cid": "short", "client_ref": 1}),
        json!({"cid": cid(1), "extra": true}),
        json!({"cid": cid(1), "serialization_format": "xml"}),
        json!("text"),
    ] {
        let item = Item::parse(&mut i, &v);
        assert!(matches!(item, Item::Other { .. }));
        assert_eq!(item.to_value(), v);
    }
    let with_format = json!({"cid": cid(1), "serialization_format": "json"});
    assert_eq!(Item::parse(&mut i, &with_format).to_value(), with_format);
}

#[test]
fn a_call_counts_its_name_and_the_window_counts_shared_parts_once() {
    let mut i = Interner::default();
    let mut call = sample(&mut i, 0);
    let small = call.weight();
    call.method = i.sym(&"m".repeat(4000));
    assert!(call.weight() >= small + 3990, "the interned name counts");
    let mut rs = Records::new(100, usize::MAX);
    rs.push(Record::Call(Arc::new(call.clone())));
    let one = rs.bytes();
    assert!(one >= 4000, "{one}");
    // A second record sharing the name adds only what it has of its own.
    call.call_id = CallId::Ours { at: 1.0, n: 1 };
    rs.push(Record::Call(Arc::new(call)));
    assert!(rs.bytes() - one < 1000, "{} then {one}", rs.bytes());
    // Once the records holding it are gone, the name is no longer counted.
    let mut rs2 = Records::new(1, usize::MAX);
    let mut big = sample(&mut i, 2);
    big.method = i.sym(&"n".repeat(100_000));
    rs2.push(Record::Call(Arc::new(big)));
    assert!(rs2.bytes() > 100_000);
    rs2.push(Record::Call(Arc::new(sample(&mut i, 3))));
    assert!(rs2.bytes() < 10_000, "{}", rs2.bytes());
}

#[test]
fn the_window_is_bounded_and_counts_what_it_drops() {
    let mut i = Interner::default();
    let mut rs = Records::new(3, usize::MAX);
    for n in 0..5 {
        rs.push(Record::Call(Arc::new(sample(&mut i, n))));
    }
    assert_eq!((rs.len(), rs.dropped()), (3, 2));
    let (page, total) = rs.page(&RecordFilter::default(), 1, 10);
    assert_eq!(total, 3);
    assert_eq!(page.len(), 2);
    assert!(page[0].call_id_is("1795311683.784533-003"));
    let filter = RecordFilter {
        function: Some("other"),
        ..RecordFilter::default()
    };
    assert_eq!(rs.page(&filter, 0, 10).1, 0);
    assert!(rs.by_call_id("1795311683.784533-000").is_none());
    assert!(rs.by_call_id("1795311683.784533-004").is_some());
}

/// A client event of `method` with `status`, from process 7.
fn event(i: &mut Interner, n: usize, method: &str, status: &str) -> Record {
    Record::Event(Arc::new(event_record(i, n, method, status)))
}

fn event_record(i: &mut Interner, n: usize, method: &str, status: &str) -> EventRecord {
    EventRecord {
        call_id: Val::Str(Sym::new(&format!("e{n}"))),
        method: i.sym(method),
        status: i.sym(status),
        pretty_args: Val::Null,
        pretty_kwargs: Val::Null,
        signature: Val::Null,
        call_site: CallSite::parse(i, None),
        page_url: Val::Null,
        event_type: Val::Null,
        process: Process {
            pid: 7,
            start_time: 1.5,
        },
        at: 1.0,
        result_cid: Val::Null,
        exception_cid: Val::Null,
        pretty_result: Val::Null,
        exception: Val::Null,
    }
}

#[test]
fn the_index_decides_the_client_events_choice_as_the_records_do() {
    let mut i = Interner::default();
    let probe = event(&mut i, 0, CLIENT_EVENT_METHODS[1], "exception");
    let register = event(&mut i, 1, CLIENT_EVENT_METHODS[0], "registered");
    // Near misses are the program's: an other attribute, another event, a call.
    let other_attr = event(&mut i, 2, "__getattr__('name')", "exception");
    let other_event = event(&mut i, 3, "pickle_error", "serialization_error");
    let call = Record::Call(Arc::new(sample(&mut i, 4)));
    let all = [&probe, &register, &other_attr, &other_event, &call];
    for choice in [ClientEvents::Show, ClientEvents::Hide, ClientEvents::Only] {
        let f = RecordFilter::default().with_client_events(choice);
        for (n, r) in all.iter().enumerate() {
            let client = n < 2;
            let kept = match choice {
                ClientEvents::Show => true,
                ClientEvents::Hide => !client,
                ClientEvents::Only => client,
            };
            assert_eq!(f.matches(r), kept, "{choice:?} {}", r.method_name());
            assert_eq!(
                f.may_match(r.index_key(n as u64)),
                kept,
                "{choice:?} {}",
                r.method_name()
            );
        }
    }
    // With the other filters: an `exception` status keeps the probe only when shown.
    let f = RecordFilter {
        status: Some("exception"),
        client_events: ClientEvents::Hide,
        ..RecordFilter::default()
    };
    assert!(!f.may_match(probe.index_key(0)) && f.may_match(other_attr.index_key(2)));
    let f = RecordFilter {
        function: Some(CLIENT_EVENT_METHODS[0]),
        client_events: ClientEvents::Only,
        ..RecordFilter::default()
    };
    assert!(f.may_match(register.index_key(1)) && !f.may_match(probe.index_key(0)));
    // The keys are the hashes of the names.
    for (m, k) in CLIENT_EVENT_METHODS.iter().zip(CLIENT_EVENT_KEYS) {
        assert_eq!(key_hash(m), k);
    }
    for (name, choice) in
        ClientEvents::NAMES
            .iter()
            .zip([ClientEvents::Show, ClientEvents::Hide, ClientEvents::Only])
    {
        assert_eq!(ClientEvents::parse(name), Some(choice));
        assert_eq!(choice.as_str(), *name);
    }
    assert_eq!(ClientEvents::parse("Hide"), None);
}

#[test]
fn a_page_counts_the_client_events_it_leaves_out() {
    let mut i = Interner::default();
    let mut rs = Records::new(100, usize::MAX);
    for n in 0..10 {
        rs.push(event(&mut i, n, CLIENT_EVENT_METHODS[n % 2], "exception"));
        rs.push(Record::Call(Arc::new(sample(&mut i, n as u64))));
    }
    let hide = RecordFilter::default().with_client_events(ClientEvents::Hide);
    let (page, total, left_out) = rs.page_and_left_out(&hide, 2, 3);
    assert_eq!((page.len(), total, left_out), (3, 10, 10));
    assert!(page.iter().all(|r| !r.is_client_event()));
    let only = RecordFilter {
        status: Some("exception"),
        ..RecordFilter::default().with_client_events(ClientEvents::Only)
    };
    let (page, total, left_out) = rs.page_and_left_out(&only, 0, 100);
    assert_eq!((page.len(), total, left_out), (10, 10, 0));
    assert_eq!(rs.page_and_left_out(&RecordFilter::default(), 0, 1).1, 20);
}

#[test]
fn the_window_is_bounded_by_bytes_counting_shared_parts_once() {
    let mut i = Interner::default();
    // Calls that share everything but their ids weigh little: 1,000 fit in 1 MiB.
    let mut rs = Records::new(100_000, 1 << 20);
    for n in 0..1000 {
        rs.push(Record::Call(Arc::new(sample(&mut i, n))));
    }
    assert_eq!((rs.len(), rs.dropped()), (1000, 0));
    let small = rs.bytes() / 1000;
    assert!(small < 1024, "a shared call weighs {small} bytes");
    // Events carrying 64 KiB of their own each: the window keeps what fits in 1 MiB.
    for n in 0..64 {
        let args = json!([format!("{n}{}", "x".repeat(64 << 10))]);
        let event = EventRecord {
            pretty_args: i.val(&args),
            process: Process {
                pid: 1,
                start_time: 1.5,
            },
            ..event_record(&mut i, n, "f", "event")
        };
        rs.push(Record::Event(Arc::new(event)));
    }
    assert!(rs.bytes() <= 1 << 20, "{} bytes kept", rs.bytes());
    assert!((14..=16).contains(&rs.len()), "{} records kept", rs.len());
    assert_eq!(rs.dropped(), 1064 - rs.len() as u64);
    // The newest stays, whatever it weighs.
    let mut one = Records::new(10, 1);
    one.push(Record::Call(Arc::new(sample(&mut i, 1))));
    one.push(Record::Call(Arc::new(sample(&mut i, 2))));
    assert_eq!((one.len(), one.dropped()), (1, 1));
}

#[test]
fn the_window_cursor_walks_newest_first_and_says_where_it_stopped() {
    let mut i = Interner::default();
    let mut rs = Records::new(6, usize::MAX);
    let seqs: Vec<u64> = (0..10)
        .map(|n| rs.push(Record::Call(Arc::new(sample(&mut i, n)))))
        .collect();
    assert_eq!(seqs, (0..10).collect::<Vec<_>>());
    assert_eq!((rs.next_seq(), rs.dropped()), (10, 4));
    let ns = |step: &WindowStep| -> Vec<String> {
        step.found
            .iter()
            .map(|r| match r {
                Record::Call(c) => c.call_id.to_string()[18..].to_owned(),
                _ => String::new(),
            })
            .collect()
    };
    let first = rs.before(u64::MAX, 4, |_| true);
    assert_eq!(
        (ns(&first), first.reached, first.more),
        (
            vec!["009", "008", "007", "006"]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
            6,
            true
        )
    );
    let odd = rs.before(first.reached, 4, |r| r.call_id_is("1795311683.784533-005"));
    assert_eq!(
        (ns(&odd), odd.reached, odd.more),
        (vec!["005".to_owned()], 4, false)
    );
    // Records that fall out of the window meanwhile are not seen; the step says so.
    for n in 10..13 {
        rs.push(Record::Call(Arc::new(sample(&mut i, n))));
    }
    let late = rs.before(6, 4, |_| true);
    assert_eq!((late.found.len(), late.reached, late.more), (0, 6, false));
}

#[test]
fn source_and_process_filters_use_the_index_tag_and_check_the_record() {
    let mut i = Interner::default();
    let call = Record::Call(Arc::new(sample(&mut i, 1)));
    let other_pid = {
        let mut c = sample(&mut i, 2);
        c.process.pid = 43;
        Record::Call(Arc::new(c))
    };
    let external = Record::Other(Arc::new(
        json!({"source": "mcp_client", "method_name": "fs/read", "status": "success"}),
    ));
    let filter = |source: Option<&'static str>, process: Option<&'static str>| RecordFilter {
        source,
        process,
        ..RecordFilter::default()
    };
    let cases = [
        (filter(Some("program"), None), [true, true, false]),
        (filter(Some("mcp_client"), None), [false, false, true]),
        (filter(None, Some("42")), [true, false, false]),
        (
            filter(None, Some("1795311683.500000+42")),
            [true, false, false],
        ),
        (filter(None, Some("1795311683.5+42")), [false, false, false]),
        (filter(Some("program"), Some("43")), [false, true, false]),
    ];
    for (f, expected) in cases {
        for (r, want) in [&call, &other_pid, &external].into_iter().zip(expected) {
            assert_eq!(f.matches(r), want, "{f:?} {r:?}");
            if want {
                assert!(f.may_match(r.index_key(7)), "the index never hides a match");
            }
        }
    }
    assert!(!filter(Some("mcp_client"), None).may_match(call.index_key(0)));
    assert!(!filter(Some("program"), None).may_match(external.index_key(0)));
    assert_eq!(call.index_key(7).seq, 7);
    assert!(filter(None, Some("42")).needs_scan());
    assert!(!filter(Some("program"), None).needs_scan());
}

#[test]
fn shared_parts_are_stored_once() {
    let mut i = Interner::default();
    let a = sample(&mut i, 1);
    let b = sample(&mut i, 2);
    let (Val::Tree(x), Val::Tree(y)) = (&a.call_site.rest, &b.call_site.rest) else {
        panic!("trees")
    };
    assert!(Arc::ptr_eq(x, y));
    assert!(
        std::mem::size_of::<CallRecord>() <= 288,
        "{}",
        std::mem::size_of::<CallRecord>()
    );
}

#[test]
fn snapshots_are_derived_from_the_items_with_a_client_ref() {
    let mut i = Interner::default();
    let r = sample(&mut i, 1);
    let snaps = snapshots_of(&r, true);
    let roles: Vec<&str> = snaps.iter().map(|s| s.role.as_str()).collect();
    assert_eq!(roles, ["target", "arg:0", "kwarg:y", "result"]);
    let v = snaps[1].to_json(&NoRender);
    assert_eq!(v["client_ref"], 2);
    assert_eq!(v["at"], 10.0);
    assert_eq!(snaps[3].to_json(&NoRender)["at"], 11.0);
    assert_eq!(snapshots_of(&r, false).len(), 3);
}
