//! The pages at 1,000,000 recorded calls: a generator of a realistic `--db` database written
//! through the crate's own store code (so the server opens it exactly as one it wrote), and the
//! timing of every page of the UI on a server started with `--db` on it, beside the same page on
//! an empty `--memory` server.
//!
//! The database: four processes (one holds 85 % of the calls, the three others 5 % each), each
//! call a tree of nested calls whose stacks (innermost caller first, as the Python client sends
//! them) let the call tree infer the parents; the client's own events (`with_debug.register` at
//! each process's start, the `_cideldill_alias_name` attribute probe once per request); 2 % of
//! the `save` calls raise; arguments and results stored as dill pickles, most of them shared
//! among many calls (64 orders, 8 carts of 60 lines, 2 catalogs of 64 kB), one call in ten with a
//! value of its own (a note, a price); three breakpoints (a settings record).

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use cideldill_server::cas::cid_value;
use cideldill_server::intern::Interner;
use cideldill_server::records::Record;
use cideldill_server::store::{Format, NewBlob, RecordKind, Store};
use serde_json::{json, Value};

use crate::load::{err, now, Res};

/// Records written with one append (and one fsync).
const BATCH: usize = 10_000;

/// What the generator made, and the calls and values the page rows ask for.
pub struct Generated {
    pub secs: f64,
    pub file_bytes: u64,
    pub records: u64,
    pub blobs: usize,
    /// The key of the process holding most calls.
    pub biggest: String,
    /// A call of the biggest process in the middle of its records.
    pub middle_call: String,
    /// One of the first calls recorded.
    pub old_call: String,
    /// The CID of an argument shared by many calls.
    pub shared_cid: String,
}

/// A small deterministic generator (splitmix64): call ids and choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A stored value: its item as a call record holds it.
struct Stored {
    item: Value,
    cid: String,
}

/// Pickles a value (as CPython would), queues its blob, and answers its item.
fn stored(value: &Value, client_ref: u64, blobs: &mut Vec<NewBlob>) -> Stored {
    let bytes = cideldill_server::pickle_write::dumps(value);
    let cid = cid_value(&bytes);
    let hex = cid.hex();
    blobs.push(NewBlob {
        cid,
        bytes,
        format: Some(Format::Dill),
    });
    Stored {
        item: json!({"cid": hex, "client_ref": client_ref, "serialization_format": "dill"}),
        cid: hex,
    }
}

fn frame(file: &str, line: u32, function: &str) -> Value {
    json!({"filename": file, "lineno": line, "function": function})
}

/// A stack: `inner` frames (innermost first) on top of `outer`.
fn stack(inner: &[Value], outer: &[Value]) -> Vec<Value> {
    inner.iter().chain(outer).cloned().collect()
}

struct Proc {
    pid: i64,
    start_time: f64,
    script: &'static str,
}

impl Proc {
    fn key(&self) -> String {
        format!("{:.6}+{}", self.start_time, self.pid)
    }
}

/// One call of a tree, before it becomes a record.
struct Call {
    method: &'static str,
    signature: &'static str,
    args: Vec<Value>,
    kwargs: Vec<(&'static str, Value)>,
    stack: Vec<Value>,
    start: f64,
    end: f64,
    result: Option<Value>,
    raised: Option<(String, String)>,
}

struct Writer<'a> {
    store: &'a Store,
    interner: Interner,
    rng: Rng,
    blobs: Vec<NewBlob>,
    records: Vec<Value>,
    keys: Vec<cideldill_server::store::IndexKey>,
    seq: u64,
    counter: u64,
}

impl Writer<'_> {
    fn call_id(&mut self, at: f64) -> String {
        self.counter = (self.counter + 1) % 1000;
        let key = (u128::from(self.rng.next()) << 64) | u128::from(self.rng.next());
        format!("{at:.6}-{:03}-{key:032x}", self.counter)
    }

    /// Queues a record (parsed back as the server parses it, and written in the form it
    /// writes, with the index key it gives).
    fn push(&mut self, v: Value) -> Res<()> {
        let record = Record::from_disk(&mut self.interner, v);
        self.keys.push(record.index_key(self.seq));
        self.records.push(record.to_disk());
        self.seq += 1;
        if self.records.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Res<()> {
        if !self.blobs.is_empty() {
            let blobs = std::mem::take(&mut self.blobs);
            self.store
                .put_blobs(blobs, now())
                .map_err(err("put_blobs"))?;
        }
        let batch: Vec<(RecordKind, &Value, cideldill_server::store::IndexKey)> = self
            .records
            .iter()
            .zip(&self.keys)
            .map(|(r, k)| (RecordKind::CallRecord, r, *k))
            .collect();
        self.store
            .append_records(&batch)
            .map_err(err("append_records"))?;
        self.records.clear();
        self.keys.clear();
        Ok(())
    }

    /// A completed call's record; answers its call id.
    fn call(&mut self, p: &Proc, c: &Call) -> Res<String> {
        let id = self.call_id(c.end + 0.0002);
        let mut v = json!({
            "method_name": c.method,
            "target": null,
            "args": c.args,
            "kwargs": c.kwargs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect::<serde_json::Map<_, _>>(),
            "signature": c.signature,
            "call_site": {"timestamp": c.start, "stack_trace": c.stack},
            "page_url": null,
            "preferred_format": "dill",
            "process_pid": p.pid,
            "process_start_time": p.start_time,
            "process_key": p.key(),
            "call_id": id,
            "status": "success",
            "completed_at": c.end,
            "result_cid": null,
            "result_client_ref": null,
            "exception": null,
            "exception_cid": null,
            "exception_client_ref": null,
            "exception_type": null,
            "exception_message": null,
            "exception_traceback": null,
            "started_at": c.start,
            "repl_sessions": [],
            "seen_at": c.start + 0.0001,
            "done_at": c.end + 0.0002,
        });
        if let Some(r) = &c.result {
            v["result_cid"] = r["cid"].clone();
            v["result_client_ref"] = r["client_ref"].clone();
            v["result_serialization_format"] = json!("dill");
        }
        if let Some((kind, message)) = &c.raised {
            v["status"] = json!("exception");
            v["exception"] = json!(format!("{kind}: {message}"));
            v["exception_type"] = json!(kind);
            v["exception_message"] = json!(message);
            let mut tb = String::from("Traceback (most recent call last):\n");
            for f in c.stack.iter().rev() {
                tb.push_str(&format!(
                    "  File \"{}\", line {}, in {}\n",
                    f["filename"].as_str().unwrap_or(""),
                    f["lineno"],
                    f["function"].as_str().unwrap_or("")
                ));
            }
            tb.push_str(&format!("{kind}: {message}\n"));
            v["exception_traceback"] = json!(tb);
        }
        self.push(v)?;
        Ok(id)
    }

    /// A client event (`/api/call/event`) as the server records it.
    fn event(&mut self, p: &Proc, method: &str, at: f64, stack: &[Value], extra: Value) -> Res<()> {
        let id = self.call_id(at);
        let mut v = json!({
            "call_id": id,
            "method_name": method,
            "status": "event",
            "pretty_args": [],
            "pretty_kwargs": {},
            "signature": null,
            "call_site": {"timestamp": at, "stack_trace": stack},
            "page_url": null,
            "event_type": null,
            "process_pid": p.pid,
            "process_start_time": p.start_time,
            "process_key": p.key(),
            "started_at": at,
            "completed_at": at,
            "result_cid": null,
            "exception_cid": null,
            "pretty_result": null,
            "exception": null,
        });
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        self.push(v)
    }
}

/// Writes a database of `n` call records at `path` (which must not exist yet).
pub fn generate(path: &Path, n: u64) -> Res<Generated> {
    let t0 = Instant::now();
    if path.exists() {
        return Err(format!("{} exists already", path.display()));
    }
    let (store, _) = Store::open(path).map_err(err("open"))?;
    let settings = json!({"settings": 1, "default_behavior": "go", "pausing": true, "breakpoints": [
        {"function_name": "price", "behavior": "stop", "after_behavior": "go", "one_shot": false, "enabled": true},
        {"function_name": "save", "behavior": "stop", "after_behavior": "go", "one_shot": false, "enabled": false,
         "condition": "args[0]['total'] > 1000"},
        {"function_name": "tax", "behavior": "go", "after_behavior": "go", "one_shot": false, "enabled": true,
         "log_message": "tax {args[0]} in {args[1]}"},
    ]});
    store
        .append_records(&[(RecordKind::Settings, &settings, Default::default())])
        .map_err(err("settings"))?;
    let mut w = Writer {
        store: &store,
        interner: Interner::default(),
        rng: Rng(0x5EED_1234),
        blobs: Vec::new(),
        records: Vec::with_capacity(BATCH),
        keys: Vec::with_capacity(BATCH),
        seq: 0,
        counter: 0,
    };
    // The shared values: orders, carts, catalogs, regions, codes, results.
    let mut blobs = Vec::new();
    let orders: Vec<Stored> = (0..64u64)
        .map(|k| {
            let v = json!({"order_id": 1000 + k, "customer": format!("customer-{k:04}"),
                           "lines": [["sku-1", 2, 9.5], ["sku-7", 1, 120.0], ["sku-9", 3, 4.25]],
                           "total": 100.0 + k as f64 * 17.5, "currency": "EUR"});
            stored(&v, 10 + k, &mut blobs)
        })
        .collect();
    let carts: Vec<Stored> = (0..8u64)
        .map(|k| {
            let lines: Vec<Value> = (0..60)
                .map(|i| json!({"sku": format!("sku-{k}-{i:03}"), "qty": i % 5 + 1, "price": 1.5 * i as f64, "label": "a line of the cart with a label"}))
                .collect();
            stored(&json!({"cart": k, "lines": lines}), 100 + k, &mut blobs)
        })
        .collect();
    let catalogs: Vec<Stored> = (0..2u64)
        .map(|k| {
            let items: serde_json::Map<String, Value> = (0..1000)
                .map(|i| {
                    (
                        format!("sku-{k}-{i:04}"),
                        json!([format!("product {i}"), 0.5 * i as f64]),
                    )
                })
                .collect();
            stored(&Value::Object(items), 200 + k, &mut blobs)
        })
        .collect();
    let regions: Vec<Stored> = ["EU-DE", "EU-FR", "EU-IT", "US-CA", "US-NY", "UK"]
        .iter()
        .enumerate()
        .map(|(k, r)| stored(&json!(r), 300 + k as u64, &mut blobs))
        .collect();
    let codes: Vec<Stored> = (0..16u64)
        .map(|k| stored(&json!(format!("SPRING-{k:02}")), 400 + k, &mut blobs))
        .collect();
    let results: Vec<Stored> = (0..32u64)
        .map(|k| {
            stored(
                &json!({"ok": true, "amount": k as f64 * 3.5, "rule": format!("rule-{k}")}),
                500 + k,
                &mut blobs,
            )
        })
        .collect();
    let none = stored(&Value::Null, 600, &mut blobs);
    w.blobs = blobs;

    let base = now() - 3600.0 * 8.0;
    let procs = [
        Proc {
            pid: 4101,
            start_time: base - 12.25,
            script: "orders_worker.py",
        },
        Proc {
            pid: 5202,
            start_time: base - 11.5,
            script: "report.py",
        },
        Proc {
            pid: 5303,
            start_time: base - 10.75,
            script: "sync_job.py",
        },
        Proc {
            pid: 5404,
            start_time: base - 10.0,
            script: "cli.py",
        },
    ];
    // Registrations at each process's start.
    let functions: [(&str, &str); 7] = [
        ("OrderWorker.handle", "(self, order, note=None)"),
        ("load_order", "(order_id)"),
        ("price", "(order, catalog)"),
        ("tax", "(amount, region)"),
        ("discount", "(order, code=None)"),
        ("save", "(order)"),
        ("Report.build", "(self, rows)"),
    ];
    for (i, p) in procs.iter().enumerate() {
        for (f, sig) in functions {
            w.event(p, "with_debug.register", p.start_time + 0.5 + i as f64 * 0.01, &[],
                json!({"status": "registered",
                       "pretty_args": [{"__cideldill_placeholder__": true, "summary": f, "client_ref": 1}],
                       "pretty_result": {"event": "with_debug_registration", "function_name": f,
                                         "signature": sig, "alias": null, "target_type": "builtins.function"}}))?;
        }
    }
    let module = |p: &Proc, line: u32| frame(&format!("/srv/app/{}", p.script), line, "<module>");
    let (mut middle_call, mut old_call, mut tree) = (String::new(), String::new(), 0u64);
    let big_share = (n as f64 * 0.85) as u64;
    while w.seq < n {
        let i = tree;
        tree += 1;
        let t = base + i as f64 * 0.025;
        let which = if i % 20 < 17 {
            0
        } else {
            (i % 20 - 16) as usize
        };
        let p = &procs[which];
        let order = &orders[w.rng.below(64) as usize];
        if which == 0 {
            let s0 = [
                frame("/srv/app/orders/worker.py", 88, "run"),
                module(p, 131),
            ];
            let handle = |line| stack(&[frame("/srv/app/orders/handlers.py", line, "handle")], &s0);
            let s_price = handle(24);
            let note = if i % 10 == 0 {
                Some(stored(
                    &json!({"ticket": i, "text": format!("customer note {i}: call before delivery, ring twice")}),
                    700,
                    &mut w.blobs,
                ))
            } else {
                None
            };
            w.event(p, "__getattr__('_cideldill_alias_name')", t + 0.0005, &handle(21), json!({
                "status": "exception",
                "exception": {"type": "AttributeError", "message": "no alias", "target_type": "function",
                              "requested_attribute": "_cideldill_alias_name"}}))?;
            let price_result = if i % 10 == 5 {
                stored(
                    &json!({"order": i, "net": i as f64 * 0.125, "gross": i as f64 * 0.15}),
                    701,
                    &mut w.blobs,
                )
            } else {
                Stored {
                    item: results[w.rng.below(32) as usize].item.clone(),
                    cid: String::new(),
                }
            };
            let mut calls = vec![
                Call {
                    method: "load_order",
                    signature: "(order_id)",
                    args: vec![order.item.clone()],
                    kwargs: vec![],
                    stack: handle(21),
                    start: t + 0.001,
                    end: t + 0.004,
                    result: Some(order.item.clone()),
                    raised: None,
                },
                Call {
                    method: "tax",
                    signature: "(amount, region)",
                    args: vec![
                        results[w.rng.below(32) as usize].item.clone(),
                        regions[w.rng.below(6) as usize].item.clone(),
                    ],
                    kwargs: vec![],
                    stack: stack(
                        &[frame("/srv/app/orders/pricing.py", 40, "price")],
                        &s_price,
                    ),
                    start: t + 0.006,
                    end: t + 0.008,
                    result: Some(results[w.rng.below(32) as usize].item.clone()),
                    raised: None,
                },
                Call {
                    method: "discount",
                    signature: "(order, code=None)",
                    args: vec![carts[w.rng.below(8) as usize].item.clone()],
                    kwargs: vec![("code", codes[w.rng.below(16) as usize].item.clone())],
                    stack: stack(
                        &[frame("/srv/app/orders/pricing.py", 44, "price")],
                        &s_price,
                    ),
                    start: t + 0.009,
                    end: t + 0.012,
                    result: Some(results[w.rng.below(32) as usize].item.clone()),
                    raised: None,
                },
                Call {
                    method: "price",
                    signature: "(order, catalog)",
                    args: vec![order.item.clone(), catalogs[(i % 2) as usize].item.clone()],
                    kwargs: vec![],
                    stack: s_price.clone(),
                    start: t + 0.005,
                    end: t + 0.014,
                    result: Some(price_result.item),
                    raised: None,
                },
            ];
            let raised = (w.rng.below(50) == 0).then(|| {
                (
                    "ValueError".to_owned(),
                    format!("order {} has no delivery address", 1000 + i % 64),
                )
            });
            calls.push(Call {
                method: "save",
                signature: "(order)",
                args: vec![order.item.clone()],
                kwargs: vec![],
                stack: handle(27),
                start: t + 0.015,
                end: t + 0.019,
                result: raised.is_none().then(|| none.item.clone()),
                raised,
            });
            calls.push(Call {
                method: "OrderWorker.handle",
                signature: "(self, order, note=None)",
                args: vec![order.item.clone()],
                kwargs: note.iter().map(|s| ("note", s.item.clone())).collect(),
                stack: s0.to_vec(),
                start: t,
                end: t + 0.020,
                result: Some(results[(i % 32) as usize].item.clone()),
                raised: None,
            });
            for c in &calls {
                if w.seq >= n {
                    break;
                }
                let id = w.call(p, c)?;
                if c.method == "price" {
                    if old_call.is_empty() {
                        old_call = id.clone();
                    }
                    if middle_call.is_empty() && w.seq >= big_share / 2 {
                        middle_call = id;
                    }
                }
            }
        } else {
            let s0 = [
                frame(&format!("/srv/app/{}", p.script), 30, "main"),
                module(p, 60),
            ];
            let inner = |line| stack(&[frame("/srv/app/reports/build.py", line, "build")], &s0);
            let calls = [
                Call {
                    method: "load_order",
                    signature: "(order_id)",
                    args: vec![order.item.clone()],
                    kwargs: vec![],
                    stack: inner(12),
                    start: t + 0.001,
                    end: t + 0.003,
                    result: Some(order.item.clone()),
                    raised: None,
                },
                Call {
                    method: "tax",
                    signature: "(amount, region)",
                    args: vec![
                        results[(i % 32) as usize].item.clone(),
                        regions[(i % 6) as usize].item.clone(),
                    ],
                    kwargs: vec![],
                    stack: inner(14),
                    start: t + 0.004,
                    end: t + 0.006,
                    result: Some(results[((i + 1) % 32) as usize].item.clone()),
                    raised: None,
                },
                Call {
                    method: "Report.build",
                    signature: "(self, rows)",
                    args: vec![carts[(i % 8) as usize].item.clone()],
                    kwargs: vec![],
                    stack: s0.to_vec(),
                    start: t,
                    end: t + 0.008,
                    result: Some(none.item.clone()),
                    raised: None,
                },
            ];
            for c in &calls {
                if w.seq >= n {
                    break;
                }
                w.call(p, c)?;
            }
        }
    }
    w.flush()?;
    let blobs = store.len();
    drop(w);
    drop(store);
    let file_bytes = fs::metadata(path).map_err(err("size"))?.len();
    Ok(Generated {
        secs: t0.elapsed().as_secs_f64(),
        file_bytes,
        records: n,
        blobs,
        biggest: procs[0].key(),
        middle_call,
        old_call,
        shared_cid: orders[0].cid.clone(),
    })
}

/// `GET path` with `Accept: text/html` (a browser's request): status and body.
pub fn get_page(port: u16, path: &str, timeout: Duration) -> Res<(u16, Vec<u8>)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(err("connect"))?;
    s.set_read_timeout(Some(timeout)).map_err(err("timeout"))?;
    s.set_write_timeout(Some(timeout)).map_err(err("timeout"))?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Accept: text/html,application/xhtml+xml\r\n\r\n"
    );
    s.write_all(req.as_bytes()).map_err(err("write"))?;
    let mut resp = Vec::with_capacity(64 * 1024);
    s.read_to_end(&mut resp).map_err(err("read"))?;
    crate::load::parse_response(&resp)
}
