//! Breakpoints, their before/after behaviours and replacements, the global default behaviour,
//! the function registry, and the pause decisions of protocol doc §5.1 and §5.3; the options of
//! conditional breakpoints (condition, hit condition, log message, one-shot), their hit counts,
//! and the log lines logpoints write. Pure: no I/O, no locks; `State` owns one `Breakpoints`,
//! one `Functions` and one `Logbook`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use crate::condition::{self, Expr, ParseError, Template};

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// The behaviours serialize as their wire names (`stop`, `go`, ...).
macro_rules! serialize_as_str {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    )*};
}
serialize_as_str!(Global, Before, After);

/// The global default behaviour (`/api/behavior`). `yield` is not one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Global {
    Stop,
    Go,
    Exception,
    StopException,
}

impl Global {
    pub const NAMES: [&'static str; 4] = ["stop", "go", "exception", "stop_exception"];

    /// Parses a value with the manager's aliases, plus `continue` for `go` as the REST route has.
    pub fn parse(s: &str) -> Option<Global> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "stop" | "breakpoints" | "stop_at_breakpoints" => Global::Stop,
            "go" | "continue" => Global::Go,
            "exception" | "exceptions" | "stop_at_exceptions" => Global::Exception,
            "stop_exception"
            | "breakpoints_and_exceptions"
            | "stop_at_breakpoints_and_exceptions"
            | "both" => Global::StopException,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Global::Stop => "stop",
            Global::Go => "go",
            Global::Exception => "exception",
            Global::StopException => "stop_exception",
        }
    }

    fn stops_before(self) -> bool {
        matches!(self, Global::Stop | Global::StopException)
    }

    fn stops_after(self, is_exception: bool) -> bool {
        match self {
            Global::StopException => true,
            Global::Stop => !is_exception,
            Global::Exception => is_exception,
            Global::Go => false,
        }
    }
}

/// A per-breakpoint before-behaviour. `Yield` defers to the global default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Before {
    Stop,
    Go,
    Yield,
}

impl Before {
    pub const NAMES: [&'static str; 3] = ["stop", "go", "yield"];

    /// The REST route's strict parser: `stop`, `go`, `yield`, and `continue` for `go`.
    pub fn parse_strict(s: &str) -> Option<Before> {
        match s {
            "stop" => Some(Before::Stop),
            "go" | "continue" => Some(Before::Go),
            "yield" => Some(Before::Yield),
            _ => None,
        }
    }

    /// The manager's parser with every alias (`breakpoints`, `defer`, `default`).
    pub fn parse(s: &str) -> Option<Before> {
        match s.trim().to_ascii_lowercase().as_str() {
            "breakpoints" | "stop_at_breakpoints" => Some(Before::Stop),
            "defer" | "default" => Some(Before::Yield),
            other => Before::parse_strict(other),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Before::Stop => "stop",
            Before::Go => "go",
            Before::Yield => "yield",
        }
    }
}

/// A per-breakpoint after-behaviour. `Yield` defers to the global default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    Global(Global),
    Yield,
}

impl After {
    pub const NAMES: [&'static str; 5] = ["stop", "go", "exception", "stop_exception", "yield"];

    /// Accepts the five values, every global alias, `continue`, `defer` and `default`.
    pub fn parse(s: &str) -> Option<After> {
        match s.trim().to_ascii_lowercase().as_str() {
            "yield" | "defer" | "default" => Some(After::Yield),
            other => Global::parse(other).map(After::Global),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            After::Global(g) => g.as_str(),
            After::Yield => "yield",
        }
    }
}

/// Breakpoints by function name, with behaviours and replacements.
#[derive(Debug)]
pub struct Breakpoints {
    names: BTreeSet<String>,
    before: BTreeMap<String, Before>,
    after: BTreeMap<String, After>,
    replacements: BTreeMap<String, String>,
    /// Breakpoints with a condition, hit condition, log message or one-shot flag.
    options: BTreeMap<String, Arc<Options>>,
    /// Calls counted by the hit condition (those whose condition held), per breakpoint.
    hits: BTreeMap<String, u64>,
    /// Breakpoints switched off: they keep every setting and their hit count, but calls of
    /// their function run as if they had no breakpoint (no pause, no log line, no replacement,
    /// no count).
    disabled: BTreeSet<String>,
    global: Global,
    /// The master switch: while false, no call pauses, whatever the breakpoints and the global
    /// default say; logpoints still log and replacements still apply (they never pause).
    pausing: bool,
}

impl Default for Breakpoints {
    fn default() -> Breakpoints {
        Breakpoints {
            names: BTreeSet::new(),
            before: BTreeMap::new(),
            after: BTreeMap::new(),
            replacements: BTreeMap::new(),
            options: BTreeMap::new(),
            hits: BTreeMap::new(),
            disabled: BTreeSet::new(),
            global: Global::Stop,
            pausing: true,
        }
    }
}

/// Why a replacement was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplacementError {
    SignatureMismatch,
    BreakpointNotFound,
}

impl Breakpoints {
    /// Adds a breakpoint; idempotent. Returns whether it is new.
    pub fn add(&mut self, name: &str) -> bool {
        self.names.insert(name.to_owned())
    }

    /// Removes a breakpoint with its behaviours and replacement. Returns whether it existed.
    pub fn remove(&mut self, name: &str) -> bool {
        self.before.remove(name);
        self.after.remove(name);
        self.replacements.remove(name);
        self.options.remove(name);
        self.hits.remove(name);
        self.disabled.remove(name);
        self.names.remove(name)
    }

    /// Whether the breakpoint is switched on (an unknown name is not). A call of a function
    /// whose breakpoint is off runs as with no breakpoint.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.contains(name) && !self.disabled.contains(name)
    }

    /// Switches a breakpoint on or off, keeping its settings. The breakpoint must exist.
    pub fn set_enabled(&mut self, name: &str, enabled: bool) -> bool {
        if !self.contains(name) {
            return false;
        }
        if enabled {
            self.disabled.remove(name);
        } else {
            self.disabled.insert(name.to_owned());
        }
        true
    }

    /// The master switch: whether any call may pause.
    pub fn pausing(&self) -> bool {
        self.pausing
    }

    pub fn set_pausing(&mut self, on: bool) {
        self.pausing = on;
    }

    /// Whether some call of `name` may pause now: the breakpoint acts, pausing is on, it is
    /// not a logpoint, and its effective behaviors stop before or after the call (before any
    /// condition or hit condition is considered).
    pub fn may_pause(&self, name: &str) -> bool {
        self.is_enabled(name)
            && self.pausing
            && self.options(name).log_message.is_none()
            && may_pause(self.global, self.before(name), self.after(name))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.names.iter()
    }

    pub fn global(&self) -> Global {
        self.global
    }

    pub fn set_global(&mut self, g: Global) {
        self.global = g;
    }

    /// Sets the before-behaviour; `Yield` removes the override. The breakpoint must exist.
    pub fn set_before(&mut self, name: &str, b: Before) -> bool {
        if !self.contains(name) {
            return false;
        }
        match b {
            Before::Yield => self.before.remove(name),
            other => self.before.insert(name.to_owned(), other),
        };
        true
    }

    /// Sets the after-behaviour; `Yield` removes the override. The breakpoint must exist.
    pub fn set_after(&mut self, name: &str, a: After) -> bool {
        if !self.contains(name) {
            return false;
        }
        match a {
            After::Yield => self.after.remove(name),
            other => self.after.insert(name.to_owned(), other),
        };
        true
    }

    pub fn before(&self, name: &str) -> Before {
        self.before.get(name).copied().unwrap_or(Before::Yield)
    }

    pub fn after(&self, name: &str) -> After {
        self.after.get(name).copied().unwrap_or(After::Yield)
    }

    pub fn replacement(&self, name: &str) -> Option<&str> {
        self.replacements.get(name).map(String::as_str)
    }

    /// Sets or clears (empty, or equal to the name) a replacement.
    ///
    /// The signature check comes first, as in the original: a non-empty replacement other
    /// than the function itself needs both signatures registered and equal.
    pub fn set_replacement(
        &mut self,
        name: &str,
        replacement: &str,
        functions: &Functions,
    ) -> Result<(), ReplacementError> {
        let clears = replacement.is_empty() || replacement == name;
        if !clears {
            let ours = functions.signature(name);
            if ours.is_none() || ours != functions.signature(replacement) {
                return Err(ReplacementError::SignatureMismatch);
            }
        }
        if !self.contains(name) {
            return Err(ReplacementError::BreakpointNotFound);
        }
        if clears {
            self.replacements.remove(name);
        } else {
            self.replacements
                .insert(name.to_owned(), replacement.to_owned());
        }
        Ok(())
    }

    /// Before a call runs: pause if the function has a breakpoint that acts and whose effective
    /// before-behaviour stops (protocol doc §5.3), while pausing is on.
    pub fn should_pause_before(&self, name: &str) -> bool {
        self.pausing
            && self.is_enabled(name)
            && match self.before(name) {
                Before::Stop => true,
                Before::Go => false,
                Before::Yield => self.global.stops_before(),
            }
    }

    /// After a call completed: pause if the breakpoint acts and its effective after-behaviour
    /// stops for this outcome, while pausing is on.
    pub fn should_pause_after(&self, name: &str, is_exception: bool) -> bool {
        self.pausing
            && self.is_enabled(name)
            && match self.after(name) {
                After::Global(g) => g.stops_after(is_exception),
                After::Yield => self.global.stops_after(is_exception),
            }
    }

    /// Replacement function names by breakpoint, sorted.
    pub fn replacements(&self) -> &BTreeMap<String, String> {
        &self.replacements
    }

    /// The options of a breakpoint (all unset when it has none, or does not exist).
    pub fn options(&self, name: &str) -> Arc<Options> {
        self.options.get(name).cloned().unwrap_or_default()
    }

    /// Replaces the options of an existing breakpoint. The hit count restarts when the
    /// condition or the hit condition changes (it counts the calls whose condition holds).
    pub fn set_options(&mut self, name: &str, options: Options) -> bool {
        if !self.contains(name) {
            return false;
        }
        let old = self.options(name);
        if old.condition != options.condition || old.hit_condition != options.hit_condition {
            self.hits.remove(name);
        }
        if options.is_empty() {
            self.options.remove(name);
        } else {
            self.options.insert(name.to_owned(), Arc::new(options));
        }
        true
    }

    /// The calls counted so far by the breakpoint's hit condition.
    pub fn hits(&self, name: &str) -> u64 {
        self.hits.get(name).copied().unwrap_or(0)
    }

    /// Restarts the hit count. The breakpoint must exist.
    pub fn reset_hits(&mut self, name: &str) -> bool {
        self.hits.remove(name);
        self.contains(name)
    }

    /// How a call of `name` is decided when it starts. A breakpoint switched off is as none.
    /// While pausing is off only a logpoint is judged (it logs and counts); any other breakpoint
    /// is plain (nothing is counted, and its behaviours pause nothing).
    pub fn plan(&self, name: &str) -> Plan {
        if !self.is_enabled(name) {
            return Plan::NoBreakpoint;
        }
        match self.options.get(name) {
            Some(o) if o.is_gated() && (self.pausing || o.log_message.is_some()) => {
                Plan::Gated(Arc::clone(o))
            }
            _ => Plan::Plain,
        }
    }

    /// Counts a call whose condition held (or that has no condition), and says whether it is a
    /// hit: whether its hit condition, if any, accepts the new count.
    pub fn count(&mut self, name: &str, options: &Options) -> Counted {
        if !self.contains(name) {
            return Counted {
                hit: false,
                count: 0,
            };
        }
        let n = self.hits.entry(name.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        let count = *n;
        let hit = options.hit_condition.is_none_or(|h| h.accepts(count));
        Counted { hit, count }
    }

    /// After the first pause of a one-shot breakpoint: `go` before and after, from now on.
    /// Returns whether it disarmed the breakpoint (the caller tells the subscribers).
    pub fn disarm_if_one_shot(&mut self, name: &str) -> bool {
        if !self.options.get(name).is_some_and(|o| o.one_shot) {
            return false;
        }
        let changed =
            self.before(name) != Before::Go || self.after(name) != After::Global(Global::Go);
        self.set_before(name, Before::Go);
        self.set_after(name, After::Global(Global::Go));
        changed
    }
}

/// What a database keeps of the breakpoints (`Breakpoints::settings`): every setting, not the
/// hit counts. Breakpoints sorted by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub global: Global,
    /// The master switch (`Breakpoints::pausing`).
    pub pausing: bool,
    pub breakpoints: Vec<BreakpointSettings>,
}

/// The settings of one breakpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakpointSettings {
    pub name: String,
    pub before: Before,
    pub after: After,
    pub replacement: Option<String>,
    pub options: Arc<Options>,
    pub enabled: bool,
}

impl Breakpoints {
    /// A snapshot of every setting (not the hit counts).
    pub fn settings(&self) -> Settings {
        Settings {
            global: self.global,
            pausing: self.pausing,
            breakpoints: self
                .names
                .iter()
                .map(|n| BreakpointSettings {
                    name: n.clone(),
                    before: self.before(n),
                    after: self.after(n),
                    replacement: self.replacements.get(n).cloned(),
                    options: self.options(n),
                    enabled: !self.disabled.contains(n),
                })
                .collect(),
        }
    }

    /// Replaces every setting with `settings`. The hit count of a breakpoint that stays, with
    /// the same condition and hit condition, is kept; the others start again from 0.
    pub fn restore(&mut self, settings: &Settings) {
        let old_hits = std::mem::take(&mut self.hits);
        let old_options = std::mem::take(&mut self.options);
        self.names.clear();
        self.before.clear();
        self.after.clear();
        self.replacements.clear();
        self.disabled.clear();
        self.global = settings.global;
        self.pausing = settings.pausing;
        for b in &settings.breakpoints {
            self.names.insert(b.name.clone());
            if !b.enabled {
                self.disabled.insert(b.name.clone());
            }
            self.set_before(&b.name, b.before);
            self.set_after(&b.name, b.after);
            if let Some(r) = b
                .replacement
                .as_ref()
                .filter(|r| **r != b.name && !r.is_empty())
            {
                self.replacements.insert(b.name.clone(), r.clone());
            }
            if !b.options.is_empty() {
                self.options.insert(b.name.clone(), Arc::clone(&b.options));
            }
            let old = old_options.get(&b.name).cloned().unwrap_or_default();
            let same_count = old.condition == b.options.condition
                && old.hit_condition == b.options.hit_condition;
            if let Some(&n) = old_hits.get(&b.name).filter(|_| same_count) {
                self.hits.insert(b.name.clone(), n);
            }
        }
    }
}

/// Whether behaviours `before` and `after` under the global default `global` pause some call:
/// before it, or after it returns or raises.
pub fn may_pause(global: Global, before: Before, after: After) -> bool {
    let before = match before {
        Before::Stop => true,
        Before::Go => false,
        Before::Yield => global.stops_before(),
    };
    let after = match after {
        After::Global(g) => g,
        After::Yield => global,
    };
    before || after.stops_after(false) || after.stops_after(true)
}

/// How a call is decided when it starts.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Its function has no breakpoint.
    NoBreakpoint,
    /// A breakpoint whose behaviours alone decide (one-shot at most).
    Plain,
    /// A breakpoint with a condition, a hit condition or a log message.
    Gated(Arc<Options>),
}

/// A counted call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The hit condition accepts it (always, without one).
    pub hit: bool,
    /// The count, this call included.
    pub count: u64,
}

/// What an open call's start decided for its completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gate {
    /// The behaviours alone decide the after-pause (no options, or a call of a function
    /// without a breakpoint).
    #[default]
    Plain,
    /// A hit: the after-behaviour decides.
    Hit,
    /// Not a hit, or a logpoint that logged: no after-pause.
    Missed,
    /// The condition or log message reads `result` or `exception`: decided at completion.
    Deferred,
}

/// A breakpoint's options, named as the Debug Adapter Protocol's `SourceBreakpoint` fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    /// Pause (or log) only for calls for which this holds.
    pub condition: Option<Condition>,
    /// Pause (or log) only for the counted calls this accepts.
    pub hit_condition: Option<HitCondition>,
    /// Log this instead of pausing.
    pub log_message: Option<LogMessage>,
    /// After the first pause, switch to `go` before and after.
    pub one_shot: bool,
}

impl Options {
    pub fn is_empty(&self) -> bool {
        !self.is_gated() && !self.one_shot
    }

    /// Whether calls must be counted or evaluated (not only the behaviours).
    pub fn is_gated(&self) -> bool {
        self.condition.is_some() || self.hit_condition.is_some() || self.log_message.is_some()
    }

    /// Whether deciding a call needs its outcome (the condition or message reads `result` or
    /// `exception`).
    pub fn reads_outcome(&self) -> bool {
        self.condition
            .as_ref()
            .is_some_and(|c| c.expr.reads_outcome())
            || self
                .log_message
                .as_ref()
                .is_some_and(|m| m.template.reads_outcome())
    }

    /// Checks that the options make sense together.
    pub fn check(&self) -> Result<(), String> {
        if self.one_shot && self.log_message.is_some() {
            return Err("one_shot applies to pauses and a logpoint never pauses; \
                        to log only once, use hit_condition \"1\""
                .to_owned());
        }
        Ok(())
    }
}

/// A parsed condition with its text as given.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub text: String,
    pub expr: Expr,
}

impl Condition {
    pub fn parse(text: &str) -> Result<Condition, ParseError> {
        Ok(Condition {
            expr: condition::parse(text)?,
            text: text.to_owned(),
        })
    }
}

/// A parsed log message (text with `{expression}` parts) with its text as given.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMessage {
    pub text: String,
    pub template: Template,
}

impl LogMessage {
    pub fn parse(text: &str) -> Result<LogMessage, ParseError> {
        Ok(LogMessage {
            template: condition::parse_template(text)?,
            text: text.to_owned(),
        })
    }
}

/// A hit condition: which of the counted calls are hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitCondition {
    /// `"5"` or `"==5"`: the 5th only.
    Equal(u64),
    /// `">5"`: every call after the 5th.
    Greater(u64),
    /// `">=5"`: the 5th and every call after it.
    AtLeast(u64),
    /// `"%5"`: every 5th (the 5th, 10th, ...).
    Every(u64),
}

impl HitCondition {
    /// Parses `N`, `==N`, `>N`, `>=N` or `%N` (spaces allowed around the parts).
    pub fn parse(text: &str) -> Result<HitCondition, String> {
        let t = text.trim();
        let (make, rest): (fn(u64) -> HitCondition, &str) = if let Some(r) = t.strip_prefix(">=") {
            (HitCondition::AtLeast, r)
        } else if let Some(r) = t.strip_prefix("==") {
            (HitCondition::Equal, r)
        } else if let Some(r) = t.strip_prefix('>') {
            (HitCondition::Greater, r)
        } else if let Some(r) = t.strip_prefix('%') {
            (HitCondition::Every, r)
        } else {
            (HitCondition::Equal, t)
        };
        let digits = rest.trim();
        let bad = || {
            format!(
                "hit_condition must be N, ==N, >N, >=N or %N with N a whole number, got {text:?}"
            )
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let h = make(n);
        match h {
            HitCondition::Every(0) => Err(
                "hit_condition %0: every 0th call means nothing; use %1 for every call".to_owned(),
            ),
            HitCondition::Equal(0) | HitCondition::AtLeast(0) => {
                Err(format!("hit_condition {text:?}: calls are counted from 1"))
            }
            h => Ok(h),
        }
    }

    /// Whether the call counted `count` (from 1) is a hit.
    pub fn accepts(self, count: u64) -> bool {
        match self {
            HitCondition::Equal(n) => count == n,
            HitCondition::Greater(n) => count > n,
            HitCondition::AtLeast(n) => count >= n,
            HitCondition::Every(n) => n != 0 && count % n == 0,
        }
    }
}

impl fmt::Display for HitCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HitCondition::Equal(n) => write!(f, "{n}"),
            HitCondition::Greater(n) => write!(f, ">{n}"),
            HitCondition::AtLeast(n) => write!(f, ">={n}"),
            HitCondition::Every(n) => write!(f, "%{n}"),
        }
    }
}

/// A line a logpoint wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogLine {
    /// Numbers every line of this server, from 1.
    pub seq: u64,
    /// Server clock (seconds since the epoch).
    pub logged_at: f64,
    pub function_name: String,
    pub call_id: String,
    pub message: String,
}

/// The newest lines logpoints wrote (at most `limits::MAX_LOG_LINES`).
#[derive(Debug, Default)]
pub struct Logbook {
    lines: VecDeque<LogLine>,
    next_seq: u64,
}

impl Logbook {
    /// Appends a line, dropping the oldest beyond `max`; returns it.
    pub fn push(
        &mut self,
        max: usize,
        logged_at: f64,
        function_name: &str,
        call_id: &str,
        message: &str,
    ) -> &LogLine {
        self.next_seq += 1;
        while self.lines.len() >= max.max(1) {
            self.lines.pop_front();
        }
        self.lines.push_back(LogLine {
            seq: self.next_seq,
            logged_at,
            function_name: function_name.to_owned(),
            call_id: call_id.to_owned(),
            message: message.to_owned(),
        });
        self.lines.back().expect("just pushed")
    }

    /// Lines after `seq`, oldest first, at most `limit` of the newest.
    pub fn after(&self, seq: u64, limit: usize) -> Vec<LogLine> {
        let newer: Vec<&LogLine> = self.lines.iter().filter(|l| l.seq > seq).collect();
        let skip = newer.len().saturating_sub(limit);
        newer.into_iter().skip(skip).cloned().collect()
    }

    /// The sequence number of the newest line (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.next_seq
    }
}

/// Registered functions: names, signatures and metadata (protocol doc §2.3), and the bytes they
/// keep (`Functions::bytes`, bounded by `limits::MAX_FUNCTIONS_BYTES` at the browser-client
/// endpoint).
#[derive(Debug, Default)]
pub struct Functions {
    names: BTreeSet<String>,
    signatures: BTreeMap<String, String>,
    metadata: BTreeMap<String, Map<String, Value>>,
    bytes: usize,
}

/// What one entry of a map costs beyond its texts (tree node, allocations).
const ENTRY_OVERHEAD: usize = 64;

impl Functions {
    /// About the bytes the entries of `name` keep: its name once per map that holds it, its
    /// signature, and its metadata as JSON text.
    pub fn entry_bytes(&self, name: &str) -> usize {
        let each = name.len() + ENTRY_OVERHEAD;
        let mut total = 0;
        if self.names.contains(name) {
            total += each;
        }
        if let Some(sig) = self.signatures.get(name) {
            total += each + sig.len();
        }
        if let Some(m) = self.metadata.get(name) {
            total += each + serde_json::to_vec(m).map_or(0, |t| t.len());
        }
        total
    }

    /// The bytes all entries keep (see [`Functions::entry_bytes`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Runs `change` on the entries of `name`, keeping `bytes` up to date.
    fn changing(&mut self, name: &str, change: impl FnOnce(&mut Self)) {
        let before = self.entry_bytes(name);
        change(self);
        let after = self.entry_bytes(name);
        self.bytes = (self.bytes + after).saturating_sub(before);
    }

    /// Registers a name; an empty or missing signature deletes the stored one (the original's rule).
    pub fn register(&mut self, name: &str, signature: Option<&str>) {
        self.changing(name, |f| f.register_unweighed(name, signature));
    }

    fn register_unweighed(&mut self, name: &str, signature: Option<&str>) {
        self.names.insert(name.to_owned());
        match signature {
            Some(sig) if !sig.is_empty() => {
                self.signatures.insert(name.to_owned(), sig.to_owned());
            }
            _ => {
                self.signatures.remove(name);
            }
        }
    }

    pub fn signature(&self, name: &str) -> Option<&str> {
        self.signatures.get(name).map(String::as_str)
    }

    pub fn metadata(&self, name: &str) -> Option<&Map<String, Value>> {
        self.metadata.get(name)
    }

    /// Replaces the metadata of `name`.
    pub fn set_metadata(&mut self, name: &str, metadata: Map<String, Value>) {
        self.changing(name, |f| {
            f.metadata.insert(name.to_owned(), metadata);
        });
    }

    /// Sets one metadata key, creating the metadata if needed.
    pub fn set_metadata_key(&mut self, name: &str, key: &str, value: Value) {
        self.changing(name, |f| {
            f.metadata
                .entry(name.to_owned())
                .or_default()
                .insert(key.to_owned(), value);
        });
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.names.iter()
    }

    /// Registered signatures by name, sorted.
    pub fn signatures(&self) -> &BTreeMap<String, String> {
        &self.signatures
    }

    /// Metadata by name, sorted.
    pub fn all_metadata(&self) -> &BTreeMap<String, Map<String, Value>> {
        &self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_global_stop_with_yielding_breakpoints() {
        let mut bp = Breakpoints::default();
        assert!(!bp.should_pause_before("add"), "no breakpoint, no pause");
        bp.add("add");
        assert!(bp.should_pause_before("add"));
        assert!(bp.should_pause_after("add", false));
        assert!(
            !bp.should_pause_after("add", true),
            "global stop does not pause after exceptions"
        );
    }

    #[test]
    fn before_go_still_pauses_after_under_global_stop() {
        let mut bp = Breakpoints::default();
        bp.add("f");
        assert!(bp.set_before("f", Before::Go));
        assert!(!bp.should_pause_before("f"));
        assert!(
            bp.should_pause_after("f", false),
            "protocol doc §5.3 surprise"
        );
    }

    #[test]
    fn global_exception_pauses_only_after_exceptions() {
        let mut bp = Breakpoints::default();
        bp.add("f");
        bp.set_global(Global::Exception);
        assert!(!bp.should_pause_before("f"));
        assert!(!bp.should_pause_after("f", false));
        assert!(bp.should_pause_after("f", true));
        bp.set_global(Global::Go);
        assert!(!bp.should_pause_before("f") && !bp.should_pause_after("f", true));
        bp.set_global(Global::StopException);
        assert!(bp.should_pause_before("f") && bp.should_pause_after("f", false));
    }

    #[test]
    fn per_breakpoint_after_overrides_global() {
        let mut bp = Breakpoints::default();
        bp.add("f");
        bp.set_global(Global::Go);
        assert!(bp.set_after("f", After::Global(Global::Exception)));
        assert!(bp.should_pause_after("f", true));
        assert!(!bp.should_pause_after("f", false));
        assert!(bp.set_after("f", After::Yield));
        assert!(!bp.should_pause_after("f", true));
        assert!(!bp.set_after("missing", After::Yield));
    }

    #[test]
    fn aliases_normalise() {
        assert_eq!(Global::parse("both"), Some(Global::StopException));
        assert_eq!(Global::parse("stop_at_exceptions"), Some(Global::Exception));
        assert_eq!(Global::parse("continue"), Some(Global::Go));
        assert_eq!(Global::parse("yield"), None);
        assert_eq!(Before::parse_strict("defer"), None);
        assert_eq!(Before::parse("defer"), Some(Before::Yield));
        assert_eq!(Before::parse_strict("continue"), Some(Before::Go));
        assert_eq!(After::parse("default"), Some(After::Yield));
        assert_eq!(
            After::parse("breakpoints_and_exceptions"),
            Some(After::Global(Global::StopException))
        );
        assert_eq!(After::parse("nope"), None);
    }

    #[test]
    fn remove_clears_behaviours_and_replacement() {
        let mut bp = Breakpoints::default();
        let mut f = Functions::default();
        f.register("a", Some("(x)"));
        f.register("b", Some("(x)"));
        bp.add("a");
        bp.set_before("a", Before::Stop);
        bp.set_replacement("a", "b", &f).unwrap();
        assert!(bp.remove("a"));
        bp.add("a");
        assert_eq!(bp.before("a"), Before::Yield);
        assert_eq!(bp.replacement("a"), None);
        assert!(!bp.remove("zzz"));
    }

    #[test]
    fn replacement_checks_signature_first() {
        let mut bp = Breakpoints::default();
        let mut f = Functions::default();
        f.register("a", Some("(x)"));
        f.register("b", Some("(x)"));
        f.register("c", Some("(x, y)"));
        assert_eq!(
            bp.set_replacement("a", "c", &f),
            Err(ReplacementError::SignatureMismatch)
        );
        assert_eq!(
            bp.set_replacement("a", "b", &f),
            Err(ReplacementError::BreakpointNotFound)
        );
        bp.add("a");
        assert_eq!(bp.set_replacement("a", "b", &f), Ok(()));
        assert_eq!(bp.replacement("a"), Some("b"));
        assert_eq!(bp.set_replacement("a", "", &f), Ok(()));
        assert_eq!(bp.replacement("a"), None);
        f.register("a", None);
        assert_eq!(
            bp.set_replacement("a", "b", &f),
            Err(ReplacementError::SignatureMismatch)
        );
    }

    #[test]
    fn registering_without_signature_erases_it() {
        let mut f = Functions::default();
        f.register("a", Some("(x)"));
        f.register("a", Some(""));
        assert_eq!(f.signature("a"), None);
        assert!(f.contains("a"));
    }

    #[test]
    fn hit_conditions_parse_print_and_accept() {
        let cases = [
            ("5", HitCondition::Equal(5), "5"),
            (" == 5 ", HitCondition::Equal(5), "5"),
            (">5", HitCondition::Greater(5), ">5"),
            (">= 2", HitCondition::AtLeast(2), ">=2"),
            ("%3", HitCondition::Every(3), "%3"),
            (">0", HitCondition::Greater(0), ">0"),
        ];
        for (text, h, shown) in cases {
            assert_eq!(HitCondition::parse(text), Ok(h), "{text}");
            assert_eq!(h.to_string(), shown);
            assert_eq!(HitCondition::parse(shown), Ok(h));
        }
        for bad in [
            "",
            "x",
            "5x",
            "-1",
            ">-1",
            "%0",
            "0",
            "==0",
            ">=0",
            "<5",
            "99999999999999999999999",
        ] {
            let e = HitCondition::parse(bad).unwrap_err();
            assert!(e.contains("hit_condition"), "{bad}: {e}");
        }
        let hits = |h: HitCondition| (1..=10).filter(|&n| h.accepts(n)).collect::<Vec<u64>>();
        assert_eq!(hits(HitCondition::Equal(5)), [5]);
        assert_eq!(hits(HitCondition::Greater(8)), [9, 10]);
        assert_eq!(hits(HitCondition::AtLeast(9)), [9, 10]);
        assert_eq!(hits(HitCondition::Every(4)), [4, 8]);
    }

    fn gated(hit: Option<HitCondition>) -> Options {
        Options {
            condition: Some(Condition::parse("args[0] > 1").unwrap()),
            hit_condition: hit,
            ..Options::default()
        }
    }

    #[test]
    fn counts_restart_when_what_they_count_changes() {
        let mut bp = Breakpoints::default();
        assert!(
            !bp.set_options("f", gated(None)),
            "the breakpoint must exist"
        );
        bp.add("f");
        assert!(matches!(bp.plan("f"), Plan::Plain));
        assert!(matches!(bp.plan("g"), Plan::NoBreakpoint));
        bp.set_options("f", gated(Some(HitCondition::Every(2))));
        let Plan::Gated(o) = bp.plan("f") else {
            panic!("a condition gates")
        };
        let counted: Vec<bool> = (0..4).map(|_| bp.count("f", &o).hit).collect();
        assert_eq!(counted, [false, true, false, true]);
        assert_eq!(bp.hits("f"), 4);
        // The same options again keep the count; another hit condition restarts it.
        bp.set_options("f", gated(Some(HitCondition::Every(2))));
        assert_eq!(bp.hits("f"), 4);
        bp.set_options("f", gated(Some(HitCondition::Equal(1))));
        assert_eq!(bp.hits("f"), 0);
        bp.count("f", &o);
        assert!(bp.reset_hits("f"));
        assert_eq!(bp.hits("f"), 0);
        // Removing the breakpoint forgets its options and count.
        bp.count("f", &o);
        bp.remove("f");
        bp.add("f");
        assert!(matches!(bp.plan("f"), Plan::Plain));
        assert_eq!(bp.hits("f"), 0);
        assert_eq!(
            bp.count("g", &o),
            Counted {
                hit: false,
                count: 0
            }
        );
    }

    #[test]
    fn a_one_shot_breakpoint_disarms_to_go_and_stays() {
        let mut bp = Breakpoints::default();
        bp.add("f");
        assert!(!bp.disarm_if_one_shot("f"), "not one-shot");
        bp.set_options(
            "f",
            Options {
                one_shot: true,
                ..Options::default()
            },
        );
        assert!(
            matches!(bp.plan("f"), Plan::Plain),
            "one-shot alone needs no evaluation"
        );
        assert!(bp.should_pause_before("f"));
        assert!(bp.disarm_if_one_shot("f"));
        assert!(!bp.should_pause_before("f") && !bp.should_pause_after("f", false));
        assert!(bp.contains("f"));
        assert!(
            !bp.disarm_if_one_shot("f"),
            "already disarmed: nothing changes"
        );
    }

    #[test]
    fn a_disabled_breakpoint_keeps_its_settings_and_acts_as_none() {
        let mut bp = Breakpoints::default();
        let mut f = Functions::default();
        f.register("f", Some("(x)"));
        f.register("g", Some("(x)"));
        bp.add("f");
        bp.set_before("f", Before::Stop);
        bp.set_replacement("f", "g", &f).unwrap();
        bp.set_options("f", gated(None));
        let o = bp.options("f");
        bp.count("f", &o);
        assert!(!bp.set_enabled("nope", false), "the breakpoint must exist");
        assert!(bp.set_enabled("f", false));
        assert!(!bp.is_enabled("f") && bp.contains("f"));
        assert!(matches!(bp.plan("f"), Plan::NoBreakpoint));
        assert!(!bp.should_pause_before("f") && !bp.should_pause_after("f", false));
        assert!(!bp.may_pause("f"));
        // Everything is kept, and comes back with the breakpoint.
        let s = bp.settings();
        assert!(!s.breakpoints[0].enabled);
        assert_eq!(
            (bp.before("f"), bp.replacement("f"), bp.hits("f")),
            (Before::Stop, Some("g"), 1)
        );
        let mut restored = Breakpoints::default();
        restored.restore(&s);
        assert!(!restored.is_enabled("f"));
        assert!(bp.set_enabled("f", true));
        assert!(matches!(bp.plan("f"), Plan::Gated(_)));
        assert!(bp.should_pause_before("f"));
        // Removing forgets the switch: added again, it is on.
        bp.set_enabled("f", false);
        bp.remove("f");
        bp.add("f");
        assert!(bp.is_enabled("f"));
    }

    #[test]
    fn with_pausing_off_nothing_pauses_but_logpoints_are_still_judged() {
        let mut bp = Breakpoints::default();
        bp.add("f");
        bp.add("log");
        bp.set_before("f", Before::Stop);
        bp.set_options("f", gated(None));
        bp.set_options(
            "log",
            Options {
                log_message: Some(LogMessage::parse("x={args[0]}").unwrap()),
                ..Options::default()
            },
        );
        assert!(bp.pausing() && bp.may_pause("f") && !bp.may_pause("log"));
        bp.set_pausing(false);
        assert!(!bp.should_pause_before("f") && !bp.should_pause_after("f", true));
        assert!(!bp.may_pause("f"));
        assert!(
            matches!(bp.plan("f"), Plan::Plain),
            "nothing to judge: no pause"
        );
        assert!(
            matches!(bp.plan("log"), Plan::Gated(_)),
            "a logpoint still logs"
        );
        assert!(!bp.settings().pausing);
        let mut restored = Breakpoints::default();
        restored.restore(&bp.settings());
        assert!(!restored.pausing());
        bp.set_pausing(true);
        assert!(bp.should_pause_before("f"));
    }

    #[test]
    fn may_pause_reads_the_behaviours_through_the_global_default() {
        use Global::*;
        assert!(may_pause(Stop, Before::Yield, After::Yield));
        assert!(!may_pause(Go, Before::Yield, After::Yield));
        assert!(
            may_pause(Exception, Before::Yield, After::Yield),
            "after an exception"
        );
        assert!(may_pause(Go, Before::Stop, After::Yield));
        assert!(may_pause(Go, Before::Yield, After::Global(Exception)));
        assert!(!may_pause(Stop, Before::Go, After::Global(Go)));
    }

    #[test]
    fn options_that_make_no_sense_together_are_refused() {
        let log = Options {
            log_message: Some(LogMessage::parse("x={args[0]}").unwrap()),
            one_shot: true,
            ..Options::default()
        };
        assert!(log.check().unwrap_err().contains("hit_condition \"1\""));
        let outcome = Options {
            log_message: Some(LogMessage::parse("-> {result}").unwrap()),
            ..Options::default()
        };
        assert!(outcome.check().is_ok() && outcome.reads_outcome() && outcome.is_gated());
        assert!(!gated(None).reads_outcome());
        assert!(Options::default().is_empty());
    }

    #[test]
    fn the_logbook_keeps_the_newest_lines() {
        let mut book = Logbook::default();
        for i in 0..5 {
            book.push(3, i as f64, "f", &format!("c{i}"), &format!("line {i}"));
        }
        let all = book.after(0, 100);
        let msgs: Vec<&str> = all.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(msgs, ["line 2", "line 3", "line 4"]);
        assert_eq!(book.last_seq(), 5);
        assert_eq!(book.after(4, 100).len(), 1);
        assert_eq!(
            book.after(0, 1)[0].message,
            "line 4",
            "the newest within the limit"
        );
    }
}
