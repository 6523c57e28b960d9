//! The processes that recorded calls, each with its records in a light form (about 40 bytes a
//! record: where the record is kept, its times, function, stack and a few flags), so that the
//! call-tree pages never read every record: a process's tree is inferred from these entries
//! (cached until the process records more) and only the records of the window shown are read.
//!
//! Parents are inferred from stack traces. Like the original server, we match stack-trace
//! suffixes or prefixes, whichever yields more parents; the rest is our own reading. A record's
//! parent is a record whose stack trace is a proper suffix of its own (stack traces list the
//! innermost caller first, so a caller's stack is what remains of its callee's once the callee's
//! inner frames are cut off), or, read the other way round, a proper prefix. Both readings are
//! tried and the one that finds more parents wins (a tie keeps the suffix reading, the order the
//! Python client sends). Frames are compared by file, line and function. Among the records
//! whose stack matches, the longest match is the nearest caller (a caller that was not recorded
//! is skipped over); among records with that same stack (a loop calling from one line), the
//! parent is the latest one that started no later than the child and had not completed before
//! the child started (at most `CANDIDATES_TRIED` of them are tried). A record with none is a
//! root. Pure.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::intern::Sym;
use crate::records::{Process, Record};

/// A client event (`/api/call/event`) rather than a call.
pub const EVENT: u8 = 1;
/// The call raised, or the event reports an exception.
pub const RAISED: u8 = 2;
/// One of the client's own events (`Record::is_client_event`).
pub const CLIENT: u8 = 4;

/// Records with the caller's stack tried, newest first, before giving up on a parent.
const CANDIDATES_TRIED: usize = 64;

/// One record of a process.
#[derive(Debug, Clone)]
pub struct Entry {
    /// With a database file, the record's offset in it; without, its sequence number in the
    /// window (`Records::push`). Stable: the pages name records by it.
    pub loc: u64,
    /// When it started (the client's clock).
    pub start: f64,
    pub method: Sym,
    /// How long it ran (0 for an event).
    pub took: f32,
    /// A hash of its call id (`id_hash`), to find a record by call id without reading it.
    pub id: u32,
    /// Its stack in the index's table of stacks.
    pub stack: u32,
    pub flags: u8,
}

impl Entry {
    pub fn end(&self) -> f64 {
        self.start + f64::from(self.took)
    }
    pub fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// 32 bits of a hash of a call id.
pub fn id_hash(call_id: &str) -> u32 {
    crate::records::key_hash(call_id)
}

/// One process and its records, in the order they were noted.
#[derive(Debug, Clone)]
pub struct Proc {
    pub process: Process,
    /// The program: the file name of the outermost frame of its first stack that has one.
    pub script: Option<String>,
    pub page_url: Option<String>,
    pub origin: Option<String>,
    pub first_at: f64,
    pub last_at: f64,
    pub client_events: usize,
    /// Calls (records that are not events), and the calls that raised.
    pub calls: usize,
    pub raised: usize,
    pub entries: Vec<Entry>,
    shape: Option<Arc<Shape>>,
}

/// A summary of a process, without its records.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub key: String,
    pub pid: i64,
    pub start_time: f64,
    pub script: Option<String>,
    pub page_url: Option<String>,
    pub origin: Option<String>,
    pub first_at: f64,
    pub last_at: f64,
    pub records: usize,
    pub client_events: usize,
    pub calls: usize,
    pub raised: usize,
}

impl Proc {
    pub fn summary(&self) -> Summary {
        Summary {
            key: self.process.key(),
            pid: self.process.pid,
            start_time: self.process.start_time,
            script: self.script.clone(),
            page_url: self.page_url.clone(),
            origin: self.origin.clone(),
            first_at: self.first_at,
            last_at: self.last_at,
            records: self.entries.len(),
            client_events: self.client_events,
            calls: self.calls,
            raised: self.raised,
        }
    }
}

/// The tree of a process: parents, the depth-first order (children by start) and time order.
#[derive(Debug, Default)]
pub struct Shape {
    /// Entries it was computed from.
    pub len: usize,
    /// Parent of each entry (`u32::MAX`: a root).
    pub parent: Vec<u32>,
    /// Entries in depth-first order, and each entry's position in it.
    pub order: Vec<u32>,
    pub pos: Vec<u32>,
    /// Depth of each entry, and the end (exclusive) of each position's subtree in `order`.
    pub depth: Vec<u32>,
    pub end: Vec<u32>,
    /// Entries by start (then as noted), and each entry's place in that order.
    pub by_time: Vec<u32>,
    pub time_pos: Vec<u32>,
}

pub const ROOT: u32 = u32::MAX;

impl Shape {
    pub fn parent(&self, e: usize) -> Option<usize> {
        let p = self.parent[e];
        (p != ROOT).then_some(p as usize)
    }
    /// How many entries an entry's subtree holds besides itself.
    pub fn descendants(&self, e: usize) -> usize {
        let p = self.pos[e] as usize;
        self.end[p] as usize - p - 1
    }
}

/// Every process that recorded calls.
#[derive(Debug, Default)]
pub struct ProcessIndex {
    procs: Vec<Proc>,
    by_key: HashMap<String, usize>,
    frames: HashMap<(String, i64, String), u32>,
    stacks: Vec<Box<[u32]>>,
    stack_ids: HashMap<Box<[u32]>, u32>,
    /// Deleted runs: a record of one kept below this place was recorded before its deletion
    /// and is not noted (it reached the index only after the delete, which removed it).
    cuts: HashMap<String, u64>,
}

impl ProcessIndex {
    /// Notes a record kept at `loc`. Records without a process (external MCP calls) are not
    /// part of any call tree. Answers false for a record of a deleted run kept before its
    /// deletion (`remove`), which is not noted.
    pub fn note(&mut self, record: &Record, loc: u64) -> bool {
        let (process, call_id, method, start, end, flags, site, page_url, origin) = match record {
            Record::Call(c) => {
                let start = c.call_site.timestamp().as_f64().unwrap_or(c.seen_at);
                let raised = c.exception.as_ref().is_some_and(|e| !e.is_null());
                (
                    c.process,
                    c.call_id.to_string(),
                    c.method.clone(),
                    start,
                    c.completed_at.max(start),
                    if raised { RAISED } else { 0 },
                    c.call_site.to_value(),
                    c.page_url.as_str().map(str::to_owned),
                    c.origin().map(str::to_owned),
                )
            }
            Record::Event(e) => {
                let mut flags = EVENT;
                if !e.exception.is_null() {
                    flags |= RAISED;
                }
                if crate::records::is_client_event(&e.method) {
                    flags |= CLIENT;
                }
                let id = match e.call_id.to_value() {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (
                    e.process,
                    id,
                    e.method.clone(),
                    e.at,
                    e.at,
                    flags,
                    e.call_site.to_value(),
                    e.page_url.as_str().map(str::to_owned),
                    None,
                )
            }
            Record::Other(_) => return true,
        };
        if !self.cuts.is_empty() && self.cuts.get(&process.key()).is_some_and(|&cut| loc < cut) {
            return false;
        }
        let stack = site.get("stack_trace").unwrap_or(&Value::Null);
        let (stack_id, script) = self.stack_of(stack);
        let key = process.key();
        let at = match self.by_key.get(&key) {
            Some(at) => *at,
            None => {
                self.procs.push(Proc {
                    process,
                    script: None,
                    page_url: None,
                    origin: None,
                    first_at: start,
                    last_at: end,
                    client_events: 0,
                    calls: 0,
                    raised: 0,
                    entries: Vec::new(),
                    shape: None,
                });
                self.by_key.insert(key, self.procs.len() - 1);
                self.procs.len() - 1
            }
        };
        let p = &mut self.procs[at];
        if p.script.is_none() {
            p.script = script;
        }
        if p.page_url.is_none() {
            p.page_url = page_url;
        }
        if p.origin.is_none() {
            p.origin = origin;
        }
        p.first_at = p.first_at.min(start);
        p.last_at = p.last_at.max(end);
        if flags & CLIENT != 0 {
            p.client_events += 1;
        }
        if flags & EVENT == 0 {
            p.calls += 1;
        }
        if flags & (RAISED | EVENT) == RAISED {
            p.raised += 1;
        }
        p.entries.push(Entry {
            loc,
            start,
            method,
            took: (end - start) as f32,
            id: id_hash(&call_id),
            stack: stack_id,
            flags,
        });
        true
    }

    /// Forgets the records kept below `loc` (without a database file: the records that fell
    /// out of the window cannot be read any more). Processes left without records go.
    pub fn forget_below(&mut self, loc: u64) {
        for p in &mut self.procs {
            if p.entries.first().is_some_and(|e| e.loc < loc) {
                p.entries.retain(|e| e.loc >= loc);
                p.client_events = p.entries.iter().filter(|e| e.is(CLIENT)).count();
                p.calls = p.entries.iter().filter(|e| !e.is(EVENT)).count();
                p.raised = p
                    .entries
                    .iter()
                    .filter(|e| e.is(RAISED) && !e.is(EVENT))
                    .count();
                p.shape = None;
            }
        }
        if self.procs.iter().any(|p| p.entries.is_empty()) {
            self.procs.retain(|p| !p.entries.is_empty());
            self.by_key = self
                .procs
                .iter()
                .enumerate()
                .map(|(i, p)| (p.process.key(), i))
                .collect();
        }
    }

    /// Forgets the process `key` and its records (a deleted run) kept below `cut` (the place
    /// of the deletion: its offset in the database file, or the next sequence number of the
    /// window): answers it, with where its records are kept. Records it notes later at `cut` or
    /// above start it afresh; those below are not noted. The table of stacks keeps the stacks
    /// its records had (other processes may share them).
    pub fn remove(&mut self, key: &str, cut: u64) -> Option<Proc> {
        self.cuts.insert(key.to_owned(), cut);
        let at = self.by_key.remove(key)?;
        let gone = self.procs.remove(at);
        for i in self.by_key.values_mut() {
            if *i > at {
                *i -= 1;
            }
        }
        Some(gone)
    }

    /// Records noted in all.
    pub fn len(&self) -> usize {
        self.procs.iter().map(|p| p.entries.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// Every process, most recently active first.
    pub fn summaries(&self) -> Vec<Summary> {
        let mut all: Vec<Summary> = self.procs.iter().map(Proc::summary).collect();
        all.sort_by(|a, b| b.last_at.total_cmp(&a.last_at).then(a.key.cmp(&b.key)));
        all
    }

    pub fn get(&self, key: &str) -> Option<&Proc> {
        self.by_key.get(key).map(|i| &self.procs[*i])
    }

    /// The tree of the process `key`, computed again only when it recorded more since.
    pub fn shape(&mut self, key: &str) -> Option<Arc<Shape>> {
        let at = *self.by_key.get(key)?;
        let stacks = &self.stacks;
        let stack_ids = &self.stack_ids;
        let p = &mut self.procs[at];
        if let Some(s) = &p.shape {
            if s.len == p.entries.len() {
                return Some(Arc::clone(s));
            }
        }
        let shape = Arc::new(shape_of(&p.entries, stacks, stack_ids));
        p.shape = Some(Arc::clone(&shape));
        Some(shape)
    }

    /// Computes the tree of every process now (after a database file was read), so that the
    /// first view of a process does not pay for it: linear in the records, about 0.2 s for a
    /// process of 850,000 records.
    pub fn compute_shapes(&mut self) {
        let keys: Vec<String> = self.procs.iter().map(|p| p.process.key()).collect();
        for key in keys {
            self.shape(&key);
        }
    }

    /// The places (process key, entry) of the records whose call id hashes like `call_id`
    /// (the caller reads them to be sure), newest first.
    pub fn find(&self, call_id: &str) -> Vec<(String, usize)> {
        let h = id_hash(call_id);
        let mut found = Vec::new();
        for p in &self.procs {
            for (i, e) in p.entries.iter().enumerate().rev() {
                if e.id == h {
                    found.push((p.process.key(), i));
                }
            }
        }
        found
    }

    /// The frames of a stack in the table.
    pub fn stack(&self, id: u32) -> &[u32] {
        self.stacks.get(id as usize).map_or(&[], |s| s)
    }

    fn stack_of(&mut self, stack: &Value) -> (u32, Option<String>) {
        let frames: Vec<&Value> = stack
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let script = script_of(&frames);
        let ids: Box<[u32]> = frames
            .iter()
            .map(|f| {
                let text = |k: &str| match f.get(k) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                };
                let line = f.get("lineno").and_then(Value::as_i64).unwrap_or(-1);
                let key = (text("filename"), line, text("function"));
                let n = self.frames.len() as u32;
                *self.frames.entry(key).or_insert(n)
            })
            .collect();
        if let Some(id) = self.stack_ids.get(&ids) {
            return (*id, script);
        }
        let id = self.stacks.len() as u32;
        self.stacks.push(ids.clone());
        self.stack_ids.insert(ids, id);
        (id, script)
    }
}

/// The program's file name: of the outermost frame (the last one in the order the Python client
/// sends, innermost first; the first one when that is the module's own frame).
fn script_of(frames: &[&Value]) -> Option<String> {
    let module = |f: &&Value| f.get("function").and_then(Value::as_str) == Some("<module>");
    let outer = match (frames.first(), frames.last()) {
        (Some(first), Some(last)) if module(first) && !module(last) => first,
        (_, Some(last)) => last,
        _ => return None,
    };
    let file = outer.get("filename").and_then(Value::as_str)?;
    let name = file.rsplit(['/', '\\']).next().unwrap_or(file);
    (!name.is_empty()).then(|| name.to_owned())
}

/// How stack traces are read when looking for a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// A caller's stack is a proper suffix of its callee's (innermost caller first).
    Suffix,
    /// A caller's stack is a proper prefix of its callee's (outermost caller first).
    Prefix,
}

/// The parent of every record, and the reading that found them (see the module
/// documentation). `stacks` is the table of stacks (frames as ids: equal frames, equal ids),
/// `stack[i]` record `i`'s stack in it and `times[i]` its start and completion.
pub fn infer_parents(
    stacks: &[Box<[u32]>],
    stack_ids: &HashMap<Box<[u32]>, u32>,
    stack: &[u32],
    times: &[(f64, f64)],
) -> (Vec<Option<usize>>, Reading) {
    let suffix = parents_by(stacks, stack_ids, stack, times, Reading::Suffix);
    let prefix = parents_by(stacks, stack_ids, stack, times, Reading::Prefix);
    let found = |p: &[Option<usize>]| p.iter().filter(|x| x.is_some()).count();
    if found(&prefix) > found(&suffix) {
        (prefix, Reading::Prefix)
    } else {
        (suffix, Reading::Suffix)
    }
}

fn parents_by(
    stacks: &[Box<[u32]>],
    stack_ids: &HashMap<Box<[u32]>, u32>,
    stack: &[u32],
    times: &[(f64, f64)],
    reading: Reading,
) -> Vec<Option<usize>> {
    // Records by stack, in order of start.
    let mut by_stack: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, s) in stack.iter().enumerate() {
        if stacks.get(*s as usize).is_some_and(|f| !f.is_empty()) {
            by_stack.entry(*s).or_default().push(i);
        }
    }
    for list in by_stack.values_mut() {
        list.sort_by(|a, b| times[*a].0.total_cmp(&times[*b].0).then(a.cmp(b)));
    }
    // For each stack used, the stacks of its possible callers that some record has, longest
    // first.
    let mut callers: HashMap<u32, Vec<u32>> = HashMap::new();
    for s in by_stack.keys() {
        let frames = &stacks[*s as usize];
        let found = (1..frames.len())
            .rev()
            .filter_map(|len| {
                let part = match reading {
                    Reading::Suffix => &frames[frames.len() - len..],
                    Reading::Prefix => &frames[..len],
                };
                stack_ids.get(part).copied()
            })
            .filter(|c| by_stack.contains_key(c))
            .collect();
        callers.insert(*s, found);
    }
    let mut parents = vec![None; stack.len()];
    for (i, s) in stack.iter().enumerate() {
        let Some(candidates) = callers.get(s) else {
            continue;
        };
        let (start, _) = times[i];
        for c in candidates {
            let Some(list) = by_stack.get(c) else {
                continue;
            };
            let started = &list[..list.partition_point(|c| times[*c].0 <= start)];
            if let Some(p) = started
                .iter()
                .rev()
                .take(CANDIDATES_TRIED)
                .find(|c| times[**c].1 >= start)
            {
                parents[i] = Some(*p);
                break;
            }
        }
    }
    parents
}

fn shape_of(
    entries: &[Entry],
    stacks: &[Box<[u32]>],
    stack_ids: &HashMap<Box<[u32]>, u32>,
) -> Shape {
    let n = entries.len();
    let stack: Vec<u32> = entries.iter().map(|e| e.stack).collect();
    let times: Vec<(f64, f64)> = entries.iter().map(|e| (e.start, e.end())).collect();
    let (parents, _) = infer_parents(stacks, stack_ids, &stack, &times);
    let mut by_time: Vec<u32> = (0..n as u32).collect();
    by_time.sort_by(|a, b| times[*a as usize].0.total_cmp(&times[*b as usize].0));
    let mut time_pos = vec![0u32; n];
    for (t, e) in by_time.iter().enumerate() {
        time_pos[*e as usize] = t as u32;
    }
    // Children in time order: walk entries by start and append each to its parent's list.
    let mut kids: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for e in &by_time {
        match parents[*e as usize] {
            Some(p) => kids[p].push(*e),
            None => roots.push(*e),
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut depth = vec![0u32; n];
    let mut end = vec![0u32; n];
    let mut pos = vec![0u32; n];
    // Iterative depth-first walk; a frame is (entry, next child to visit).
    let mut walk: Vec<(u32, usize)> = Vec::new();
    for r in roots {
        pos[r as usize] = order.len() as u32;
        order.push(r);
        walk.push((r, 0));
        while let Some((e, next)) = walk.last_mut() {
            let e = *e as usize;
            if let Some(c) = kids[e].get(*next).copied() {
                *next += 1;
                depth[c as usize] = depth[e] + 1;
                pos[c as usize] = order.len() as u32;
                order.push(c);
                walk.push((c, 0));
            } else {
                end[pos[e] as usize] = order.len() as u32;
                walk.pop();
            }
        }
    }
    Shape {
        len: n,
        parent: parents
            .iter()
            .map(|p| p.map_or(ROOT, |p| p as u32))
            .collect(),
        order,
        pos,
        depth,
        end,
        by_time,
        time_pos,
    }
}

/// What a person asked to see of a tree.
pub struct Ask<'a> {
    /// Leave out the client's own events.
    pub hide_client: bool,
    /// Entries whose children are folded away.
    pub collapsed: &'a HashSet<usize>,
    /// Entries that match a filter (with their callers shown), when filtered.
    pub matches: Option<&'a dyn Fn(&Entry) -> bool>,
}

/// The rows shown, in depth-first order: their positions in `Shape::order`, and which entries
/// match the filter (all when unfiltered).
pub fn visible(entries: &[Entry], shape: &Shape, ask: &Ask) -> (Vec<u32>, Vec<bool>) {
    let n = shape.order.len();
    let mut matched = vec![true; entries.len()];
    let mut shown = vec![true; entries.len()];
    if let Some(m) = ask.matches {
        shown.fill(false);
        for (i, e) in entries.iter().enumerate() {
            matched[i] = m(e) && !(ask.hide_client && e.is(CLIENT));
            if !matched[i] {
                continue;
            }
            let mut at = Some(i);
            while let Some(j) = at {
                if shown[j] {
                    break;
                }
                shown[j] = true;
                at = shape.parent(j);
            }
        }
    }
    let mut rows = Vec::new();
    let mut p = 0;
    while p < n {
        let e = shape.order[p] as usize;
        if !shown[e] || (ask.hide_client && entries[e].is(CLIENT)) {
            p = shape.end[p] as usize;
            continue;
        }
        rows.push(p as u32);
        if ask.collapsed.contains(&e) {
            p = shape.end[p] as usize;
        } else {
            p += 1;
        }
    }
    (rows, matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Table = (Vec<Box<[u32]>>, HashMap<Box<[u32]>, u32>, Vec<u32>);

    /// A table of the given stacks, and each record's id in it.
    fn table(stacks: &[Vec<u32>]) -> Table {
        let mut all: Vec<Box<[u32]>> = Vec::new();
        let mut ids: HashMap<Box<[u32]>, u32> = HashMap::new();
        let mut of = Vec::new();
        for s in stacks {
            let b: Box<[u32]> = s.clone().into_boxed_slice();
            let id = *ids.entry(b.clone()).or_insert_with(|| {
                all.push(b);
                all.len() as u32 - 1
            });
            of.push(id);
        }
        (all, ids, of)
    }

    fn infer(stacks: &[Vec<u32>], times: &[(f64, f64)]) -> (Vec<Option<usize>>, Reading) {
        let (all, ids, of) = table(stacks);
        infer_parents(&all, &ids, &of, times)
    }

    fn times(n: usize) -> Vec<(f64, f64)> {
        // Nested: record i starts at i and ends after every later record.
        (0..n).map(|i| (i as f64, 100.0 - i as f64)).collect()
    }

    #[test]
    fn parents_are_the_longest_proper_suffix_of_the_stack() {
        // Innermost first: main (9) calls a from line 1; a calls b from 2, b calls c from 3;
        // main then calls d from 4; a record with an empty stack is a root.
        let stacks = vec![
            vec![1, 9],
            vec![2, 5, 1, 9],
            vec![3, 2, 5, 1, 9],
            vec![4, 9],
            vec![],
        ];
        let (parents, reading) = infer(&stacks, &times(5));
        assert_eq!(reading, Reading::Suffix);
        assert_eq!(parents, [None, Some(0), Some(1), None, None]);
    }

    #[test]
    fn stacks_sent_outermost_first_are_read_as_prefixes() {
        let stacks = vec![
            vec![9, 1],
            vec![9, 1, 5, 2],
            vec![9, 1, 5, 2, 3],
            vec![9, 4],
        ];
        let (parents, reading) = infer(&stacks, &times(4));
        assert_eq!(reading, Reading::Prefix);
        assert_eq!(parents, [None, Some(0), Some(1), None]);
    }

    #[test]
    fn a_tie_keeps_the_suffix_reading() {
        // [1, 2] is both a prefix of [1, 2, 3] (prefix reading) and, for [0, 1, 2], a suffix.
        let stacks = vec![vec![1, 2], vec![1, 2, 3], vec![0, 1, 2]];
        let (parents, reading) = infer(&stacks, &times(3));
        assert_eq!(reading, Reading::Suffix);
        assert_eq!(parents, [None, None, Some(0)]);
    }

    #[test]
    fn among_calls_from_one_line_the_parent_is_the_one_running() {
        // A loop calls a three times from one line; the second call of a calls b.
        let stacks = vec![vec![1, 9], vec![1, 9], vec![2, 1, 9], vec![1, 9]];
        let times = vec![(0.0, 1.0), (2.0, 5.0), (3.0, 4.0), (6.0, 7.0)];
        let (parents, _) = infer(&stacks, &times);
        assert_eq!(parents, [None, None, Some(1), None]);
        // A candidate that ended before the child started, or started after it, is not a parent.
        let times = vec![(0.0, 1.0), (2.0, 2.5), (3.0, 4.0), (2.9, 7.0)];
        let (parents, _) = infer(&stacks, &times);
        assert_eq!(parents, [None, None, Some(3), None]);
        let times = vec![(0.0, 1.0), (4.0, 5.0), (3.0, 4.0), (6.0, 7.0)];
        assert_eq!(infer(&stacks, &times).0, [None, None, None, None]);
    }

    #[test]
    fn a_missing_level_links_to_the_nearest_recorded_ancestor() {
        // b is called from an unwrapped helper called by a: a's stack is still a suffix.
        let stacks = vec![vec![1, 9], vec![7, 6, 2, 1, 9]];
        assert_eq!(infer(&stacks, &times(2)).0, [None, Some(0)]);
    }

    #[test]
    fn a_removed_process_skips_records_kept_before_its_cut() {
        let rec = |id: &str| Record::Call(Arc::new(crate::records::CallRecord::for_tests("f", id)));
        let key = crate::records::Process {
            pid: 1,
            start_time: 1.0,
        }
        .key();
        let mut index = ProcessIndex::default();
        assert!(index.note(&rec("a"), 10) && index.note(&rec("b"), 20));
        let gone = index.remove(&key, 30).expect("known");
        assert_eq!(
            gone.entries.iter().map(|e| e.loc).collect::<Vec<_>>(),
            [10, 20]
        );
        assert!(index.get(&key).is_none() && index.is_empty());
        // Kept before the delete, noted after it: deleted too.
        assert!(!index.note(&rec("c"), 25));
        assert!(index.get(&key).is_none());
        // Recorded after the delete: the run again.
        assert!(index.note(&rec("d"), 40));
        assert_eq!(index.get(&key).map(|p| p.entries.len()), Some(1));
        assert!(index.remove("9+9", 50).is_none());
    }

    #[test]
    fn the_script_is_the_outermost_frame() {
        let f = |file: &str, func: &str| serde_json::json!({"filename": file, "function": func});
        let (a, b) = (
            f("/srv/app/job.py", "<module>"),
            f("/srv/app/lib.py", "work"),
        );
        assert_eq!(script_of(&[&b, &a]).as_deref(), Some("job.py"));
        assert_eq!(script_of(&[&a, &b]).as_deref(), Some("job.py"));
        assert_eq!(script_of(&[]), None);
    }
}
