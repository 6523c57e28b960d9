//! Two runs compared: the calls of each (a run is what one process recorded; its id is the
//! process key), in call-tree order without the client's own events, aligned by function and
//! depth (`align.rs`), and each aligned pair marked by what differs. Arguments, results and
//! exceptions are compared by the CIDs of their stored objects (equal CIDs are equal values),
//! or as sent when an item has none. At most `MAX_COMPARE_CALLS` calls of each run are
//! compared (`truncated` says when a run has more); one page of pairs is rendered.

use serde::Serialize;
use serde_json::{json, Value};

use super::processes::{call_id, read};
use crate::align::{align, Step};
use crate::error::ApiError;
use crate::intern::Interner;
use crate::limits::MAX_COMPARE_CALLS;
use crate::pretty::{placeholder_key, without_addresses};
use crate::process_index::CLIENT;
use crate::records::{Record, Unrendered};
use crate::state::Shared;

/// What differs between the two calls of an aligned pair, or that one run alone made it.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    Same,
    DifferentArguments,
    DifferentResult,
    DifferentException,
    OnlyInA,
    OnlyInB,
}

/// One run of a comparison.
#[derive(Serialize, Debug, Clone)]
pub struct RunSide {
    pub run_id: String,
    /// Its label (empty when it has none: `runs.rs`).
    pub label: String,
    pub script: Option<String>,
    pub page_url: Option<String>,
    /// Its calls (without the client's own events), and how many of them were compared.
    pub calls: usize,
    pub compared: usize,
}

/// Aligned pairs with each mark, over the whole alignment (a pair may count under several
/// `different_*` marks).
#[derive(Serialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct CompareCounts {
    pub same: usize,
    pub different_arguments: usize,
    pub different_result: usize,
    pub different_exception: usize,
    pub only_in_a: usize,
    pub only_in_b: usize,
}

/// A value shown in a comparison: its rendered form and, when stored, its CID.
#[derive(Serialize, Debug, Clone)]
pub struct ComparedValue {
    /// A keyword argument's name (none for a positional one, a result or an exception).
    pub name: Option<String>,
    pub cid: Option<String>,
    pub shown: Value,
}

/// One call of an aligned pair.
#[derive(Serialize, Debug, Clone)]
pub struct ComparedCall {
    pub call_id: String,
    pub function: String,
    pub depth: u32,
    pub status: String,
    /// The function's signature as the program sent it (names the positional arguments).
    pub signature: Option<String>,
    pub args: Vec<ComparedValue>,
    pub result: Option<ComparedValue>,
    pub exception: Option<ComparedValue>,
}

/// One step of the alignment.
#[derive(Serialize, Debug, Clone)]
pub struct AlignedPair {
    /// Its place in the alignment (from 0).
    pub index: usize,
    pub function: String,
    pub marks: Vec<Mark>,
    pub a: Option<ComparedCall>,
    pub b: Option<ComparedCall>,
}

/// The first aligned pair that is not `same`.
#[derive(Serialize, Debug, Clone)]
pub struct Divergence {
    pub index: usize,
    pub function: String,
    pub marks: Vec<Mark>,
}

/// Two runs compared: a page of the aligned pairs (`offset`, `limit`) and the counts of all.
#[derive(Serialize, Debug, Clone)]
pub struct RunComparison {
    pub a: RunSide,
    pub b: RunSide,
    /// A run had more calls than were compared.
    pub truncated: bool,
    pub total_pairs: usize,
    pub offset: usize,
    pub limit: usize,
    pub counts: CompareCounts,
    pub first_divergence: Option<Divergence>,
    pub pairs: Vec<AlignedPair>,
}

/// One call of a run, read back.
struct Call {
    method: String,
    depth: u32,
    record: Record,
    /// What is compared: the arguments, the result and the exception, as CIDs (or as sent).
    args: Value,
    result: Value,
    exception: Value,
}

/// An item as compared: its CID, or the item as sent without its client reference (which
/// names an object of one process).
fn identity(item: &Value) -> Value {
    match item {
        Value::Object(m) => match m.get("cid") {
            Some(cid) => cid.clone(),
            None => {
                let mut m = m.clone();
                m.remove("client_ref");
                Value::Object(m)
            }
        },
        other => other.clone(),
    }
}

fn facts(record: &Record) -> (Value, Value, Value) {
    let wire = match record {
        Record::Call(c) => c.to_json(&Unrendered),
        Record::Event(e) => e.to_json(),
        Record::Other(v) => v.as_object().cloned().unwrap_or_default(),
    };
    let get = |k: &str| wire.get(k).cloned().unwrap_or(Value::Null);
    let args = match (wire.get("args"), wire.get("kwargs")) {
        (Some(Value::Array(a)), kwargs) => {
            let kwargs: Vec<(String, Value)> = kwargs
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), identity(v))).collect())
                .unwrap_or_default();
            json!([a.iter().map(identity).collect::<Vec<_>>(), kwargs])
        }
        _ => json!([get("pretty_args"), get("pretty_kwargs")]),
    };
    let raised = record.status() == Some("exception");
    let result = if raised {
        Value::Null
    } else {
        json!([get("result_cid"), get("pretty_result")])
    };
    let exception = json!([
        get("exception_cid"),
        get("exception_type"),
        get("exception")
    ]);
    (args, result, exception)
}

/// The calls of a run, in call-tree order, and how many it has; `None` for an unknown run.
fn run_calls(shared: &Shared, key: &str) -> Option<(RunSide, Vec<Call>)> {
    let (side, places) = {
        let mut index = shared.processes();
        let shape = index.shape(key)?;
        let p = index.get(key)?;
        let summary = p.summary();
        let entries = &p.entries[..shape.len];
        let mut calls = 0usize;
        let mut places = Vec::new();
        for e in shape.order.iter().map(|e| *e as usize) {
            let Some(entry) = entries.get(e) else {
                continue;
            };
            if entry.is(CLIENT) {
                continue;
            }
            calls += 1;
            if places.len() < MAX_COMPARE_CALLS {
                places.push((entry.loc, entry.method.to_string(), shape.depth[e]));
            }
        }
        let side = RunSide {
            label: String::new(),
            run_id: summary.key,
            script: summary.script,
            page_url: summary.page_url,
            calls,
            compared: 0,
        };
        (side, places)
    };
    let mut scratch = Interner::default();
    let calls: Vec<Call> = places
        .into_iter()
        .filter_map(|(loc, method, depth)| {
            let record = read(shared, loc, &mut scratch)?;
            let (args, result, exception) = facts(&record);
            Some(Call {
                method,
                depth,
                record,
                args,
                result,
                exception,
            })
        })
        .collect();
    let label = shared.lock().runs.get(key).label;
    Some((
        RunSide {
            compared: calls.len(),
            label,
            ..side
        },
        calls,
    ))
}

/// What is compared when the CIDs differ: the rendered values, where a placeholder (an object
/// the client could not pickle) is keyed without what names one process's object (its memory
/// address, its capture time: `pretty::placeholder_key`), and a plain value by its CID as
/// before. The `pickle_error` event's `object_id` is such an address too.
fn loose(shared: &Shared, c: &Call) -> (Value, Value, Value) {
    let wire = match &c.record {
        Record::Call(r) => r.to_json(&shared.render()),
        Record::Event(e) => e.to_json(),
        Record::Other(v) => v.as_object().cloned().unwrap_or_default(),
    };
    let get = |k: &str| wire.get(k).cloned().unwrap_or(Value::Null);
    let keyed = |shown: Option<&Value>, strict: Value| match shown.and_then(placeholder_key) {
        Some(k) => json!({"placeholder": k}),
        None => strict,
    };
    let pickle_error = c.method == "pickle_error";
    let args = match (&c.args, wire.get("pretty_args"), wire.get("pretty_kwargs")) {
        (Value::Array(parts), pretty_a, pretty_k) if parts.len() == 2 => {
            let pos: Vec<Value> = parts[0]
                .as_array()
                .map(|a| {
                    a.iter()
                        .enumerate()
                        .map(|(i, v)| keyed(pretty_a.and_then(|p| p.get(i)), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let kw: Vec<Value> = match &parts[1] {
                Value::Array(pairs) => pairs
                    .iter()
                    .map(|pair| {
                        let name = pair.get(0).and_then(Value::as_str).unwrap_or("");
                        let v = pair.get(1).cloned().unwrap_or(Value::Null);
                        let v = match (&v, pickle_error && name == "object_id") {
                            (Value::String(s), true) => Value::String(without_addresses(s)),
                            _ => keyed(pretty_k.and_then(|p| p.get(name)), v),
                        };
                        json!([name, v])
                    })
                    .collect(),
                Value::Object(m) => m
                    .iter()
                    .map(|(name, v)| {
                        let v = match (v, pickle_error && name == "object_id") {
                            (Value::String(s), true) => Value::String(without_addresses(s)),
                            _ => keyed(pretty_k.and_then(|p| p.get(name)), v.clone()),
                        };
                        json!([name, v])
                    })
                    .collect(),
                other => vec![other.clone()],
            };
            json!([pos, kw])
        }
        (other, _, _) => other.clone(),
    };
    let result = keyed(wire.get("pretty_result"), c.result.clone());
    let exception = match get("exception") {
        e if placeholder_key(&e).is_some() => {
            json!([get("exception_type"), placeholder_key(&e)])
        }
        _ => c.exception.clone(),
    };
    (args, result, exception)
}

fn marks(shared: &Shared, a: &Call, b: &Call) -> Vec<Mark> {
    let strict = [
        a.args != b.args,
        a.result != b.result,
        a.exception != b.exception,
    ];
    let differs = if strict.iter().any(|d| *d) {
        let (la, lb) = (loose(shared, a), loose(shared, b));
        [
            strict[0] && la.0 != lb.0,
            strict[1] && la.1 != lb.1,
            strict[2] && la.2 != lb.2,
        ]
    } else {
        strict
    };
    let mut m = Vec::new();
    if differs[0] {
        m.push(Mark::DifferentArguments);
    }
    if differs[1] {
        m.push(Mark::DifferentResult);
    }
    if differs[2] {
        m.push(Mark::DifferentException);
    }
    if m.is_empty() {
        m.push(Mark::Same);
    }
    m
}

fn shown(shared: &Shared, call: &Call) -> ComparedCall {
    let wire = call.record.to_json(&shared.render());
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let mut args = Vec::new();
    let cids: Vec<Option<String>> = wire
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|i| text(i.get("cid"))).collect())
        .unwrap_or_default();
    if let Some(a) = wire.get("pretty_args").and_then(Value::as_array) {
        args.extend(a.iter().enumerate().map(|(i, v)| ComparedValue {
            name: None,
            cid: cids.get(i).cloned().flatten(),
            shown: v.clone(),
        }));
    }
    if let Some(k) = wire.get("pretty_kwargs").and_then(Value::as_object) {
        let kw = wire.get("kwargs");
        args.extend(k.iter().map(|(n, v)| ComparedValue {
            name: Some(n.clone()),
            cid: text(kw.and_then(|m| m.get(n)).and_then(|i| i.get("cid"))),
            shown: v.clone(),
        }));
    }
    let status = call.record.status().unwrap_or("").to_owned();
    let result = (status != "exception")
        .then(|| ComparedValue {
            name: None,
            cid: text(wire.get("result_cid")),
            shown: wire.get("pretty_result").cloned().unwrap_or(Value::Null),
        })
        .filter(|v| v.cid.is_some() || !v.shown.is_null());
    let exception = wire
        .get("exception")
        .filter(|e| !e.is_null())
        .map(|e| ComparedValue {
            name: None,
            cid: text(wire.get("exception_cid")),
            shown: e.clone(),
        });
    ComparedCall {
        call_id: call_id(&call.record),
        function: call.method.clone(),
        depth: call.depth,
        status,
        signature: text(wire.get("signature")),
        args,
        result,
        exception,
    }
}

/// A run id as asked; a space stands for the `+` of a process key (a query string's `+` that
/// was not percent-encoded reads as a space, and keys hold no spaces).
fn run_id(value: Option<&str>, field: &str) -> Result<String, ApiError> {
    match value.map(str::trim) {
        Some(v) if !v.is_empty() => Ok(v.replace(' ', "+")),
        _ => Err(ApiError::bad_request(
            "missing_parameter",
            format!("{field} must name a run (a process key such as 1795311683.500000+4242)"),
        )
        .with("parameter", field)),
    }
}

/// Where a page of aligned pairs starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStart {
    /// At this pair (from 0).
    At(usize),
    /// This many pairs before the first divergence (at the first pair when there is none), so
    /// that the page opens on what differs and its neighbourhood.
    BeforeFirstDivergence(usize),
}

/// Compares the runs `a` and `b` (process keys): `limit` aligned pairs from `offset`. 400 for a
/// blank id, 404 `run_not_found` (naming the parameter) for a run with no records.
pub fn compare_runs(
    shared: &Shared,
    a: Option<&str>,
    b: Option<&str>,
    offset: usize,
    limit: usize,
) -> Result<RunComparison, ApiError> {
    compare_runs_from(shared, a, b, PageStart::At(offset), limit)
}

/// [`compare_runs`] with a page that may start around the first divergence.
pub fn compare_runs_from(
    shared: &Shared,
    a: Option<&str>,
    b: Option<&str>,
    start: PageStart,
    limit: usize,
) -> Result<RunComparison, ApiError> {
    let (ka, kb) = (run_id(a, "a")?, run_id(b, "b")?);
    let side = |key: &String, field: &str| {
        run_calls(shared, key).ok_or_else(|| {
            ApiError::not_found(
                "run_not_found",
                format!(
                    "no run {key}: a run id is the process_key of a process that recorded calls"
                ),
            )
            .with("parameter", field)
        })
    };
    let (side_a, calls_a) = side(&ka, "a")?;
    let (side_b, calls_b) = side(&kb, "b")?;
    let key = |c: &Call| (c.method.clone(), c.depth);
    let keys_a: Vec<(String, u32)> = calls_a.iter().map(key).collect();
    let keys_b: Vec<(String, u32)> = calls_b.iter().map(key).collect();
    let steps = align(&keys_a, &keys_b);
    let mut counts = CompareCounts::default();
    let mut first_divergence = None;
    // Every pair is marked (the counts and the first divergence cover all); only the page's
    // pairs are rendered.
    let mut marked = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let (ca, cb) = match *step {
            Step::Both(i, j) => (calls_a.get(i), calls_b.get(j)),
            Step::OnlyA(i) => (calls_a.get(i), None),
            Step::OnlyB(j) => (None, calls_b.get(j)),
        };
        let m = match (ca, cb) {
            (Some(x), Some(y)) => marks(shared, x, y),
            (Some(_), None) => vec![Mark::OnlyInA],
            _ => vec![Mark::OnlyInB],
        };
        for mark in &m {
            *match mark {
                Mark::Same => &mut counts.same,
                Mark::DifferentArguments => &mut counts.different_arguments,
                Mark::DifferentResult => &mut counts.different_result,
                Mark::DifferentException => &mut counts.different_exception,
                Mark::OnlyInA => &mut counts.only_in_a,
                Mark::OnlyInB => &mut counts.only_in_b,
            } += 1;
        }
        let function = ca.or(cb).map(|c| c.method.clone()).unwrap_or_default();
        if first_divergence.is_none() && m != [Mark::Same] {
            first_divergence = Some(Divergence {
                index,
                function: function.clone(),
                marks: m.clone(),
            });
        }
        marked.push((ca, cb, function, m));
    }
    let offset = match start {
        PageStart::At(offset) => offset,
        PageStart::BeforeFirstDivergence(before) => first_divergence
            .as_ref()
            .map_or(0, |d| d.index.saturating_sub(before)),
    };
    let pairs = marked
        .into_iter()
        .enumerate()
        .skip(offset)
        .take(limit)
        .map(|(index, (ca, cb, function, marks))| AlignedPair {
            index,
            function,
            marks,
            a: ca.map(|c| shown(shared, c)),
            b: cb.map(|c| shown(shared, c)),
        })
        .collect();
    Ok(RunComparison {
        truncated: side_a.calls > side_a.compared || side_b.calls > side_b.compared,
        a: side_a,
        b: side_b,
        total_pairs: steps.len(),
        offset,
        limit,
        counts,
        first_divergence,
        pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{complete, complete_body, shared, start, start_body};
    use serde_json::json;

    /// A root call of process `pid` at `at`, returning `result` or raising `raised`.
    fn call(s: &Shared, pid: i64, method: &str, arg: i64, at: f64, raised: Option<&str>) {
        let mut b = start_body(method, &[json!(arg)]);
        b.insert("process_pid".into(), json!(pid));
        b.insert(
            "call_site".into(),
            json!({"timestamp": at, "stack_trace": []}),
        );
        let id = start(s, &b).unwrap()["call_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut done = complete_body(&id, &json!(arg * 2));
        done.insert("process_pid".into(), json!(pid));
        done.insert("timestamp".into(), json!(at + 0.5));
        if let Some(kind) = raised {
            done.insert("status".into(), json!("exception"));
            done.remove("result_cid");
            done.remove("result_data");
            done.insert("exception_type".into(), json!(kind));
            done.insert("exception_message".into(), json!("bad"));
        }
        complete(s, &done).unwrap();
    }

    fn key(pid: i64) -> String {
        format!("1795311683.500000+{pid}")
    }

    #[test]
    fn a_different_exception_and_a_missing_call_are_marked() {
        let s = shared();
        call(&s, 1, "f", 1, 10.0, None);
        call(&s, 1, "g", 2, 11.0, Some("ValueError"));
        call(&s, 1, "h", 3, 12.0, None);
        call(&s, 2, "f", 1, 10.0, None);
        call(&s, 2, "g", 2, 11.0, Some("KeyError"));
        let c = compare_runs(&s, Some(&key(1)), Some(&key(2)), 0, 10).unwrap();
        let marks: Vec<&[Mark]> = c.pairs.iter().map(|p| p.marks.as_slice()).collect();
        assert_eq!(
            marks,
            [
                &[Mark::Same][..],
                &[Mark::DifferentException],
                &[Mark::OnlyInA]
            ]
        );
        let d = c.first_divergence.unwrap();
        assert_eq!((d.index, d.function.as_str()), (1, "g"));
        let shown = c.pairs[1].b.as_ref().unwrap();
        assert!(shown.result.is_none() && shown.exception.is_some());
        assert!(c.pairs[2].b.is_none());
        // A space for the `+` names the same run; a blank or unknown one is refused.
        assert!(compare_runs(&s, Some(&key(1).replace('+', " ")), Some(&key(1)), 0, 1).is_ok());
        let e = compare_runs(&s, Some(" "), Some(&key(1)), 0, 1).unwrap_err();
        assert_eq!(e.code(), "missing_parameter");
        let e = compare_runs(&s, Some(&key(1)), Some("9+9"), 0, 1).unwrap_err();
        assert_eq!(e.code(), "run_not_found");
    }

    #[test]
    fn a_page_can_start_before_the_first_divergence() {
        let s = shared();
        for i in 0..20 {
            call(&s, 1, "f", i, 10.0 + i as f64, None);
            call(
                &s,
                2,
                "f",
                if i == 12 { 99 } else { i },
                10.0 + i as f64,
                None,
            );
        }
        let around = PageStart::BeforeFirstDivergence(3);
        let c = compare_runs_from(&s, Some(&key(1)), Some(&key(2)), around, 5).unwrap();
        assert_eq!(c.first_divergence.as_ref().map(|d| d.index), Some(12));
        assert_eq!(c.offset, 9);
        let shown: Vec<usize> = c.pairs.iter().map(|p| p.index).collect();
        assert_eq!(shown, [9, 10, 11, 12, 13]);
        assert_eq!(c.counts.different_arguments, 1);
        // No divergence: the first page; and the runs' labels come along.
        let c = compare_runs_from(&s, Some(&key(1)), Some(&key(1)), around, 5).unwrap();
        assert_eq!((c.offset, c.pairs[0].index), (0, 0));
        assert_eq!(c.a.label, "");
    }

    #[test]
    fn long_runs_are_cut_to_the_limit_and_say_so() {
        let s = shared();
        for i in 0..=MAX_COMPARE_CALLS {
            call(&s, 1, "f", 1, 10.0 + i as f64, None);
        }
        call(&s, 2, "f", 1, 10.0, None);
        let c = compare_runs(&s, Some(&key(1)), Some(&key(2)), 0, 5).unwrap();
        assert!(c.truncated);
        assert_eq!(
            (c.a.calls, c.a.compared),
            (MAX_COMPARE_CALLS + 1, MAX_COMPARE_CALLS)
        );
        assert_eq!(c.total_pairs, MAX_COMPARE_CALLS);
        assert_eq!(c.counts.same, 1);
        assert_eq!(c.counts.only_in_a, MAX_COMPARE_CALLS - 1);
        assert_eq!(c.pairs.len(), 5);
    }
}
