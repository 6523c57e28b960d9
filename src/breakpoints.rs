//! Breakpoints, their before/after behaviours and replacements, the global default behaviour,
//! the function registry, and the pause decisions of protocol doc §5.1 and §5.3. Pure: no I/O,
//! no locks; `State` owns one `Breakpoints` and one `Functions`.

use std::collections::{BTreeMap, BTreeSet};

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
    global: Global,
}

impl Default for Breakpoints {
    fn default() -> Breakpoints {
        Breakpoints {
            names: BTreeSet::new(),
            before: BTreeMap::new(),
            after: BTreeMap::new(),
            replacements: BTreeMap::new(),
            global: Global::Stop,
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
        self.names.remove(name)
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

    /// Before a call runs: pause if the function has a breakpoint whose effective
    /// before-behaviour stops (protocol doc §5.3).
    pub fn should_pause_before(&self, name: &str) -> bool {
        self.contains(name)
            && match self.before(name) {
                Before::Stop => true,
                Before::Go => false,
                Before::Yield => self.global.stops_before(),
            }
    }

    /// After a call completed: pause if the effective after-behaviour stops for this outcome.
    pub fn should_pause_after(&self, name: &str, is_exception: bool) -> bool {
        self.contains(name)
            && match self.after(name) {
                After::Global(g) => g.stops_after(is_exception),
                After::Yield => self.global.stops_after(is_exception),
            }
    }

    /// Replacement function names by breakpoint, sorted.
    pub fn replacements(&self) -> &BTreeMap<String, String> {
        &self.replacements
    }
}

/// Registered functions: names, signatures and metadata (protocol doc §2.3).
#[derive(Debug, Default)]
pub struct Functions {
    names: BTreeSet<String>,
    signatures: BTreeMap<String, String>,
    metadata: BTreeMap<String, Map<String, Value>>,
}

impl Functions {
    /// Registers a name; an empty or missing signature deletes the stored one (the original's rule).
    pub fn register(&mut self, name: &str, signature: Option<&str>) {
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
        self.metadata.insert(name.to_owned(), metadata);
    }

    /// Sets one metadata key, creating the metadata if needed.
    pub fn set_metadata_key(&mut self, name: &str, key: &str, value: Value) {
        self.metadata
            .entry(name.to_owned())
            .or_default()
            .insert(key.to_owned(), value);
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
}
