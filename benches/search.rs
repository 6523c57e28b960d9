//! Search over recorded calls: distinct items recorded, search times measured, and the search
//! rows of the table.

use super::*;

/// A dill item of a JSON value, pickled as CPython would (new bytes for every new value).
pub(super) fn distinct_item(value: &Value, client_ref: u64) -> Value {
    let bytes = cideldill_server::pickle_write::dumps(value);
    json!({
        "cid": cideldill_server::cas::cid_of(&bytes),
        "client_ref": client_ref,
        "data": cideldill_server::cas::encode_base64(&bytes),
    })
}

/// Records `n` calls whose arguments, keyword argument and result are all values no other
/// call has, on `threads` threads.
pub(super) fn record_distinct(
    port: u16,
    load: &Load,
    n: u64,
    threads: usize,
    limit: Duration,
) -> Res<()> {
    let template: Value = serde_json::from_slice(&load.free[0]).map_err(err("template"))?;
    let next = AtomicU64::new(0);
    let error = Mutex::new(None);
    let t0 = Instant::now();
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || t0.elapsed() > limit || error.lock().unwrap().is_some() {
                    break;
                }
                let mut start = template.clone();
                start["args"] = json!([
                    distinct_item(&json!({"order_id": i, "customer": format!("customer-{i:06}"), "total": i as f64 * 0.25}), 2),
                    distinct_item(&json!(format!("EUR-{i}")), 3),
                ]);
                start["kwargs"] = json!({"c": distinct_item(&json!([i, "note", null, true]), 4)});
                let r = distinct_item(&json!({"order_id": i, "discounted": i as f64 * 0.2}), 5);
                let result = serde_json::to_vec(&start)
                    .map_err(err("start body"))
                    .and_then(|body| call(port, "POST", "/api/call/start", &body))
                    .and_then(|started| {
                        let done = json!({
                            "call_id": started["call_id"], "timestamp": now(), "status": "success",
                            "result_cid": r["cid"], "result_data": r["data"], "result_client_ref": 5,
                            "process_pid": start["process_pid"], "process_start_time": start["process_start_time"],
                        });
                        call(port, "POST", "/api/call/complete", done.to_string().as_bytes())
                    });
                if let Err(e) = result {
                    error.lock().unwrap().get_or_insert(e);
                    break;
                }
            });
        }
    });
    if let Some(e) = error.into_inner().unwrap() {
        return Err(e);
    }
    let done = next.into_inner().min(n);
    if done < n {
        return Err(format!("recorded only {done} calls in the time box"));
    }
    Ok(())
}

pub(super) struct SearchTimes {
    pub(super) search: Lat,
    pub(super) note: String,
    pub(super) floor: Lat,
    pub(super) page: Lat,
    pub(super) export_s: f64,
    pub(super) export_bytes: usize,
}

/// The text a rendered value is shown as (the server's rule: strings as they are, a
/// placeholder by its summary, anything else as JSON), lowercased.
pub(super) fn shown_lower(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.to_lowercase()),
        Value::Object(m) if m.get("summary").is_some_and(Value::is_string) => {
            m["summary"].as_str().map(str::to_lowercase)
        }
        other => Some(other.to_string().to_lowercase()),
    }
}

/// Times the search, the floors and the export on a server holding `n` records.
pub(super) fn search_times(port: u16, n: u64, reps: usize) -> Res<SearchTimes> {
    let needle = "no record holds this text";
    let path = format!(
        "/api/call-records?limit=100&search={}",
        needle.replace(' ', "+")
    );
    let first = call(port, "GET", &path, b"")?;
    if first["total_count"] != 0 {
        return Err(format!("the search matched: {}", first["total_count"]));
    }
    let mut times = Vec::new();
    let mut note = String::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        let page = call(port, "GET", &path, b"")?;
        times.push(t0.elapsed());
        let scanned = page["scanned"].as_u64().unwrap_or(0);
        if page["search_truncated"] == true {
            note = format!(", cut at the budget after {} records", num(scanned as f64));
        } else if scanned != n {
            return Err(format!("the search tested {scanned} records of {n}"));
        }
    }
    let mut pages = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        call(port, "GET", "/api/call-records?limit=100", b"")?;
        pages.push(t0.elapsed());
    }
    let t0 = Instant::now();
    let (status, body) = http(port, "GET", "/api/call-records?format=jsonl", b"")?;
    let export_s = t0.elapsed().as_secs_f64();
    if status != 200 {
        return Err(format!("export answered {status}"));
    }
    let text = String::from_utf8(body).map_err(err("export text"))?;
    let mut texts: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).map_err(err("export line"))?;
        let mut t: Vec<String> = Vec::new();
        for a in r["pretty_args"].as_array().into_iter().flatten() {
            t.extend(shown_lower(a));
        }
        for (k, v) in r["pretty_kwargs"].as_object().into_iter().flatten() {
            t.push(k.to_lowercase());
            t.extend(shown_lower(v));
        }
        for key in [
            "pretty_result",
            "exception",
            "exception_type",
            "exception_message",
            "exception_traceback",
        ] {
            t.extend(shown_lower(&r[key]));
        }
        texts.push(t);
    }
    if texts.len() as u64 != n {
        return Err(format!(
            "the export has {} lines for {n} records",
            texts.len()
        ));
    }
    let mut floor = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        let hits = texts
            .iter()
            .filter(|t| t.iter().any(|x| x.contains(std::hint::black_box(needle))))
            .count();
        floor.push(t0.elapsed());
        std::hint::black_box(hits);
    }
    Ok(SearchTimes {
        search: lat(times)?,
        note,
        floor: lat(floor)?,
        page: lat(pages)?,
        export_s,
        export_bytes: text.len(),
    })
}

impl Bench {
    /// Text search over 100,000 recorded calls, and their JSON Lines export: calls whose
    /// values are all distinct (every call's arguments, keyword argument and result are new
    /// pickles, so the search's memory of CIDs saves nothing and every value is rendered from
    /// the content store) in memory, with `--db`, and with that database reopened with
    /// `--max-records 1000` (the older records are read back from the file); and the usual
    /// load (64 argument sets, repeated) in memory. Floors: the same records' shown texts,
    /// held in this process and lowercased once, scanned with `str::contains` (what an
    /// in-memory text index of the rendered values would cost at best); and a plain page.
    pub(super) fn rows_search(&self, t: &mut Table) {
        let n = self.opts.n(100_000);
        let reps = self.opts.n(7).max(3) as usize;
        let db_dir = self.dir("search-db");
        let db_file = db_dir.join("search.db").display().to_string();
        let window = 1_000.min(n / 2).max(1);
        enum Calls {
            Distinct,
            Usual,
            Reopened,
        }
        let configs = [
            (
                "`--memory`, values all distinct".to_string(),
                vec!["--memory".to_string()],
                Calls::Distinct,
            ),
            (
                "`--db`, values all distinct".to_string(),
                vec!["--db".into(), db_file.clone()],
                Calls::Distinct,
            ),
            (
                format!(
                    "`--db` reopened with `--max-records {window}` ({} records read from the file)",
                    num((n - window) as f64)
                ),
                vec![
                    "--db".into(),
                    db_file,
                    "--max-records".into(),
                    window.to_string(),
                ],
                Calls::Reopened,
            ),
            (
                "`--memory`, the usual load (64 argument sets, repeated)".to_string(),
                vec!["--memory".to_string()],
                Calls::Usual,
            ),
        ];
        for (mode, args, load) in configs {
            let dir = match load {
                Calls::Distinct if args[0] == "--db" => db_dir.clone(),
                Calls::Reopened => db_dir.clone(),
                _ => self.dir("search"),
            };
            let measured = (|| -> Res<SearchTimes> {
                let s = Proc::server(&self.opts.server, &dir, &args, false)?;
                match load {
                    Calls::Distinct => {
                        eprintln!("bench:   recording {n} calls with distinct values ({mode})");
                        record_distinct(s.port, &self.load, n, 16, self.opts.secs(300.0))?;
                    }
                    Calls::Usual => {
                        eprintln!("bench:   recording {n} calls of the usual load ({mode})");
                        let never = AtomicBool::new(false);
                        let ran =
                            run_cycles(s.port, &self.load, 16, 0, n, self.opts.secs(300.0), &never);
                        if let Some(e) = ran.error {
                            return Err(e);
                        }
                    }
                    Calls::Reopened => {}
                }
                search_times(s.port, n, reps)
            })();
            let (ours, floor, page, export) = match measured {
                Ok(m) => (
                    Cell {
                        text: format!(
                            "{} ms (p99 {}){}",
                            num(m.search.p50 / 1e3),
                            num(m.search.p99 / 1e3),
                            m.note
                        ),
                        value: Some(m.search.p50),
                    },
                    Some(m.floor),
                    Some(m.page),
                    Cell {
                        text: format!(
                            "{} s, {} records/s, {} MB",
                            num(m.export_s),
                            num(n as f64 / m.export_s),
                            num(m.export_bytes as f64 / 1e6)
                        ),
                        value: None,
                    },
                ),
                Err(e) => (Cell::of(Err(e.clone())), None, None, Cell::of(Err(e))),
            };
            let base = || {
                self.opts
                    .baseline
                    .as_ref()
                    .map(|_| Cell::text("n/a".into()))
            };
            let again = ours.clone();
            t.row(
                &format!(
                    "search (`?search=`, a text in no record: every record tested) over {} recorded calls, {mode}, p50",
                    num(n as f64)
                ),
                ours,
                base(),
                &floor.map_or("failed".into(), |f| {
                    format!(
                        "{} ms (p99 {}) (the same records' shown texts, in memory, lowercased once, `str::contains`)",
                        num(f.p50 / 1e3),
                        num(f.p99 / 1e3)
                    )
                }),
                floor.map(|f| f.p50),
                false,
                "under the 1.5 s scan budget",
            );
            t.row(
                "the same, beside an unfiltered page",
                again,
                base(),
                &page.map_or("failed".into(), |p| {
                    format!(
                        "{} ms (p99 {}) (`GET /api/call-records`, 100 records)",
                        num(p.p50 / 1e3),
                        num(p.p99 / 1e3)
                    )
                }),
                page.map(|p| p.p50),
                false,
                "(the cost of testing every record)",
            );
            t.row(
                &format!("JSON Lines export of the same records (`?format=jsonl`), {mode}"),
                export,
                base(),
                "—",
                None,
                false,
                "streamed, memory bounded",
            );
        }
    }
}
