//! Call records, execution history and object snapshots, kept compact: typed structs whose
//! strings, CIDs and JSON trees are shared through the `Interner` (a call costs a few hundred
//! bytes, however large its stack trace), and whose rendered ("pretty") values are not stored
//! but computed on demand by a `Render` from the content store. The in-memory window is
//! bounded; what falls out of it is counted. Pure: no I/O, no locks.
//!
//! Long file: one data model. Each record type (call, event, history entry, snapshot) sits
//! beside its disk form (`from_disk`) and its JSON form; they share private helpers
//! (`Process::from_disk`), and the filters (`RecordFilter`) read the index-key tag bits that
//! `Record::index_key` writes (`pid_bits`, `is_client_event_key`). A field added to a record is
//! added here, in one place. Its unit tests are in `records/tests.rs`.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::intern::{Cid, Interner, Sym, Val};
use crate::node::JsonNode;
use crate::resolution::Resolution;
use crate::store::IndexKey;

type Obj = Map<String, Value>;

/// The process a call came from; its key is derived (protocol doc §1: `"%.6f+%d"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Process {
    pub pid: i64,
    pub start_time: f64,
}

impl Process {
    /// Reads `process_pid` and `process_start_time` of a stored record.
    fn from_disk(m: &Obj) -> Process {
        Process {
            pid: m.get("process_pid").and_then(Value::as_i64).unwrap_or(0),
            start_time: m
                .get("process_start_time")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
        }
    }

    pub fn key(&self) -> String {
        format!("{:.6}+{}", self.start_time, self.pid)
    }

    /// Whether `text` names this process: its key, or its pid alone.
    pub fn is(&self, text: &str) -> bool {
        text.parse::<i64>()
            .map_or_else(|_| self.key() == text, |pid| pid == self.pid)
    }
}

/// The pid a process filter names (`"42"`, or a key `"<start>+42"`), if it names one.
fn named_pid(text: &str) -> Option<i64> {
    text.parse()
        .ok()
        .or_else(|| text.rsplit_once('+')?.1.parse().ok())
}

/// The 7-bit hash of a pid the index keeps (bits 1 to 7 of a record's index tag).
fn pid_bits(pid: i64) -> u8 {
    ((pid as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57) as u8
}

/// The index tag's bit for records that do not come from the debugged program.
const TAG_EXTERNAL: u8 = 1;

/// Where a call record comes from: the debugged program (its calls and client events), or
/// the server's own calls to external MCP servers (`"source": "mcp_client"` in the record).
pub const SOURCES: [&str; 2] = ["program", "mcp_client"];

/// The method names of the client's own events: its registration of each `with_debug` target,
/// and the attribute probe its proxies make on every call of a function that has no alias
/// (`getattr(target, "_cideldill_alias_name", None)`), which a proxy reports as a failed
/// attribute lookup. They are what the client sent and are kept, but they are not the
/// program's calls or exceptions: lists hide them unless asked. Exact names, so that the
/// on-disk index (which holds a hash of the method name) decides them without reading records.
pub const CLIENT_EVENT_METHODS: [&str; 2] = [
    "with_debug.register",
    "__getattr__('_cideldill_alias_name')",
];

/// Whether a method name is one of the client's own events ([`CLIENT_EVENT_METHODS`]).
pub fn is_client_event(method: &str) -> bool {
    CLIENT_EVENT_METHODS.contains(&method)
}

/// The index keys (`IndexKey.a`, [`key_hash`] of the method name) of the client's own events.
const CLIENT_EVENT_KEYS: [u32; 2] = [
    key_hash(CLIENT_EVENT_METHODS[0]),
    key_hash(CLIENT_EVENT_METHODS[1]),
];

/// Whether an index key may belong to one of the client's own events (its method name hashes
/// like one of [`CLIENT_EVENT_METHODS`]).
fn is_client_event_key(key: IndexKey) -> bool {
    CLIENT_EVENT_KEYS.contains(&key.a)
}

/// Which records a listing keeps with respect to the client's own events
/// ([`CLIENT_EVENT_METHODS`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum ClientEvents {
    /// Every record (the REST default, as the original server listed them).
    #[default]
    Show,
    /// Every record but the client's own events.
    Hide,
    /// Only the client's own events.
    Only,
}

impl ClientEvents {
    /// The query values, in the order of the enum.
    pub const NAMES: [&'static str; 3] = ["show", "hide", "only"];

    pub fn parse(s: &str) -> Option<ClientEvents> {
        match s {
            "show" => Some(ClientEvents::Show),
            "hide" => Some(ClientEvents::Hide),
            "only" => Some(ClientEvents::Only),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClientEvents::Show => "show",
            ClientEvents::Hide => "hide",
            ClientEvents::Only => "only",
        }
    }

    /// Whether a record that is (or is not) a client event is kept.
    fn keeps(self, client_event: bool) -> bool {
        match self {
            ClientEvents::Show => true,
            ClientEvents::Hide => !client_event,
            ClientEvents::Only => client_event,
        }
    }
}

/// A call id: ours are server time, a counter and 128 random bits
/// (`"%.6f-%03d-<32 hex digits>"`), kept as numbers: the random part makes a call id
/// unguessable, so that only the client the server told it to can complete the call. Ids of
/// records stored before had no random part (`"%.6f-%03d"`, still read back as `Ours`).
#[derive(Clone, Debug, PartialEq)]
pub enum CallId {
    Ours {
        at: f64,
        n: u64,
    },
    /// Boxed: a call record's size is memory per recorded call.
    Keyed(Box<KeyedId>),
    Text(Sym),
}

/// A call id with its random part.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyedId {
    pub at: f64,
    pub n: u64,
    pub key: u128,
}

impl CallId {
    /// Reads a call id back, as numbers when it prints back exactly.
    pub fn parse(text: &str) -> CallId {
        if let Some((rest, key)) = text.rsplit_once('-') {
            if key.len() == 32 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                if let (Ok(key), CallId::Ours { at, n }) =
                    (u128::from_str_radix(key, 16), CallId::parse(rest))
                {
                    let id = CallId::Keyed(Box::new(KeyedId { at, n, key }));
                    if id.to_string() == text {
                        return id;
                    }
                }
            }
        }
        if let Some((at, n)) = text.rsplit_once('-') {
            if let (Ok(at), Ok(n)) = (at.parse::<f64>(), n.parse::<u64>()) {
                let id = CallId::Ours { at, n };
                if id.to_string() == text {
                    return id;
                }
            }
        }
        CallId::Text(Sym::new(text))
    }

    pub fn matches(&self, text: &str) -> bool {
        match self {
            CallId::Text(s) => &**s == text,
            ours => ours.to_string() == text,
        }
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallId::Ours { at, n } => write!(f, "{at:.6}-{n:03}"),
            CallId::Keyed(k) => write!(f, "{:.6}-{:03}-{:032x}", k.at, k.n, k.key),
            CallId::Text(s) => f.write_str(s),
        }
    }
}

/// How a payload's serialization format was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hint {
    Absent,
    Null,
    Dill,
    Json,
}

impl Hint {
    /// `None` for a value that is not a known format.
    pub fn parse(v: Option<&Value>) -> Option<Hint> {
        match v {
            None => Some(Hint::Absent),
            Some(Value::Null) => Some(Hint::Null),
            Some(Value::String(s)) if s == "dill" => Some(Hint::Dill),
            Some(Value::String(s)) if s == "json" => Some(Hint::Json),
            Some(_) => None,
        }
    }

    pub fn to_value(self) -> Option<Value> {
        match self {
            Hint::Absent => None,
            Hint::Null => Some(Value::Null),
            Hint::Dill => Some(json!("dill")),
            Hint::Json => Some(json!("json")),
        }
    }
}

/// An item (protocol doc §3) without its payload: the CID names it in the content store.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// `{cid, client_ref?, serialization_format?}`, the shape every client sends.
    Std {
        cid: Cid,
        client_ref: Val,
        format: Hint,
        had_data: bool,
    },
    /// Anything else, kept as sent (without `data`).
    Other { value: Val, had_data: bool },
}

impl Item {
    /// What the item keeps, itself included (see `Val::weight`).
    pub fn weight(&self) -> usize {
        std::mem::size_of::<Item>()
            + match self {
                Item::Std { client_ref, .. } => client_ref.weight(),
                Item::Other { value, .. } => value.weight(),
            }
    }

    /// Its shared value, if any (see `Val::part`).
    fn val(&self) -> &Val {
        match self {
            Item::Std { client_ref, .. } => client_ref,
            Item::Other { value, .. } => value,
        }
    }

    pub fn parse(interner: &mut Interner, v: &Value) -> Item {
        let had_data = v.get("data").is_some();
        if let Value::Object(m) = v {
            let known = m.keys().all(|k| {
                matches!(
                    k.as_str(),
                    "cid" | "client_ref" | "data" | "serialization_format"
                )
            });
            let cid = m
                .get("cid")
                .and_then(Value::as_str)
                .and_then(|c| interner.cid_text(c));
            let format = Hint::parse(m.get("serialization_format"));
            if let (true, Some(cid), Some(format)) = (known, cid, format) {
                return Item::Std {
                    cid,
                    client_ref: interner.field(m.get("client_ref")),
                    format,
                    had_data,
                };
            }
            let mut without = m.clone();
            // Python's dict.pop: the other keys keep their order.
            without.shift_remove("data");
            return Item::Other {
                value: interner.tree(&Value::Object(without)),
                had_data,
            };
        }
        Item::Other {
            value: interner.val(v),
            had_data,
        }
    }

    /// [`Item::parse`] on an item as parsed from a request body.
    pub fn from_node(interner: &mut Interner, v: &JsonNode<'_>) -> Item {
        let had_data = v.get("data").is_some();
        if let JsonNode::Obj(entries) = v {
            let known = entries.iter().all(|(k, _)| {
                matches!(&**k, "cid" | "client_ref" | "data" | "serialization_format")
            });
            let cid = v
                .get("cid")
                .and_then(JsonNode::as_str)
                .and_then(|c| interner.cid_text(c));
            let format = match v.get("serialization_format") {
                None => Some(Hint::Absent),
                Some(f) => Hint::parse(Some(&f.to_value())),
            };
            if let (true, Some(cid), Some(format)) = (known, cid, format) {
                let client_ref = v.get("client_ref").map(JsonNode::to_value);
                return Item::Std {
                    cid,
                    client_ref: interner.field(client_ref.as_ref()),
                    format,
                    had_data,
                };
            }
            return Item::Other {
                value: interner.node_object_without(entries, "data"),
                had_data,
            };
        }
        Item::Other {
            value: interner.node_val(v),
            had_data,
        }
    }

    /// The item as JSON, without `data`.
    pub fn to_value(&self) -> Value {
        match self {
            Item::Std {
                cid,
                client_ref,
                format,
                ..
            } => {
                let mut m = Obj::new();
                m.insert("cid".into(), Value::String(cid.hex()));
                if !client_ref.is_absent() {
                    m.insert("client_ref".into(), client_ref.to_value());
                }
                if let Some(f) = format.to_value() {
                    m.insert("serialization_format".into(), f);
                }
                Value::Object(m)
            }
            Item::Other { value, .. } => value.to_value(),
        }
    }

    pub fn had_data(&self) -> bool {
        match self {
            Item::Std { had_data, .. } | Item::Other { had_data, .. } => *had_data,
        }
    }

    pub fn cid(&self) -> Option<String> {
        match self {
            Item::Std { cid, .. } => Some(cid.hex()),
            Item::Other { value, .. } => value
                .tree()?
                .get("cid")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    pub fn client_ref(&self) -> Value {
        match self {
            Item::Std { client_ref, .. } => client_ref.to_value(),
            Item::Other { value, .. } => value
                .tree()
                .and_then(|t| t.get("client_ref").cloned())
                .unwrap_or(Value::Null),
        }
    }
}

/// Renders stored payloads for display (the content store and a cache stand behind it).
pub trait Render {
    /// The display value of an item.
    fn item(&self, item: &Item) -> Value;
    /// The display value of a CID field (`<prefix>_cid`) read as `hint`; null without one.
    fn cid(&self, cid: &Val, hint: Hint) -> Value;
    /// The note a person wrote on the record with this call id, if any.
    fn note(&self, _call_id: &str) -> Option<String> {
        None
    }
}

/// Renders nothing (for the stored form, which leaves rendered values out).
pub struct Unrendered;

impl Render for Unrendered {
    fn item(&self, _: &Item) -> Value {
        Value::Null
    }
    fn cid(&self, _: &Val, _: Hint) -> Value {
        Value::Null
    }
}

/// A call's `call_site` split into its timestamp (different in every call) and the rest (the
/// same for every call from one place, so it is shared).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallSite {
    timestamp: Val,
    rest: Val,
}

impl CallSite {
    pub fn parse(interner: &mut Interner, v: Option<&Value>) -> CallSite {
        match v {
            Some(Value::Object(m)) => match m.get("timestamp") {
                Some(ts) => CallSite {
                    timestamp: Val::unshared(ts),
                    rest: interner.object_without(m, "timestamp"),
                },
                None => CallSite {
                    timestamp: Val::Absent,
                    rest: interner.field(v),
                },
            },
            other => CallSite {
                timestamp: Val::Absent,
                rest: interner.field(other),
            },
        }
    }

    /// [`CallSite::parse`] on a call site as parsed from a request body.
    pub fn from_node(interner: &mut Interner, v: Option<&JsonNode<'_>>) -> CallSite {
        match v {
            Some(JsonNode::Obj(entries)) => match v.and_then(|o| o.get("timestamp")) {
                Some(ts) => CallSite {
                    timestamp: Val::unshared(&ts.to_value()),
                    rest: interner.node_object_without(entries, "timestamp"),
                },
                None => CallSite {
                    timestamp: Val::Absent,
                    rest: interner.val(&v.map_or(Value::Null, JsonNode::to_value)),
                },
            },
            other => CallSite {
                timestamp: Val::Absent,
                rest: interner.field(other.map(JsonNode::to_value).as_ref()),
            },
        }
    }

    pub fn to_value(&self) -> Value {
        if self.timestamp.is_absent() {
            return self.rest.to_value();
        }
        let mut m = Obj::new();
        m.insert("timestamp".into(), self.timestamp.to_value());
        if let Some(t) = self.rest.tree() {
            if let Value::Object(rest) = t.into_owned() {
                m.extend(rest);
            }
        }
        Value::Object(m)
    }

    /// `call_site.timestamp`, or null.
    pub fn timestamp(&self) -> Value {
        self.timestamp.to_value()
    }
}

/// What a completion reported about an exception (all null for a success).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExceptionInfo {
    /// The display value decided at completion (decoded payload or text form).
    pub shown: Val,
    pub cid: Val,
    pub client_ref: Val,
    pub exception_type: Val,
    pub message: Val,
    pub traceback: Val,
}

impl ExceptionInfo {
    /// Its fields, each a shared value.
    fn vals(&self) -> [&Val; 6] {
        [
            &self.shown,
            &self.cid,
            &self.client_ref,
            &self.exception_type,
            &self.message,
            &self.traceback,
        ]
    }
}

/// One call through `/api/call/start` and, once completed, `/api/call/complete`.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRecord {
    pub call_id: CallId,
    pub method: Sym,
    pub process: Process,
    /// `None`: the target was null or absent.
    pub target: Option<Item>,
    pub args: Box<[Item]>,
    pub kwargs: Box<[(Sym, Item)]>,
    pub signature: Val,
    pub call_site: CallSite,
    pub page_url: Val,
    pub preferred_json: bool,
    /// Paused before it ran (`pause_reason: "breakpoint"` in its call data).
    pub paused_before: bool,
    /// Server clock at start and completion (the times of its object snapshots).
    pub seen_at: f64,
    pub done_at: f64,
    // Filled in at completion.
    pub status: Val,
    pub completed_at: f64,
    pub result_cid: Val,
    pub result_client_ref: Val,
    pub result_format: Hint,
    pub exception: Option<Box<ExceptionInfo>>,
    pub repl_sessions: Box<[Sym]>,
    /// What only some calls have (a logpoint's line, what the debugger did), behind one thin
    /// pointer: the record's size is memory per recorded call.
    pub notes: Option<Box<Notes>>,
}

/// The rarer parts of a call record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Notes {
    /// The line a logpoint wrote for this call.
    pub log: Option<String>,
    /// What the debugger did to it (resumed with an action, replaced by its breakpoint, let
    /// run by a condition or a logpoint).
    pub resolution: Option<Resolution>,
    /// The browser origin (the `Origin` header) of the page that reported the call; none for
    /// programs (the Python client sends no `Origin`).
    pub origin: Option<Sym>,
    /// A replayed call: the call id of the record it replays.
    pub replay_of: Option<Sym>,
}

impl Notes {
    fn weight(&self) -> usize {
        std::mem::size_of::<Notes>()
            + self.log.as_ref().map_or(0, String::len)
            + self.resolution.as_ref().map_or(0, Resolution::weight)
            + self.origin.as_ref().map_or(0, |o| o.len())
            + self.replay_of.as_ref().map_or(0, |o| o.len())
    }
}

impl CallRecord {
    /// Calls `part` with each shared string or tree this call holds (address and weight, see
    /// `Val::part`); the rest of `weight` is its own.
    pub fn parts(&self, part: &mut dyn FnMut((usize, usize))) {
        part(self.method.part());
        for (k, _) in self.kwargs.iter() {
            part(k.part());
        }
        let items = self
            .target
            .iter()
            .chain(self.args.iter())
            .chain(self.kwargs.iter().map(|(_, v)| v));
        let vals = self.vals();
        for v in items.map(Item::val).chain(vals) {
            if let Some(p) = v.part() {
                part(p);
            }
        }
        if let Some(e) = &self.exception {
            for v in e.vals() {
                if let Some(p) = v.part() {
                    part(p);
                }
            }
        }
    }

    /// The call's JSON fields besides its items, exception and notes.
    fn vals(&self) -> [&Val; 7] {
        [
            &self.signature,
            &self.call_site.timestamp,
            &self.call_site.rest,
            &self.page_url,
            &self.status,
            &self.result_cid,
            &self.result_client_ref,
        ]
    }

    /// About how many bytes this call keeps, every string and tree it shares with others
    /// counted in full (see `Val::weight`; the records window counts those once, `parts`).
    pub fn weight(&self) -> usize {
        let vals = self.vals();
        std::mem::size_of::<CallRecord>()
            + self.method.weight()
            + self.target.as_ref().map_or(0, Item::weight)
            + self.args.iter().map(Item::weight).sum::<usize>()
            + self
                .kwargs
                .iter()
                .map(|(k, v)| k.weight() + v.weight())
                .sum::<usize>()
            + vals.iter().map(|v| v.weight()).sum::<usize>()
            + self.exception.as_ref().map_or(0, |e| {
                std::mem::size_of::<ExceptionInfo>()
                    + e.vals().iter().map(|v| v.weight()).sum::<usize>()
            })
            + self.repl_sessions.len() * std::mem::size_of::<Sym>()
            + self.notes.as_ref().map_or(0, |n| n.weight())
            + match self.call_id {
                CallId::Keyed(_) => std::mem::size_of::<KeyedId>(),
                _ => 0,
            }
    }

    /// The line a logpoint wrote for this call.
    pub fn log(&self) -> Option<&str> {
        self.notes.as_ref()?.log.as_deref()
    }

    /// What the debugger did to this call.
    pub fn resolution(&self) -> Option<&Resolution> {
        self.notes.as_ref()?.resolution.as_ref()
    }

    pub fn set_log(&mut self, line: String) {
        self.notes.get_or_insert_with(Box::default).log = Some(line);
    }

    pub fn set_resolution(&mut self, r: Resolution) {
        self.notes.get_or_insert_with(Box::default).resolution = Some(r);
    }

    /// The browser origin of the page that reported this call (none for programs).
    pub fn origin(&self) -> Option<&str> {
        self.notes.as_ref()?.origin.as_deref()
    }

    pub fn set_origin(&mut self, origin: Option<&str>) {
        if let Some(o) = origin {
            self.notes.get_or_insert_with(Box::default).origin = Some(Sym::new(o));
        }
    }

    /// The call id of the record this call replays (a replayed call only).
    pub fn replay_of(&self) -> Option<&str> {
        self.notes.as_ref()?.replay_of.as_deref()
    }

    pub fn set_replay_of(&mut self, source: &str) {
        self.notes.get_or_insert_with(Box::default).replay_of = Some(Sym::new(source));
    }

    /// The call data (protocol doc §2.5 step 7) without item payloads.
    pub fn call_data(&self, render: &dyn Render) -> Obj {
        let mut m = Obj::new();
        m.insert("method_name".into(), json!(&*self.method));
        match &self.target {
            Some(t) => {
                m.insert("target".into(), t.to_value());
                m.insert("pretty_target".into(), render.item(t));
            }
            None => {
                m.insert("target".into(), Value::Null);
                m.insert("pretty_target".into(), Value::Null);
            }
        }
        m.insert(
            "args".into(),
            Value::Array(self.args.iter().map(Item::to_value).collect()),
        );
        m.insert(
            "kwargs".into(),
            Value::Object(
                self.kwargs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        );
        m.insert(
            "pretty_args".into(),
            Value::Array(self.args.iter().map(|a| render.item(a)).collect()),
        );
        m.insert(
            "pretty_kwargs".into(),
            Value::Object(
                self.kwargs
                    .iter()
                    .map(|(k, v)| (k.to_string(), render.item(v)))
                    .collect(),
            ),
        );
        m.insert("signature".into(), self.signature.to_value());
        m.insert("call_site".into(), self.call_site.to_value());
        m.insert("page_url".into(), self.page_url.to_value());
        if let Some(origin) = self.origin() {
            // Only a web page's calls have one (the original's call data had no such field).
            m.insert("origin".into(), json!(origin));
        }
        m.insert(
            "preferred_format".into(),
            json!(if self.preferred_json { "json" } else { "dill" }),
        );
        m.insert("process_pid".into(), json!(self.process.pid));
        m.insert("process_start_time".into(), json!(self.process.start_time));
        m.insert("process_key".into(), json!(self.process.key()));
        m.insert("call_id".into(), json!(self.call_id.to_string()));
        if self.paused_before {
            m.insert("pause_reason".into(), json!("breakpoint"));
        }
        if let Some(r) = self.resolution() {
            m.insert("resolution".into(), r.to_json(Some(render)));
        }
        if let Some(source) = self.replay_of() {
            m.insert("replay_of".into(), json!(source));
        }
        m
    }

    pub fn pretty_result(&self, render: &dyn Render) -> Value {
        render.cid(&self.result_cid, self.result_format)
    }

    fn exception_shown(&self) -> Value {
        self.exception
            .as_ref()
            .map_or(Value::Null, |e| e.shown.to_value())
    }

    /// The call record (`/api/call-records`): the call data and its completion.
    pub fn to_json(&self, render: &dyn Render) -> Obj {
        let mut m = self.call_data(render);
        m.insert("status".into(), self.status.to_value());
        m.insert("completed_at".into(), json!(self.completed_at));
        m.insert("pretty_result".into(), self.pretty_result(render));
        m.insert("result_cid".into(), self.result_cid.to_value());
        m.insert(
            "result_client_ref".into(),
            self.result_client_ref.to_value(),
        );
        let e = self.exception.as_deref().cloned().unwrap_or_default();
        m.insert("exception".into(), e.shown.to_value());
        m.insert("exception_cid".into(), e.cid.to_value());
        m.insert("exception_client_ref".into(), e.client_ref.to_value());
        m.insert("exception_type".into(), e.exception_type.to_value());
        m.insert("exception_message".into(), e.message.to_value());
        m.insert("exception_traceback".into(), e.traceback.to_value());
        m.insert("started_at".into(), self.call_site.timestamp());
        m.insert(
            "repl_sessions".into(),
            Value::Array(self.repl_sessions.iter().map(|s| json!(&**s)).collect()),
        );
        if let Some(line) = self.log() {
            m.insert("log".into(), json!(line));
        }
        m
    }

    /// The call data of a history entry: the call data with its outcome.
    pub fn history_data(&self, render: &dyn Render) -> Obj {
        let mut m = self.call_data(render);
        m.insert("status".into(), self.status.to_value());
        m.insert("pretty_result".into(), self.pretty_result(render));
        m.insert("exception".into(), self.exception_shown());
        m
    }

    /// The stored form: the record without the values rendered from the content store.
    pub fn to_disk(&self) -> Value {
        let mut m = self.to_json(&Unrendered);
        for key in [
            "pretty_target",
            "pretty_args",
            "pretty_kwargs",
            "pretty_result",
        ] {
            m.shift_remove(key);
        }
        if let Some(r) = self.resolution() {
            m.insert("resolution".into(), r.to_json(None));
        }
        m.insert("seen_at".into(), json!(self.seen_at));
        m.insert("done_at".into(), json!(self.done_at));
        if self.result_format != Hint::Absent {
            m.insert(
                "result_serialization_format".into(),
                self.result_format.to_value().unwrap_or(Value::Null),
            );
        }
        Value::Object(m)
    }

    /// Reads a stored record (this format or the previous one, which also held rendered
    /// values: they are recomputed instead). `None` if it is not a call record.
    pub fn from_disk(interner: &mut Interner, v: &Value) -> Option<CallRecord> {
        let m = v.as_object()?;
        let call_id = CallId::parse(m.get("call_id")?.as_str()?);
        let method = interner.sym(m.get("method_name")?.as_str()?);
        let process = Process::from_disk(m);
        let target = match m.get("target") {
            None | Some(Value::Null) => None,
            Some(t) => Some(Item::parse(interner, t)),
        };
        let args = match m.get("args") {
            Some(Value::Array(a)) => a.iter().map(|x| Item::parse(interner, x)).collect(),
            _ => Box::default(),
        };
        let kwargs = match m.get("kwargs") {
            Some(Value::Object(k)) => k
                .iter()
                .map(|(name, x)| (interner.sym(name), Item::parse(interner, x)))
                .collect(),
            _ => Box::default(),
        };
        let completed_at = m.get("completed_at").and_then(Value::as_f64).unwrap_or(0.0);
        let mut field = |k: &str| interner.field(m.get(k)).or_null();
        let exception = ExceptionInfo {
            shown: field("exception"),
            cid: field("exception_cid"),
            client_ref: field("exception_client_ref"),
            exception_type: field("exception_type"),
            message: field("exception_message"),
            traceback: field("exception_traceback"),
        };
        let record = CallRecord {
            call_id,
            method,
            process,
            target,
            args,
            kwargs,
            signature: field("signature"),
            call_site: CallSite::default(),
            page_url: field("page_url"),
            preferred_json: m.get("preferred_format").and_then(Value::as_str) == Some("json"),
            paused_before: m.get("pause_reason").is_some_and(|r| !r.is_null()),
            seen_at: m
                .get("seen_at")
                .and_then(Value::as_f64)
                .unwrap_or(completed_at),
            done_at: m
                .get("done_at")
                .and_then(Value::as_f64)
                .unwrap_or(completed_at),
            status: field("status"),
            completed_at,
            result_cid: field("result_cid"),
            result_client_ref: field("result_client_ref"),
            result_format: Hint::parse(m.get("result_serialization_format"))
                .unwrap_or(Hint::Absent),
            exception: (exception != ExceptionInfo::null()).then(|| Box::new(exception)),
            repl_sessions: m
                .get("repl_sessions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(Sym::new).collect())
                .unwrap_or_default(),
            notes: None,
        };
        let notes = Notes {
            log: m.get("log").and_then(Value::as_str).map(str::to_owned),
            resolution: m
                .get("resolution")
                .and_then(|r| Resolution::from_json(interner, r)),
            origin: m.get("origin").and_then(Value::as_str).map(Sym::new),
            replay_of: m.get("replay_of").and_then(Value::as_str).map(Sym::new),
        };
        let notes = (notes != Notes::default()).then(|| Box::new(notes));
        Some(CallRecord {
            call_site: CallSite::parse(interner, m.get("call_site")),
            notes,
            ..record
        })
    }
}

impl CallRecord {
    /// A call of `method` by `process` started at `at`, with no items and nothing else known
    /// yet (a call start fills in what its request says).
    pub fn started(call_id: CallId, method: Sym, process: Process, at: f64) -> CallRecord {
        CallRecord {
            call_id,
            method,
            process,
            target: None,
            args: Box::default(),
            kwargs: Box::default(),
            signature: Val::Null,
            call_site: CallSite::default(),
            page_url: Val::Null,
            preferred_json: false,
            paused_before: false,
            seen_at: at,
            done_at: at,
            status: Val::Null,
            completed_at: at,
            result_cid: Val::Null,
            result_client_ref: Val::Null,
            result_format: Hint::Absent,
            exception: None,
            repl_sessions: Box::default(),
            notes: None,
        }
    }

    /// A call of `method` with no items, as tests of other modules need one.
    #[cfg(test)]
    pub fn for_tests(method: &str, call_id: &str) -> CallRecord {
        let process = Process {
            pid: 1,
            start_time: 1.0,
        };
        CallRecord::started(CallId::parse(call_id), Sym::new(method), process, 0.0)
    }
}

impl ExceptionInfo {
    /// Whether every field is null (a success).
    pub fn is_null(&self) -> bool {
        self.vals().iter().all(|v| v.is_null())
    }

    fn null() -> ExceptionInfo {
        ExceptionInfo {
            shown: Val::Null,
            cid: Val::Null,
            client_ref: Val::Null,
            exception_type: Val::Null,
            message: Val::Null,
            traceback: Val::Null,
        }
    }
}

/// A diagnostic event (`/api/call/event`, protocol doc §2.4) as a call record. Its rendered
/// values come from the client, so they are kept (shared: the same event repeats).
#[derive(Clone, Debug, PartialEq)]
pub struct EventRecord {
    pub call_id: Val,
    pub method: Sym,
    pub status: Sym,
    pub pretty_args: Val,
    pub pretty_kwargs: Val,
    pub signature: Val,
    pub call_site: CallSite,
    pub page_url: Val,
    pub event_type: Val,
    pub process: Process,
    pub at: f64,
    pub result_cid: Val,
    pub exception_cid: Val,
    pub pretty_result: Val,
    pub exception: Val,
}

impl EventRecord {
    /// The event's JSON fields (the parts a weight counts beside its two names).
    fn vals(&self) -> [&Val; 12] {
        [
            &self.call_id,
            &self.pretty_args,
            &self.pretty_kwargs,
            &self.signature,
            &self.call_site.timestamp,
            &self.call_site.rest,
            &self.page_url,
            &self.event_type,
            &self.result_cid,
            &self.exception_cid,
            &self.pretty_result,
            &self.exception,
        ]
    }

    /// Calls `part` with each shared string or tree this event holds (see `CallRecord::parts`).
    pub fn parts(&self, part: &mut dyn FnMut((usize, usize))) {
        part(self.method.part());
        part(self.status.part());
        let vals = self.vals();
        for v in vals {
            if let Some(p) = v.part() {
                part(p);
            }
        }
    }

    /// About how many bytes this event keeps, shared parts counted in full (see
    /// `CallRecord::weight`).
    pub fn weight(&self) -> usize {
        let vals = self.vals();
        std::mem::size_of::<EventRecord>()
            + self.method.weight()
            + self.status.weight()
            + vals.iter().map(|v| v.weight()).sum::<usize>()
    }

    pub fn to_json(&self) -> Obj {
        let mut m = Obj::new();
        m.insert("call_id".into(), self.call_id.to_value());
        m.insert("method_name".into(), json!(&*self.method));
        m.insert("status".into(), json!(&*self.status));
        m.insert("pretty_args".into(), self.pretty_args.to_value());
        m.insert("pretty_kwargs".into(), self.pretty_kwargs.to_value());
        m.insert("signature".into(), self.signature.to_value());
        m.insert("call_site".into(), self.call_site.to_value());
        m.insert("page_url".into(), self.page_url.to_value());
        m.insert("event_type".into(), self.event_type.to_value());
        m.insert("process_pid".into(), json!(self.process.pid));
        m.insert("process_start_time".into(), json!(self.process.start_time));
        m.insert("process_key".into(), json!(self.process.key()));
        m.insert("started_at".into(), json!(self.at));
        m.insert("completed_at".into(), json!(self.at));
        m.insert("result_cid".into(), self.result_cid.to_value());
        m.insert("exception_cid".into(), self.exception_cid.to_value());
        m.insert("pretty_result".into(), self.pretty_result.to_value());
        m.insert("exception".into(), self.exception.to_value());
        m
    }

    /// Reads the stored form (the same as the wire form). `None` unless it is an event.
    pub fn from_disk(interner: &mut Interner, v: &Value) -> Option<EventRecord> {
        let m = v.as_object()?;
        if !m.contains_key("event_type") {
            return None;
        }
        Some(EventRecord {
            call_id: interner.field(m.get("call_id")).or_null(),
            method: interner.sym(m.get("method_name")?.as_str()?),
            status: interner.sym(m.get("status").and_then(Value::as_str).unwrap_or("")),
            pretty_args: interner.field(m.get("pretty_args")).or_null(),
            pretty_kwargs: interner.field(m.get("pretty_kwargs")).or_null(),
            signature: interner.field(m.get("signature")).or_null(),
            call_site: CallSite::parse(interner, m.get("call_site")),
            page_url: interner.field(m.get("page_url")).or_null(),
            event_type: interner.field(m.get("event_type")).or_null(),
            process: Process::from_disk(m),
            at: m.get("completed_at").and_then(Value::as_f64).unwrap_or(0.0),
            result_cid: interner.field(m.get("result_cid")).or_null(),
            exception_cid: interner.field(m.get("exception_cid")).or_null(),
            pretty_result: interner.field(m.get("pretty_result")).or_null(),
            exception: interner.field(m.get("exception")).or_null(),
        })
    }
}

/// One entry of the call-record list.
#[derive(Clone, Debug)]
pub enum Record {
    Call(Arc<CallRecord>),
    Event(Arc<EventRecord>),
    /// Records of other sources (calls to external MCP servers), kept as they are.
    Other(Arc<Value>),
}

impl Record {
    /// Calls `part` with each shared string or tree this record holds (see `CallRecord::parts`).
    pub fn parts(&self, part: &mut dyn FnMut((usize, usize))) {
        match self {
            Record::Call(c) => c.parts(part),
            Record::Event(e) => e.parts(part),
            Record::Other(_) => {}
        }
    }

    /// What this record keeps besides its shared parts (`parts`), for the byte bound of the
    /// window, which counts each shared part once however many records hold it.
    pub fn own_weight(&self) -> u32 {
        let mut shared = 0usize;
        self.parts(&mut |(_, w)| shared += w);
        let all = match self {
            Record::Call(c) => c.weight(),
            Record::Event(e) => e.weight(),
            Record::Other(v) => std::mem::size_of::<Value>() + crate::intern::value_weight(v),
        };
        u32::try_from(all.saturating_sub(shared)).unwrap_or(u32::MAX)
    }

    /// About how many bytes this record keeps, shared parts counted in full (at most
    /// `u32::MAX`).
    pub fn weight(&self) -> u32 {
        let w = match self {
            Record::Call(c) => c.weight(),
            Record::Event(e) => e.weight(),
            Record::Other(v) => std::mem::size_of::<Value>() + crate::intern::value_weight(v),
        };
        u32::try_from(w).unwrap_or(u32::MAX)
    }

    pub fn method_name(&self) -> &str {
        match self {
            Record::Call(c) => &c.method,
            Record::Event(e) => &e.method,
            Record::Other(v) => v.get("method_name").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// Whether this is one of the client's own events (see [`CLIENT_EVENT_METHODS`]).
    pub fn is_client_event(&self) -> bool {
        is_client_event(self.method_name())
    }

    pub fn status(&self) -> Option<&str> {
        match self {
            Record::Call(c) => c.status.as_str(),
            Record::Event(e) => Some(&e.status),
            Record::Other(v) => v.get("status").and_then(Value::as_str),
        }
    }

    /// Where it comes from (one of [`SOURCES`], or whatever `source` an external record says).
    pub fn source(&self) -> &str {
        match self {
            Record::Call(_) | Record::Event(_) => "program",
            Record::Other(v) => v.get("source").and_then(Value::as_str).unwrap_or("program"),
        }
    }

    /// The process it came from (records of external MCP calls have none).
    pub fn process(&self) -> Option<Process> {
        match self {
            Record::Call(c) => Some(c.process),
            Record::Event(e) => Some(e.process),
            Record::Other(v) => v
                .as_object()
                .filter(|m| m.contains_key("process_pid"))
                .map(Process::from_disk),
        }
    }

    pub fn call_id_is(&self, id: &str) -> bool {
        match self {
            Record::Call(c) => c.call_id.matches(id),
            Record::Event(e) => e.call_id.to_value().as_str() == Some(id),
            Record::Other(v) => v.get("call_id").and_then(Value::as_str) == Some(id),
        }
    }

    pub fn to_json(&self, render: &dyn Render) -> Value {
        let mut out = match self {
            Record::Call(c) => Value::Object(c.to_json(render)),
            Record::Event(e) => Value::Object(e.to_json()),
            Record::Other(v) => (**v).clone(),
        };
        if let Some(note) = self.note(render) {
            if let Some(m) = out.as_object_mut() {
                m.insert("note".into(), Value::String(note));
            }
        }
        out
    }

    /// The note a person wrote on it (external calls have none).
    pub fn note(&self, render: &dyn Render) -> Option<String> {
        match self {
            Record::Call(c) => render.note(&c.call_id.to_string()),
            Record::Event(e) => match e.call_id.to_value() {
                Value::String(id) => render.note(&id),
                _ => None,
            },
            Record::Other(_) => None,
        }
    }

    /// The key the on-disk index keeps for it: its function and its status, a tag of its
    /// source (bit 0: not the program's) and a 7-bit hash of its process id (0 without one),
    /// and its sequence number in the window (`Records::push`).
    pub fn index_key(&self, seq: u64) -> IndexKey {
        let external = if self.source() == "program" {
            0
        } else {
            TAG_EXTERNAL
        };
        let pid = self.process().map_or(0, |p| pid_bits(p.pid) << 1);
        IndexKey {
            a: key_hash(self.method_name()),
            b: key_hash(self.status().unwrap_or("")),
            tag: external | pid,
            seq,
        }
    }

    pub fn to_disk(&self) -> Value {
        match self {
            Record::Call(c) => c.to_disk(),
            Record::Event(e) => Value::Object(e.to_json()),
            Record::Other(v) => (**v).clone(),
        }
    }

    /// Reads a stored record of any kind, in this format or the previous one.
    pub fn from_disk(interner: &mut Interner, v: Value) -> Record {
        if v.get("source").is_some() {
            return Record::Other(Arc::new(v));
        }
        if let Some(e) = EventRecord::from_disk(interner, &v) {
            return Record::Event(Arc::new(e));
        }
        match CallRecord::from_disk(interner, &v) {
            Some(c) => Record::Call(Arc::new(c)),
            None => Record::Other(Arc::new(v)),
        }
    }
}

/// An execution-history entry: a completed call of a function with a breakpoint.
#[derive(Clone, Debug)]
pub struct HistoryEntry {
    pub id: Sym,
    pub call: Arc<CallRecord>,
    /// The call data as a format 1 file stored it (with its rendered values), shown as is.
    pub stored: Option<Val>,
}

impl HistoryEntry {
    /// What the entry keeps, its call counted whole (see `Records::push_history`).
    pub fn weight(&self) -> u32 {
        let w = self.id.len() + self.call.weight() + self.stored.as_ref().map_or(0, Val::weight);
        u32::try_from(w).unwrap_or(u32::MAX)
    }

    pub fn new(id: Sym, call: Arc<CallRecord>) -> HistoryEntry {
        HistoryEntry {
            id,
            call,
            stored: None,
        }
    }

    pub fn to_json(&self, render: &dyn Render) -> Value {
        let call_data = match &self.stored {
            Some(stored) => stored.to_value(),
            None => Value::Object(self.call.history_data(render)),
        };
        json!({
            "id": &*self.id,
            "function_name": &*self.call.method,
            "call_data": call_data,
            "completed_at": self.call.completed_at,
        })
    }

    /// The stored form: the id and the call record (in its stored form).
    pub fn to_disk(&self) -> Value {
        json!({"id": &*self.id, "call": self.call.to_disk()})
    }

    /// The key the on-disk index keeps for it.
    pub fn index_key(&self) -> IndexKey {
        IndexKey {
            a: key_hash(&self.call.method),
            b: 0,
            ..IndexKey::default()
        }
    }

    /// Reads a stored entry: this format (`{id, call}`) or the previous one (`{id,
    /// function_name, call_data, completed_at}`). The call is shared with `known` (the record
    /// stored just before it) when it is the same call.
    pub fn from_disk(
        interner: &mut Interner,
        v: &Value,
        known: Option<Arc<CallRecord>>,
    ) -> Option<HistoryEntry> {
        let id = Sym::new(v.get("id")?.as_str()?);
        let (parsed, stored) = match v.get("call") {
            Some(call) => (CallRecord::from_disk(interner, call)?, None),
            None => {
                // Format 1: a copy of the call data, which lacks the result's CID; keep it.
                let stored = v.get("call_data")?;
                let mut data = stored.clone();
                if let (Some(m), Some(at)) = (data.as_object_mut(), v.get("completed_at")) {
                    m.insert("completed_at".into(), at.clone());
                }
                let call = CallRecord::from_disk(interner, &data)?;
                (call, Some(interner.tree(stored)))
            }
        };
        let call = match known {
            Some(k) if k.call_id == parsed.call_id => k,
            _ => Arc::new(parsed),
        };
        Some(HistoryEntry { id, call, stored })
    }
}

/// A 32-bit FNV-1a hash of a name, for the on-disk index (a listing checks the record too).
pub const fn key_hash(s: &str) -> u32 {
    let bytes = s.as_bytes();
    let mut h: u32 = 0x811c_9dc5;
    let mut i = 0;
    while i < bytes.len() {
        h = (h ^ bytes[i] as u32).wrapping_mul(0x0100_0193);
        i += 1;
    }
    h
}

/// Filters for listing call records. The function, status, source and the client's own events
/// are decided by the on-disk index (up to hash collisions, which `matches` settles, but for
/// hidden client events: a program function whose name hashes like a client event's is hidden
/// with them, a chance of about one in two billion per function name); the process by the
/// index only in part (7 bits of the pid), and the text search not at all: those two need each
/// record read ([`RecordFilter::needs_scan`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct RecordFilter<'a> {
    pub function: Option<&'a str>,
    pub status: Option<&'a str>,
    /// A process key (`"<start time>+<pid>"`) or a pid.
    pub process: Option<&'a str>,
    /// One of [`SOURCES`].
    pub source: Option<&'a str>,
    /// Text searched in the rendered values (see `search::TextSearch`).
    pub search: Option<&'a str>,
    /// Whether the client's own events are kept, left out, or the only ones kept.
    pub client_events: ClientEvents,
}

impl RecordFilter<'_> {
    /// Whether an index key may belong to a matching record (hashes can collide: check
    /// the record with `matches` too).
    pub fn may_match(&self, key: IndexKey) -> bool {
        self.function.is_none_or(|f| key_hash(f) == key.a)
            && self.status.is_none_or(|s| key_hash(s) == key.b)
            && self
                .source
                .is_none_or(|s| (key.tag & TAG_EXTERNAL == 0) == (s == "program"))
            && self
                .process
                .is_none_or(|p| named_pid(p).is_none_or(|pid| key.tag >> 1 == pid_bits(pid)))
            && match self.client_events {
                ClientEvents::Show => true,
                ClientEvents::Hide => !is_client_event_key(key),
                // A program function whose name collides is read, and `matches` drops it.
                ClientEvents::Only => is_client_event_key(key),
            }
    }

    /// Whether a record passes every filter but the text search.
    pub fn matches(&self, r: &Record) -> bool {
        self.client_events.keeps(r.is_client_event())
            && self.function.is_none_or(|f| r.method_name() == f)
            && self.status.is_none_or(|s| r.status() == Some(s))
            && self.source.is_none_or(|s| r.source() == s)
            && self
                .process
                .is_none_or(|p| r.process().is_some_and(|proc| proc.is(p)))
    }

    /// Whether deciding this filter reads records one by one (a process or a text search):
    /// such listings scan, with a time budget.
    pub fn needs_scan(&self) -> bool {
        self.process.is_some() || self.search.is_some()
    }

    /// This filter keeping the client's own events as `client_events` says.
    pub fn with_client_events(self, client_events: ClientEvents) -> Self {
        RecordFilter {
            client_events,
            ..self
        }
    }
}

/// The in-memory window of call records and history entries.
#[derive(Debug)]
pub struct Records {
    /// `None`: a record forgotten (`forget_process`); its slot keeps the numbering.
    records: VecDeque<Option<Record>>,
    /// Slots of `records` that are `None`.
    forgotten: usize,
    /// What each record keeps besides its shared parts (`Record::own_weight`), in the order
    /// of `records`.
    weights: VecDeque<u32>,
    /// The shared parts the records hold (`Record::parts`): by address, how many records hold
    /// it and its weight, counted in `bytes` once while any record holds it. Exact, however
    /// records share values: counting only values a record held alone let a value outlive the
    /// record that counted it.
    parts: std::collections::HashMap<usize, (u32, usize)>,
    history: VecDeque<HistoryEntry>,
    history_weights: VecDeque<u32>,
    max: usize,
    max_bytes: usize,
    bytes: usize,
    history_bytes: usize,
    dropped_records: u64,
    dropped_history: u64,
    /// Records pushed but not yet shown ([`Records::push_hidden`]): written to the database
    /// after they took their place, shown by [`Records::show`] once written. Readers skip them.
    hidden: std::collections::HashSet<u64>,
}

impl Default for Records {
    fn default() -> Self {
        Records::new(
            crate::limits::DEFAULT_MAX_RECORDS,
            crate::limits::DEFAULT_MAX_RECORDS_BYTES,
        )
    }
}

impl Records {
    /// A window of at most `max` records (and, separately, `max` history entries) keeping at
    /// most about `max_bytes` (records and history each; the newest one is always kept).
    pub fn new(max: usize, max_bytes: usize) -> Records {
        Records {
            records: VecDeque::new(),
            forgotten: 0,
            weights: VecDeque::new(),
            parts: std::collections::HashMap::new(),
            history: VecDeque::new(),
            history_weights: VecDeque::new(),
            max: max.max(1),
            max_bytes,
            bytes: 0,
            history_bytes: 0,
            dropped_records: 0,
            dropped_history: 0,
            hidden: std::collections::HashSet::new(),
        }
    }

    /// Adds a record that readers do not see until [`Records::show`]: it takes its place (and
    /// its sequence number) now, so it can be written to the database outside the lock and
    /// shown only once written. One never shown (its write failed) stays hidden until it falls
    /// out of the window.
    pub fn push_hidden(&mut self, record: Record) -> u64 {
        let seq = self.push(record);
        if seq >= self.dropped_records {
            self.hidden.insert(seq);
        }
        seq
    }

    /// Shows a record pushed with [`Records::push_hidden`].
    pub fn show(&mut self, seq: u64) {
        self.hidden.remove(&seq);
    }

    /// The records readers see, oldest first, with their sequence numbers.
    fn visible(&self) -> impl DoubleEndedIterator<Item = (u64, &Record)> {
        let (dropped, hidden) = (self.dropped_records, &self.hidden);
        self.records
            .iter()
            .enumerate()
            .filter_map(move |(i, r)| r.as_ref().map(|r| (dropped + i as u64, r)))
            .filter(move |(seq, _)| hidden.is_empty() || !hidden.contains(seq))
    }

    /// Adds a record, the oldest falling out when the window is full (by count or by bytes);
    /// returns the record's sequence number (see `next_seq`).
    pub fn push(&mut self, record: Record) -> u64 {
        let seq = self.next_seq();
        let weight = record.own_weight();
        let (parts, bytes) = (&mut self.parts, &mut self.bytes);
        record.parts(&mut |(at, w)| {
            let e = parts.entry(at).or_insert((0, w));
            if e.0 == 0 {
                *bytes += w;
            }
            e.0 += 1;
        });
        self.records.push_back(Some(record));
        self.weights.push_back(weight);
        self.bytes += weight as usize;
        while self.records.len() > self.max
            || (self.bytes > self.max_bytes && self.records.len() > 1)
        {
            match self.records.pop_front() {
                Some(Some(old)) => self.release(&old),
                Some(None) => self.forgotten -= 1,
                None => {}
            }
            self.bytes -= self.weights.pop_front().unwrap_or(0) as usize;
            self.hidden.remove(&self.dropped_records);
            self.dropped_records += 1;
        }
        seq
    }

    /// Releases the shared parts a record leaving the window held.
    fn release(&mut self, old: &Record) {
        let (parts, bytes) = (&mut self.parts, &mut self.bytes);
        old.parts(&mut |(at, _)| {
            if let Some(e) = parts.get_mut(&at) {
                e.0 -= 1;
                if e.0 == 0 {
                    *bytes -= e.1;
                    parts.remove(&at);
                }
            }
        });
    }

    /// Forgets every record and history entry of the process `key` in the window (their
    /// memory is freed; the records' numbers stay with their empty slots, which leave the
    /// window in turn): answers how many records and history entries were forgotten.
    pub fn forget_process(&mut self, key: &str) -> (usize, usize) {
        let mut n = 0;
        for i in 0..self.records.len() {
            let of_it =
                matches!(&self.records[i], Some(r) if r.process().is_some_and(|p| p.key() == key));
            if !of_it {
                continue;
            }
            if let Some(old) = self.records[i].take() {
                self.release(&old);
            }
            if let Some(w) = self.weights.get_mut(i) {
                self.bytes -= *w as usize;
                *w = 0;
            }
            self.forgotten += 1;
            n += 1;
        }
        let (mut i, mut h) = (0, 0);
        while i < self.history.len() {
            if self.history[i].call.process.key() == key {
                h += 1;
                self.history.remove(i);
                if let Some(w) = self.history_weights.remove(i) {
                    self.history_bytes -= w as usize;
                }
            } else {
                i += 1;
            }
        }
        (n, h)
    }

    /// The records in memory, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Record> {
        self.records.iter().flatten()
    }

    /// Bytes the records in the window keep (as `Record::weight` estimates them).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn push_history(&mut self, entry: HistoryEntry) {
        // The call is usually shared with a record, but may outlive it here: count it again.
        let weight = entry.weight();
        self.history.push_back(entry);
        self.history_weights.push_back(weight);
        self.history_bytes += weight as usize;
        while self.history.len() > self.max
            || (self.history_bytes > self.max_bytes && self.history.len() > 1)
        {
            self.history.pop_front();
            self.history_bytes -= self.history_weights.pop_front().unwrap_or(0) as usize;
            self.dropped_history += 1;
        }
    }

    /// Records in memory.
    pub fn len(&self) -> usize {
        self.records.len() - self.forgotten
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records that fell out of the window since start.
    pub fn dropped(&self) -> u64 {
        self.dropped_records
    }

    pub fn dropped_history(&self) -> u64 {
        self.dropped_history
    }

    /// The sequence number the next record pushed gets (records are numbered from 0 in the
    /// order they were pushed; those below `dropped()` fell out of the window).
    pub fn next_seq(&self) -> u64 {
        self.dropped_records + self.records.len() as u64
    }

    /// A step of a cursor over the window, newest first: of the records numbered below
    /// `before`, the newest `examine` still in the window, those that `keep`. Also the lowest
    /// sequence number the step reached (every record from it up to `before` that is still in
    /// the window was examined; records below `before` that fell out meanwhile were not), and
    /// whether older records are left in the window.
    pub fn before(
        &self,
        before: u64,
        examine: usize,
        keep: impl Fn(&Record) -> bool,
    ) -> WindowStep {
        let end = before.min(self.next_seq());
        let start = end.saturating_sub(examine as u64).max(self.dropped_records);
        if start >= end {
            return WindowStep {
                found: Vec::new(),
                reached: end,
                more: false,
            };
        }
        let (first, last) = (
            (start - self.dropped_records) as usize,
            (end - self.dropped_records) as usize,
        );
        WindowStep {
            found: self
                .records
                .range(first..last)
                .enumerate()
                .rev()
                .filter_map(|(i, r)| r.as_ref().map(|r| (i, r)))
                .filter(|(i, r)| {
                    (self.hidden.is_empty() || !self.hidden.contains(&(start + *i as u64)))
                        && keep(r)
                })
                .map(|(_, r)| r.clone())
                .collect(),
            reached: start,
            more: start > self.dropped_records,
        }
    }

    /// Records in memory, newest first, filtered: the page and the number that matched.
    pub fn page(&self, filter: &RecordFilter, offset: usize, limit: usize) -> (Vec<Record>, usize) {
        let (page, total, _) = self.page_and_left_out(filter, offset, limit);
        (page, total)
    }

    /// [`Records::page`], and how many records passed every filter but its choice of client
    /// events (`RecordFilter::client_events`), which left them out: in one pass.
    pub fn page_and_left_out(
        &self,
        filter: &RecordFilter,
        offset: usize,
        limit: usize,
    ) -> (Vec<Record>, usize, usize) {
        let every = filter.with_client_events(ClientEvents::Show);
        let (mut total, mut left_out) = (0, 0);
        let mut page = Vec::new();
        for (_, r) in self.visible().rev().filter(|(_, r)| every.matches(r)) {
            if !filter.matches(r) {
                left_out += 1;
                continue;
            }
            if total >= offset && page.len() < limit {
                page.push(r.clone());
            }
            total += 1;
        }
        (page, total, left_out)
    }

    /// The newest record with this call id.
    pub fn by_call_id(&self, call_id: &str) -> Option<Record> {
        self.visible()
            .rev()
            .find(|(_, r)| r.call_id_is(call_id))
            .map(|(_, r)| r.clone())
    }

    /// The newest call record with this call id (to link a stored history entry).
    pub fn call_by_id(&self, call_id: &str) -> Option<Arc<CallRecord>> {
        self.visible().rev().find_map(|(_, r)| match r {
            Record::Call(c) if c.call_id.matches(call_id) => Some(c.clone()),
            _ => None,
        })
    }

    /// History of one function, most recent first.
    pub fn history(&self, function: &str, offset: usize, limit: usize) -> Vec<HistoryEntry> {
        self.history
            .iter()
            .rev()
            .filter(|h| &*h.call.method == function)
            .skip(offset)
            .take(limit)
            .cloned()
            .collect()
    }

    /// The newest record, if it is a call record.
    pub fn newest_call(&self) -> Option<Arc<CallRecord>> {
        match self.visible().next_back() {
            Some((_, Record::Call(c))) => Some(c.clone()),
            _ => None,
        }
    }

    /// The call records in memory, oldest first (object snapshots are derived from them).
    pub fn calls(&self) -> impl DoubleEndedIterator<Item = &Arc<CallRecord>> {
        self.visible().filter_map(|(_, r)| match r {
            Record::Call(c) => Some(c),
            _ => None,
        })
    }
}

/// The roles in which a call names the object `cid` (`target`, `arg:0`, `kwarg:x`, `result`,
/// `exception`): where an object was seen.
pub fn roles_of(call: &CallRecord, cid: &Cid) -> Vec<String> {
    let names = |it: &Item| match it {
        Item::Std { cid: c, .. } => c == cid,
        Item::Other { value, .. } => value
            .tree()
            .is_some_and(|t| t.get("cid").and_then(Value::as_str) == Some(&cid.hex())),
    };
    let val_names = |v: &Val| match v {
        Val::Cid(c) => c == cid,
        Val::Str(s) => **s == *cid.hex(),
        _ => false,
    };
    let mut roles = Vec::new();
    if call.target.as_ref().is_some_and(names) {
        roles.push("target".to_owned());
    }
    for (i, a) in call.args.iter().enumerate() {
        if names(a) {
            roles.push(format!("arg:{i}"));
        }
    }
    for (k, v) in call.kwargs.iter() {
        if names(v) {
            roles.push(format!("kwarg:{k}"));
        }
    }
    if val_names(&call.result_cid) {
        roles.push("result".to_owned());
    }
    if call.exception.as_deref().is_some_and(|e| val_names(&e.cid)) {
        roles.push("exception".to_owned());
    }
    roles
}

/// A step of a cursor over the window ([`Records::before`]).
pub struct WindowStep {
    /// The records kept, newest first.
    pub found: Vec<Record>,
    /// The lowest sequence number reached.
    pub reached: u64,
    /// Whether older records are left in the window.
    pub more: bool,
}

/// One object snapshot: an item with a `client_ref` seen in a call (`/api/snapshots`).
pub struct Snapshot<'a> {
    pub call: &'a CallRecord,
    pub role: String,
    pub client_ref: Value,
    pub cid: Option<String>,
    /// What to render: an item, or a completion CID field.
    pub what: SnapshotOf<'a>,
    pub at: f64,
}

pub enum SnapshotOf<'a> {
    Item(&'a Item),
    Result,
    Exception,
}

impl Snapshot<'_> {
    pub fn to_json(&self, render: &dyn Render) -> Value {
        let pretty = match self.what {
            SnapshotOf::Item(i) => render.item(i),
            SnapshotOf::Result => self.call.pretty_result(render),
            SnapshotOf::Exception => self.call.exception_shown(),
        };
        json!({
            "process_key": self.call.process.key(), "client_ref": self.client_ref, "cid": self.cid,
            "role": self.role, "method_name": &*self.call.method, "call_id": self.call.call_id.to_string(),
            "pretty": pretty, "at": self.at,
        })
    }
}

/// The snapshots of a call's items (at start) and, when `completed`, of its result or exception.
pub fn snapshots_of(call: &CallRecord, completed: bool) -> Vec<Snapshot<'_>> {
    let mut out = Vec::new();
    let mut items: Vec<(String, &Item)> = Vec::new();
    if let Some(t) = &call.target {
        items.push(("target".into(), t));
    }
    for (i, a) in call.args.iter().enumerate() {
        items.push((format!("arg:{i}"), a));
    }
    for (k, v) in call.kwargs.iter() {
        items.push((format!("kwarg:{k}"), v));
    }
    for (role, it) in items {
        let client_ref = it.client_ref();
        if !client_ref.is_null() {
            out.push(Snapshot {
                call,
                role,
                client_ref,
                cid: it.cid(),
                what: SnapshotOf::Item(it),
                at: call.seen_at,
            });
        }
    }
    if completed {
        let e = call.exception.as_deref();
        for (role, client_ref, cid, what) in [
            (
                "result",
                &call.result_client_ref,
                &call.result_cid,
                SnapshotOf::Result,
            ),
            (
                "exception",
                e.map_or(&Val::Null, |e| &e.client_ref),
                e.map_or(&Val::Null, |e| &e.cid),
                SnapshotOf::Exception,
            ),
        ] {
            let cid = cid.to_value();
            if !client_ref.is_null() && cid.is_string() {
                out.push(Snapshot {
                    call,
                    role: role.into(),
                    client_ref: client_ref.to_value(),
                    cid: cid.as_str().map(str::to_owned),
                    what,
                    at: call.done_at,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
