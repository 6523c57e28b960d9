//! Call records grouped by the process that made them, for the web UI's call trees: the
//! processes (from the process index, never from the records themselves), a window of one
//! process's tree (only the records of the rows shown are read), and one record found by call id
//! wherever it is kept.
//!
//! Every record of a process is in the index (`process_index.rs`), noted when it is recorded
//! and, with a database file, when the file is opened; so the pages cost the same with a
//! thousand records or a million. With a database file a record is read back from the file by
//! its offset; without one, from the in-memory window by its sequence number, and what falls out
//! of the window is forgotten by the index too.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use crate::intern::Interner;
use crate::limits::{MAX_PROCESSES_LISTED, MAX_TREE_COLLAPSED};
use crate::process_index::{self, Ask, Entry, Shape, CLIENT, EVENT, RAISED};
use crate::records::Record;
use crate::state::Shared;

pub use crate::process_index::Summary as ProcessSummary;

/// Without a database file, the index forgets what fell out of the window every this many
/// records.
const FORGET_EVERY: u64 = 4096;

/// Notes a record just kept (`seq`: its number in the window; `offset`: where the database
/// file holds it) in the process index.
pub fn note(shared: &Shared, record: &Record, seq: u64, offset: Option<u64>) {
    if shared.store.is_durable() {
        if let Some(at) = offset {
            let noted = shared.processes().note(record, at);
            if !noted {
                // Written before its run's tombstone: deleted with the run.
                if let Err(e) = shared.store.forget_records(&[at]) {
                    log::error!("store index: cannot mark a deleted record: {e}");
                }
            }
        }
        return;
    }
    let floor = (seq % FORGET_EVERY == 0).then(|| shared.lock().records.dropped());
    let mut index = shared.processes();
    index.note(record, seq);
    if let Some(floor) = floor {
        index.forget_below(floor);
    }
}

/// The processes that made calls or sent events, most recently active first.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessListing {
    pub processes: Vec<ProcessSummary>,
    /// Processes not listed (beyond `MAX_PROCESSES_LISTED`).
    pub more: usize,
    /// Each listed process's run label, in the same order (empty when it has none).
    pub labels: Vec<String>,
}

pub fn processes(shared: &Shared) -> ProcessListing {
    let mut all = shared.processes().summaries();
    let more = all.len().saturating_sub(MAX_PROCESSES_LISTED);
    all.truncate(MAX_PROCESSES_LISTED);
    let labels = {
        let st = shared.lock();
        all.iter().map(|p| st.runs.get(&p.key).label).collect()
    };
    ProcessListing {
        processes: all,
        more,
        labels,
    }
}

/// A record read back, by where the index says it is kept.
pub(super) fn read(shared: &Shared, loc: u64, scratch: &mut Interner) -> Option<Record> {
    if shared.store.is_durable() {
        match shared.store.read_record(loc) {
            Ok((_, v)) => Some(Record::from_disk(scratch, v)),
            Err(e) => {
                log::error!("store: cannot read the record at offset {loc}: {e}");
                None
            }
        }
    } else {
        shared
            .lock()
            .records
            .before(loc + 1, 1, |_| true)
            .found
            .pop()
    }
}

pub(super) fn call_id(r: &Record) -> String {
    let text = |v: Value| match v {
        Value::String(s) => s,
        other => other.to_string(),
    };
    match r {
        Record::Call(c) => c.call_id.to_string(),
        Record::Event(e) => text(e.call_id.to_value()),
        Record::Other(v) => v.get("call_id").cloned().map(text).unwrap_or_default(),
    }
}

/// What a person asked to see of a process's tree.
#[derive(Debug, Clone, Default)]
pub struct TreeAsk<'a> {
    /// The call whose details are shown (the window is placed around it).
    pub selected: Option<&'a str>,
    /// The window starts at this record (`loc`), or the first row after it.
    pub from: Option<u64>,
    /// Records (`loc`) whose children are folded away.
    pub collapsed: Vec<u64>,
    /// Show the client's own events.
    pub show_client: bool,
    /// Show only records whose function, status or call id contains this (and their callers).
    pub filter: &'a str,
    /// Rows at most.
    pub size: usize,
}

/// One row of a tree window.
#[derive(Debug, Clone)]
pub struct TreeRow {
    /// Where the record is kept: the pages name records by it.
    pub loc: u64,
    pub call_id: String,
    pub method: String,
    /// `success`, `exception`, or an event's status.
    pub status: String,
    pub event: bool,
    pub client: bool,
    pub raised: bool,
    pub repl: bool,
    pub resolution: Option<crate::resolution::Action>,
    pub took: f64,
    pub depth: u32,
    /// Records below it in the tree, and whether they are folded away.
    pub descendants: usize,
    pub collapsed: bool,
    /// It matches the filter (rather than being shown as the caller of a match).
    pub matched: bool,
    /// The signature, when the client sent one, and the arguments as shown (positional ones
    /// without a name).
    pub signature: Option<String>,
    pub args: Vec<(Option<String>, Value)>,
}

/// A record linked from the window (a caller, the previous or next call).
#[derive(Debug, Clone)]
pub struct TreeLink {
    pub call_id: String,
    pub method: String,
}

/// The selected record.
#[derive(Debug, Clone)]
pub struct TreeSelected {
    pub row: TreeRow,
    /// Its wire shape (`Record::to_json`).
    pub record: Value,
    pub stack: Value,
    pub started_at: f64,
    pub parent: Option<TreeLink>,
    /// Calls it made (its children in the tree).
    pub children: usize,
}

/// A window of a process's tree.
#[derive(Debug, Clone)]
pub struct TreeWindow {
    pub process: ProcessSummary,
    pub rows: Vec<TreeRow>,
    /// The callers of the first row, outermost first (the window starts inside them).
    pub ancestors: Vec<TreeLink>,
    /// Rows shown in all (with folding and filter), and where the window starts among them.
    pub shown: usize,
    pub first: usize,
    /// Where the windows before and after this one start, and the last one.
    pub earlier: Option<u64>,
    pub later: Option<u64>,
    pub last: Option<u64>,
    pub selected: Option<TreeSelected>,
    /// Previous and next call in time order (among the matches), and where the selected one
    /// is among them (from 1) of how many.
    pub prev: Option<TreeLink>,
    pub next: Option<TreeLink>,
    pub time_index: Option<usize>,
    pub time_total: usize,
    /// The client's events left out.
    pub client_hidden: usize,
    /// Records (`loc`) folded, as the page was asked (kept by its links).
    pub collapsed: Vec<u64>,
}

fn contains_ci(hay: &str, needle_lower: &str) -> bool {
    needle_lower.is_empty() || hay.to_lowercase().contains(needle_lower)
}

/// What the index tells of an entry, before its record is read.
struct Place {
    entry: usize,
    depth: u32,
    descendants: usize,
    collapsed: bool,
    matched: bool,
}

/// A window of the tree of the process `key`; `None` when the process has no records.
pub fn process_tree(shared: &Shared, key: &str, ask: &TreeAsk) -> Option<TreeWindow> {
    let mut scratch = Interner::default();
    // Everything the index decides, under its lock; the records are read after.
    let (process, entries_of, shape, plan) = {
        let mut index = shared.processes();
        let shape: Arc<Shape> = index.shape(key)?;
        let p = index.get(key)?;
        let process = p.summary();
        let entries = &p.entries[..shape.len];
        let plan = plan(shared, &mut scratch, entries, &shape, ask);
        let wanted: Vec<usize> = plan.wanted();
        let copies: Vec<(usize, Entry)> = wanted
            .into_iter()
            .filter_map(|i| entries.get(i).map(|e| (i, e.clone())))
            .collect();
        (process, copies, shape, plan)
    };
    let entry = |i: usize| entries_of.iter().find(|(j, _)| *j == i).map(|(_, e)| e);
    let link = |scratch: &mut Interner, i: usize| -> Option<TreeLink> {
        let e = entry(i)?;
        let r = read(shared, e.loc, scratch)?;
        Some(TreeLink {
            call_id: call_id(&r),
            method: e.method.to_string(),
        })
    };
    let render = shared.render();
    let make_row = |scratch: &mut Interner, pl: &Place| -> Option<(TreeRow, Record)> {
        let e = entry(pl.entry)?;
        let r = read(shared, e.loc, scratch)?;
        let wire = r.to_json(&render);
        let mut args: Vec<(Option<String>, Value)> = Vec::new();
        if let Some(a) = wire.get("pretty_args").and_then(Value::as_array) {
            args.extend(a.iter().map(|v| (None, v.clone())));
        }
        if let Some(k) = wire.get("pretty_kwargs").and_then(Value::as_object) {
            args.extend(k.iter().map(|(n, v)| (Some(n.clone()), v.clone())));
        }
        let (status, repl, resolution) = match &r {
            Record::Call(c) => (
                c.status.as_str().unwrap_or("").to_owned(),
                !c.repl_sessions.is_empty(),
                c.resolution()
                    .map(|r| r.action)
                    .filter(|a| *a != crate::resolution::Action::Continue),
            ),
            Record::Event(ev) => (ev.status.to_string(), false, None),
            Record::Other(_) => (String::new(), false, None),
        };
        Some((
            TreeRow {
                loc: e.loc,
                call_id: call_id(&r),
                method: e.method.to_string(),
                status,
                event: e.is(EVENT),
                client: e.is(CLIENT),
                raised: e.is(RAISED),
                repl,
                resolution,
                took: f64::from(e.took),
                depth: pl.depth,
                descendants: pl.descendants,
                collapsed: pl.collapsed,
                matched: pl.matched,
                signature: wire
                    .get("signature")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                args,
            },
            r,
        ))
    };
    let rows: Vec<TreeRow> = plan
        .rows
        .iter()
        .filter_map(|pl| make_row(&mut scratch, pl).map(|(row, _)| row))
        .collect();
    let ancestors = plan
        .ancestors
        .iter()
        .filter_map(|i| link(&mut scratch, *i))
        .collect();
    let selected = plan.selected.as_ref().and_then(|(pl, parent, children)| {
        let (row, r) = make_row(&mut scratch, pl)?;
        let record = r.to_json(&render);
        let stack = record
            .get("call_site")
            .and_then(|s| s.get("stack_trace"))
            .cloned()
            .unwrap_or(Value::Null);
        Some(TreeSelected {
            row,
            stack,
            started_at: entry(pl.entry).map_or(0.0, |e| e.start),
            record,
            parent: parent.and_then(|p| link(&mut scratch, p)),
            children: *children,
        })
    });
    let loc_of = |i: Option<usize>| i.and_then(&entry).map(|e| e.loc);
    let _ = shape;
    Some(TreeWindow {
        process,
        rows,
        ancestors,
        shown: plan.shown,
        first: plan.first,
        earlier: loc_of(plan.earlier),
        later: loc_of(plan.later),
        last: loc_of(plan.last),
        selected,
        prev: plan.prev.and_then(|i| link(&mut scratch, i)),
        next: plan.next.and_then(|i| link(&mut scratch, i)),
        time_index: plan.time_index,
        time_total: plan.time_total,
        client_hidden: if ask.show_client { 0 } else { plan.client },
        collapsed: plan.collapsed,
    })
}

/// The entries a window shows and links to.
struct Plan {
    rows: Vec<Place>,
    ancestors: Vec<usize>,
    shown: usize,
    first: usize,
    earlier: Option<usize>,
    later: Option<usize>,
    last: Option<usize>,
    /// The selected entry, its parent and its number of children.
    selected: Option<(Place, Option<usize>, usize)>,
    prev: Option<usize>,
    next: Option<usize>,
    time_index: Option<usize>,
    time_total: usize,
    client: usize,
    collapsed: Vec<u64>,
}

impl Plan {
    fn wanted(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.rows.iter().map(|p| p.entry).collect();
        w.extend(&self.ancestors);
        w.extend(self.earlier);
        w.extend(self.later);
        w.extend(self.last);
        w.extend(self.prev);
        w.extend(self.next);
        if let Some((p, parent, _)) = &self.selected {
            w.push(p.entry);
            w.extend(*parent);
        }
        w.sort_unstable();
        w.dedup();
        w
    }
}

fn plan(
    shared: &Shared,
    scratch: &mut Interner,
    entries: &[Entry],
    shape: &Shape,
    ask: &TreeAsk,
) -> Plan {
    let filter = ask.filter.trim().to_lowercase();
    let by_loc = |loc: u64| entries.iter().position(|e| e.loc == loc);
    let collapsed: Vec<u64> = ask
        .collapsed
        .iter()
        .copied()
        .filter(|l| by_loc(*l).is_some())
        .take(MAX_TREE_COLLAPSED)
        .collect();
    let folded: HashSet<usize> = collapsed.iter().filter_map(|l| by_loc(*l)).collect();
    let id_hash = process_index::id_hash(ask.filter.trim());
    let status_of = |e: &Entry| {
        if e.is(EVENT) {
            ""
        } else if e.is(RAISED) {
            "exception"
        } else {
            "success"
        }
    };
    // Functions are few: each one's name is tested once.
    let memo = std::cell::RefCell::new(std::collections::HashMap::<String, bool>::new());
    let matches_fn = |e: &Entry| -> bool {
        let m: &str = &e.method;
        let known = memo.borrow().get(m).copied();
        let by_method = known.unwrap_or_else(|| {
            let b = contains_ci(m, &filter);
            memo.borrow_mut().insert(m.to_owned(), b);
            b
        });
        by_method || contains_ci(status_of(e), &filter) || e.id == id_hash
    };
    let filtered = !filter.is_empty();
    let want = Ask {
        hide_client: !ask.show_client,
        collapsed: &folded,
        matches: filtered.then_some(&matches_fn as &dyn Fn(&Entry) -> bool),
    };
    let (visible, matched) = process_index::visible(entries, shape, &want);
    let hidden = |e: usize| !ask.show_client && entries[e].is(CLIENT);
    let counts = |e: usize| matched[e] && !hidden(e);
    // The selected entry: by call id hash, checked by reading the record.
    let selected = ask.selected.and_then(|id| {
        let h = process_index::id_hash(id);
        entries
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, e)| e.id == h)
            .find(|(_, e)| read(shared, e.loc, scratch).is_some_and(|r| r.call_id_is(id)))
            .map(|(i, _)| i)
    });
    let size = ask.size.max(1);
    let at_or_after = |p: u32| visible.partition_point(|v| *v < p);
    let first = if let Some(i) = ask.from.and_then(by_loc) {
        at_or_after(shape.pos[i])
    } else if let Some(s) = selected {
        at_or_after(shape.pos[s]).saturating_sub(size / 4)
    } else {
        0
    };
    let first = first.min(visible.len().saturating_sub(1));
    let end = (first + size).min(visible.len());
    let place = |p: usize| {
        let e = shape.order[p] as usize;
        Place {
            entry: e,
            depth: shape.depth[e],
            descendants: shape.descendants(e),
            collapsed: folded.contains(&e),
            matched: matched[e],
        }
    };
    let rows: Vec<Place> = visible[first..end]
        .iter()
        .map(|p| place(*p as usize))
        .collect();
    let mut ancestors = Vec::new();
    if let Some(row) = rows.first() {
        let mut at = shape.parent(row.entry);
        while let Some(a) = at {
            ancestors.push(a);
            at = shape.parent(a);
        }
        ancestors.reverse();
    }
    let at_visible = |i: usize| shape.order[visible[i] as usize] as usize;
    let earlier = (first > 0).then(|| at_visible(first.saturating_sub(size)));
    let later = (end < visible.len()).then(|| at_visible(end));
    let last = (end < visible.len()).then(|| at_visible(visible.len().saturating_sub(size)));
    // Time order among the matches.
    let time_total = shape
        .by_time
        .iter()
        .filter(|e| counts(**e as usize))
        .count();
    let (prev, next, time_index) = match selected {
        Some(s) => {
            let t = shape.time_pos[s] as usize;
            let prev = shape.by_time[..t]
                .iter()
                .rev()
                .map(|e| *e as usize)
                .find(|e| counts(*e));
            let next = shape.by_time[t + 1..]
                .iter()
                .map(|e| *e as usize)
                .find(|e| counts(*e));
            let index = counts(s).then(|| {
                shape.by_time[..t]
                    .iter()
                    .filter(|e| counts(**e as usize))
                    .count()
                    + 1
            });
            (prev, next, index)
        }
        None => (
            None,
            shape
                .by_time
                .iter()
                .map(|e| *e as usize)
                .find(|e| counts(*e)),
            None,
        ),
    };
    let selected = selected.map(|s| {
        let p = shape.pos[s] as usize;
        let d = shape.depth[s];
        let children = (p + 1..shape.end[p] as usize)
            .filter(|q| shape.depth[shape.order[*q] as usize] == d + 1)
            .count();
        (place(p), shape.parent(s), children)
    });
    Plan {
        rows,
        ancestors,
        shown: visible.len(),
        first,
        earlier,
        later,
        last,
        selected,
        prev,
        next,
        time_index,
        time_total,
        client: entries.iter().filter(|e| e.is(CLIENT)).count(),
        collapsed,
    }
}

/// The wire shape of the newest record with this call id, from the window or the file.
pub fn find_record(shared: &Shared, call_id: &str) -> Option<Value> {
    let found = shared.lock().records.by_call_id(call_id);
    let found = found.or_else(|| {
        if !shared.store.is_durable() {
            return None;
        }
        let places: Vec<u64> = {
            let index = shared.processes();
            index
                .find(call_id)
                .into_iter()
                .filter_map(|(key, i)| index.get(&key).and_then(|p| p.entries.get(i)))
                .map(|e| e.loc)
                .collect()
        };
        let mut scratch = Interner::default();
        places
            .into_iter()
            .filter_map(|loc| read(shared, loc, &mut scratch))
            .find(|r| r.call_id_is(call_id))
    })?;
    Some(found.to_json(&shared.render()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, complete, complete_body, shared, start, start_body};
    use serde_json::json;

    fn call(s: &Shared, method: &str, pid: i64, at: f64, stack: Value) -> String {
        let mut b = start_body(method, &[json!(1)]);
        b.insert("process_pid".into(), json!(pid));
        b.insert(
            "call_site".into(),
            json!({"timestamp": at, "stack_trace": stack}),
        );
        let started = start(s, &b).unwrap();
        let id = started["call_id"].as_str().unwrap().to_owned();
        let mut done = complete_body(&id, &json!(2));
        done.insert("timestamp".into(), json!(at + 1.0));
        done.insert("process_pid".into(), json!(pid));
        complete(s, &done).unwrap();
        id
    }

    fn ask(selected: Option<&str>) -> TreeAsk<'_> {
        TreeAsk {
            selected,
            size: 100,
            ..TreeAsk::default()
        }
    }

    #[test]
    fn records_are_grouped_by_process_oldest_first() {
        let s = shared();
        let a = call(&s, "f", 1, 100.0, json!([]));
        let b = call(&s, "g", 2, 50.0, json!([]));
        let c = call(
            &s,
            "h",
            1,
            10.0,
            json!([{"filename": "/srv/x.py", "lineno": 3, "function": "<module>"}]),
        );
        crate::service::call_event(
            &s,
            &body(
                json!({"method_name": "e", "status": "registered", "timestamp": 200.0,
                         "process_pid": 1, "process_start_time": 1795311683.5,
                         "event_id": "ev-1", "call_site": {"stack_trace": []}}),
            ),
        )
        .unwrap();
        let listing = processes(&s);
        let keys: Vec<(i64, usize)> = listing
            .processes
            .iter()
            .map(|p| (p.pid, p.records))
            .collect();
        assert_eq!(keys, [(1, 3), (2, 1)], "most recently active first");
        let p1 = &listing.processes[0];
        assert_eq!((p1.first_at, p1.last_at), (10.0, 200.0));
        assert_eq!(p1.key, "1795311683.500000+1");
        assert_eq!(p1.script.as_deref(), Some("x.py"));

        let w = process_tree(&s, &p1.key, &ask(Some(&a))).unwrap();
        let ids: Vec<&str> = w.rows.iter().map(|r| r.call_id.as_str()).collect();
        assert_eq!(ids, [c.as_str(), a.as_str(), "ev-1"]);
        assert!(w.rows[2].event);
        let sel = w.selected.unwrap();
        assert_eq!(sel.record["call_id"], json!(a));
        assert_eq!(sel.record["pretty_result"], "2");
        assert_eq!(sel.stack, json!([]));
        assert_eq!((w.time_index, w.time_total), (Some(2), 3));
        assert_eq!(w.prev.unwrap().call_id, c);
        assert_eq!(w.next.unwrap().call_id, "ev-1");
        let w = process_tree(&s, &p1.key, &ask(Some(&b))).unwrap();
        assert!(w.selected.is_none(), "b is a call of another process");
        assert!(process_tree(&s, "nope", &ask(None)).is_none());
        assert_eq!(find_record(&s, &b).unwrap()["method_name"], "g");
        assert_eq!(find_record(&s, "ev-1").unwrap()["status"], "registered");
        assert!(find_record(&s, "nope").is_none());
    }

    fn frame(line: u64) -> Value {
        json!({"filename": "/app.py", "lineno": line, "function": "f"})
    }

    #[test]
    fn a_window_folds_and_pages_and_hides_client_events() {
        // A root calling 30 children (it completes after them); then a client event.
        let s = shared();
        let mut b = start_body("root", &[]);
        b.insert("process_pid".into(), json!(7));
        b.insert(
            "call_site".into(),
            json!({"timestamp": 0.0, "stack_trace": [frame(1)]}),
        );
        let rid = start(&s, &b).unwrap()["call_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let kids: Vec<String> = (0..30)
            .map(|i| {
                call(
                    &s,
                    "kid",
                    7,
                    1.0 + f64::from(i),
                    json!([frame(2), frame(1)]),
                )
            })
            .collect();
        let mut done = complete_body(&rid, &json!(0));
        done.insert("timestamp".into(), json!(100.0));
        done.insert("process_pid".into(), json!(7));
        complete(&s, &done).unwrap();
        crate::service::call_event(
            &s,
            &body(
                json!({"method_name": "with_debug.register", "status": "registered",
                         "timestamp": 200.0, "process_pid": 7,
                         "process_start_time": 1795311683.5, "event_id": "ev-c",
                         "call_site": {"stack_trace": []}}),
            ),
        )
        .unwrap();
        let key = processes(&s).processes[0].key.clone();
        let small = |a: TreeAsk| process_tree(&s, &key, &TreeAsk { size: 10, ..a }).unwrap();
        let w = small(TreeAsk::default());
        assert_eq!(w.rows.len(), 10);
        assert_eq!(w.rows[0].method, "root");
        assert_eq!(w.rows[0].descendants, 30);
        assert_eq!(w.rows[1].depth, 1);
        assert_eq!(
            (w.shown, w.client_hidden),
            (31, 1),
            "the client event is hidden"
        );
        let later = w.later.unwrap();
        let w2 = small(TreeAsk {
            from: Some(later),
            ..TreeAsk::default()
        });
        assert_eq!(w2.first, 10);
        assert_eq!(w2.rows[0].call_id, kids[9]);
        assert_eq!(w2.ancestors.len(), 1, "the window starts inside the root");
        assert_eq!(w2.ancestors[0].call_id, rid);
        // Folded: one row.
        let w3 = small(TreeAsk {
            collapsed: vec![w.rows[0].loc],
            ..TreeAsk::default()
        });
        assert_eq!(w3.shown, 1);
        assert!(w3.rows[0].collapsed && w3.later.is_none());
        // Client events shown when asked, marked as the client's.
        let w4 = process_tree(
            &s,
            &key,
            &TreeAsk {
                show_client: true,
                size: 100,
                ..TreeAsk::default()
            },
        )
        .unwrap();
        assert_eq!((w4.shown, w4.client_hidden), (32, 0));
        assert!(w4.rows.last().unwrap().client);
        // Stepping in time order from the selected child.
        let w5 = small(TreeAsk {
            selected: Some(&kids[20]),
            ..TreeAsk::default()
        });
        assert_eq!(w5.next.unwrap().call_id, kids[21]);
        assert!(w5.rows.iter().any(|r| r.call_id == kids[20]));
        assert_eq!(w5.selected.unwrap().parent.unwrap().call_id, rid);
        // Filter: the matches and their callers.
        let w6 = small(TreeAsk {
            filter: "ROOT",
            ..TreeAsk::default()
        });
        assert_eq!(w6.shown, 1);
    }

    #[test]
    fn records_past_the_window_are_read_back_from_the_database_file() {
        let d = crate::service::testing::Durable::new(2);
        let s = &d.shared;
        let ids: Vec<String> = (0..5)
            .map(|i| call(s, &format!("f{i}"), 7, f64::from(i), json!([])))
            .collect();
        let listing = processes(s);
        assert_eq!(listing.processes[0].records, 5);
        let w = process_tree(s, &listing.processes[0].key, &ask(Some(&ids[0]))).unwrap();
        let got: Vec<&String> = w.rows.iter().map(|r| &r.call_id).collect();
        assert_eq!(
            got,
            ids.iter().collect::<Vec<_>>(),
            "each once, oldest first"
        );
        assert_eq!(w.selected.unwrap().record["method_name"], "f0");
        assert_eq!(find_record(s, &ids[1]).unwrap()["method_name"], "f1");
    }
}
