//! The breakpoint settings in the database: every change of a breakpoint, its behaviours,
//! options or replacement, or of the default behaviour, is written (a `RecordKind::Settings`
//! record) before it is acknowledged; at start the records are read in order and what they
//! leave is restored (`SettingsLoader`). Hit counts are not kept: they start from 0 after a
//! restart.
//!
//! A record holds what changed since the settings the database holds (`Shared::settings_writer`
//! keeps them): the breakpoints added or changed (each whole, with all its settings), the names
//! removed, and the default behaviour; so the file grows with the changes, not with the number
//! of breakpoints times the changes. A record with `"full": true` holds every breakpoint and
//! replaces what the records before it left (written when what the database holds is unknown,
//! after a failed write).
//!
//! Records are written in the order of the changes: one writer at a time
//! (`Shared::settings_writer`) takes the state lock, changes, takes a snapshot, releases the
//! state lock, then writes (the fsync happens without the state lock). A change that leaves
//! the settings as the database holds them writes nothing. Subscribers hear of a change when
//! the state lock is released, before it is written; if the write fails, the settings go back
//! to the snapshot before the change (another `BreakpointsChanged`) and the change is answered
//! with `storage_error`.
//!
//! The calls change one setting themselves: a one-shot breakpoint switches to `go` after its
//! first pause; `write_current` writes that after the pause (a failure there is logged and
//! the next change writes it).
//!
//! The body of a record (version 1):
//!
//! ```json
//! {"settings": 1, "default_behavior": "go",
//!  "breakpoints": [{"function_name": "f", "behavior": "stop", "after_behavior": "yield",
//!                   "replacement_function": "g", "condition": "args[0] > 1",
//!                   "hit_condition": ">=2", "log_message": "x={args[0]}", "one_shot": false,
//!                   "enabled": true}],
//!  "pausing": true, "removed": ["h"]}
//! ```
//!
//! `replacement_function`, `condition`, `hit_condition` and `log_message` are left out when
//! unset, `removed` when empty, `full` when false. `enabled` (a breakpoint switched on or off)
//! and `pausing` (the master switch) came later within version 1: a record without them
//! leaves a breakpoint on and the master switch as the records before it left it (on, in a
//! file that never had it); a server that predates them ignores them. Reading is lenient: an unknown value or an
//! option that no longer parses is left out of the restored breakpoint (with a warning), and a
//! record of another version is skipped with a warning; never a reason to refuse the file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::Obj;
use crate::breakpoints::{
    After, Before, BreakpointSettings, Breakpoints, Condition, Global, HitCondition, LogMessage,
    Options, Settings,
};
use crate::error::ApiError;
use crate::events::EventKind;
use crate::state::{Shared, State};
use crate::store::{IndexKey, RecordKind, SETTINGS_KEY};

/// The version of the record body this server writes.
const VERSION: u64 = 1;

/// One breakpoint as a record holds it.
fn breakpoint_to_disk(b: &BreakpointSettings) -> Value {
    let mut m = Obj::new();
    m.insert("function_name".into(), json!(b.name));
    m.insert("behavior".into(), json!(b.before.as_str()));
    m.insert("after_behavior".into(), json!(b.after.as_str()));
    if let Some(r) = &b.replacement {
        m.insert("replacement_function".into(), json!(r));
    }
    let o = &b.options;
    if let Some(c) = &o.condition {
        m.insert("condition".into(), json!(c.text));
    }
    if let Some(h) = o.hit_condition {
        m.insert("hit_condition".into(), json!(h.to_string()));
    }
    if let Some(l) = &o.log_message {
        m.insert("log_message".into(), json!(l.text));
    }
    m.insert("one_shot".into(), json!(o.one_shot));
    m.insert("enabled".into(), json!(b.enabled));
    Value::Object(m)
}

/// The body of the record that takes the settings the database holds (`None`: unknown, so the
/// record holds them all) to `to`.
pub fn to_disk(from: Option<&Settings>, to: &Settings) -> Value {
    let mut m = Map::new();
    m.insert(SETTINGS_KEY.into(), json!(VERSION));
    m.insert("default_behavior".into(), json!(to.global.as_str()));
    m.insert("pausing".into(), json!(to.pausing));
    let Some(from) = from else {
        m.insert("full".into(), json!(true));
        let all: Vec<Value> = to.breakpoints.iter().map(breakpoint_to_disk).collect();
        m.insert("breakpoints".into(), Value::Array(all));
        return Value::Object(m);
    };
    let old: BTreeMap<&str, &BreakpointSettings> = from
        .breakpoints
        .iter()
        .map(|b| (b.name.as_str(), b))
        .collect();
    let changed: Vec<Value> = to
        .breakpoints
        .iter()
        .filter(|b| old.get(b.name.as_str()) != Some(b))
        .map(breakpoint_to_disk)
        .collect();
    let now: BTreeMap<&str, ()> = to
        .breakpoints
        .iter()
        .map(|b| (b.name.as_str(), ()))
        .collect();
    let removed: Vec<&str> = old
        .keys()
        .filter(|n| !now.contains_key(*n))
        .copied()
        .collect();
    m.insert("breakpoints".into(), Value::Array(changed));
    if !removed.is_empty() {
        m.insert("removed".into(), json!(removed));
    }
    Value::Object(m)
}

/// Reads one breakpoint of a record; `Err` with a warning when it has no name. What cannot be
/// read of it is left out and described in `warnings`.
fn breakpoint_from_disk(
    b: &Value,
    warnings: &mut Vec<String>,
) -> Result<BreakpointSettings, String> {
    let Some(name) = b.get("function_name").and_then(Value::as_str) else {
        return Err("a breakpoint without a function_name".to_owned());
    };
    let text = |key: &str| b.get(key).and_then(Value::as_str).filter(|t| !t.is_empty());
    let mut warn = |what: &str, why: String| {
        warnings.push(format!("breakpoint {name}: {what} left out: {why}"));
    };
    let before = match text("behavior") {
        None => Before::Yield,
        Some(t) => Before::parse(t).unwrap_or_else(|| {
            warn("behavior", format!("unknown value {t:?}"));
            Before::Yield
        }),
    };
    let after = match text("after_behavior") {
        None => After::Yield,
        Some(t) => After::parse(t).unwrap_or_else(|| {
            warn("after_behavior", format!("unknown value {t:?}"));
            After::Yield
        }),
    };
    let mut options = Options {
        one_shot: b.get("one_shot").and_then(Value::as_bool).unwrap_or(false),
        ..Options::default()
    };
    if let Some(t) = text("condition") {
        match Condition::parse(t) {
            Ok(c) => options.condition = Some(c),
            Err(e) => warn("condition", e.to_string()),
        }
    }
    if let Some(t) = text("hit_condition") {
        match HitCondition::parse(t) {
            Ok(h) => options.hit_condition = Some(h),
            Err(e) => warn("hit_condition", e),
        }
    }
    if let Some(t) = text("log_message") {
        match LogMessage::parse(t) {
            Ok(l) => options.log_message = Some(l),
            Err(e) => warn("log_message", e.to_string()),
        }
    }
    if let Err(e) = options.check() {
        warn("one_shot", e);
        options.one_shot = false;
    }
    Ok(BreakpointSettings {
        name: name.to_owned(),
        before,
        after,
        replacement: text("replacement_function").map(str::to_owned),
        options: Arc::new(options),
        // Written by this version on; a breakpoint of an older record is on.
        enabled: b.get("enabled").and_then(Value::as_bool).unwrap_or(true),
    })
}

/// Reads the settings records of a database in order (`add`) and restores what they leave
/// (`restore`), at start, before any request.
#[derive(Debug, Default)]
pub struct SettingsLoader {
    /// The browser origins granted in the web UI, from the last record that lists them.
    granted_origins: Option<Vec<String>>,
    breakpoints: BTreeMap<String, BreakpointSettings>,
    global: Option<Global>,
    /// The master switch, from the last record that has it (older records do not).
    pausing: Option<bool>,
    /// The labels and notes of runs, from their records (`RUN_KEY`).
    runs: Vec<(String, crate::runs::RunMeta)>,
    /// The notes on call records, from their records (`NOTE_KEY`), in order.
    notes: Vec<(String, String)>,
    records: usize,
    warnings: Vec<String>,
}

impl SettingsLoader {
    /// Applies the next settings record.
    pub fn add(&mut self, v: &Value) {
        let Some(m) = v.as_object() else {
            self.warnings
                .push("a settings record that is not an object".to_owned());
            return;
        };
        match m.get(SETTINGS_KEY).and_then(Value::as_u64) {
            Some(VERSION) => {}
            other => {
                self.warnings.push(format!(
                    "a settings record of unknown version {other:?} skipped"
                ));
                return;
            }
        }
        if let Some(id) = m.get(NOTE_KEY) {
            let note = m.get("note").and_then(Value::as_str).unwrap_or("");
            match id.as_str() {
                Some(id) => self.notes.push((id.to_owned(), note.to_owned())),
                None => self.warnings.push(format!(
                    "a record note whose call id {id} is not text, skipped"
                )),
            }
            return;
        }
        if let Some(run) = m.get(RUN_KEY) {
            let text = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            match run.as_str() {
                Some(run) => self.runs.push((
                    run.to_owned(),
                    crate::runs::RunMeta {
                        label: text("label"),
                        notes: text("notes"),
                    },
                )),
                None => self
                    .warnings
                    .push(format!("a run record whose run {run} is not text, skipped")),
            }
            return;
        }
        if let Some(list) = m.get(ORIGINS_KEY) {
            let origins = crate::node::strings(Some(list));
            self.granted_origins = Some(origins);
            if !m.contains_key("default_behavior") {
                // A record of the grants only.
                return;
            }
        }
        self.records += 1;
        if m.get("full").and_then(Value::as_bool) == Some(true) {
            self.breakpoints.clear();
        }
        if let Some(g) = m.get("default_behavior").and_then(Value::as_str) {
            match Global::parse(g) {
                Some(g) => self.global = Some(g),
                None => self
                    .warnings
                    .push(format!("unknown default behavior {g:?} left out")),
            }
        }
        match m.get("pausing") {
            None => {}
            Some(Value::Bool(on)) => self.pausing = Some(*on),
            Some(other) => self
                .warnings
                .push(format!("pausing {other} is not true or false, left out")),
        }
        for b in m
            .get("breakpoints")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            match breakpoint_from_disk(b, &mut self.warnings) {
                Ok(b) => {
                    self.breakpoints.insert(b.name.clone(), b);
                }
                Err(w) => self.warnings.push(w),
            }
        }
        for name in m
            .get("removed")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if let Some(name) = name.as_str() {
                self.breakpoints.remove(name);
            }
        }
    }

    /// The settings the records leave (`None` without any record).
    pub fn settings(&self) -> Option<Settings> {
        (self.records > 0).then(|| Settings {
            global: self.global.unwrap_or(Global::Stop),
            pausing: self.pausing.unwrap_or(true),
            breakpoints: self.breakpoints.values().cloned().collect(),
        })
    }

    /// Restores the settings the records leave into `breakpoints`, logging what was restored
    /// from the database `path`: "restored 3 breakpoints, default behavior go from FILE".
    /// The browser origins granted in the web UI (none in a file written before grants).
    pub fn granted_origins(&self) -> &[String] {
        self.granted_origins.as_deref().unwrap_or_default()
    }

    /// Restores the labels and notes of runs (the last record of each run holds both).
    pub fn restore_runs(&self, runs: &mut crate::runs::RunNotes) {
        for (run, meta) in &self.runs {
            runs.set(run, meta.clone());
        }
    }

    /// Restores the notes on call records (the last record of each call holds its note).
    pub fn restore_notes(&self, notes: &mut crate::runs::RecordNotes) {
        for (id, note) in &self.notes {
            notes.set(id, note.clone());
        }
    }

    pub fn restore(self, breakpoints: &mut Breakpoints, path: &Path) {
        for w in &self.warnings {
            log::warn!("database {}: settings: {w}", path.display());
        }
        let Some(settings) = self.settings() else {
            return;
        };
        breakpoints.restore(&settings);
        let n = settings.breakpoints.len();
        log::info!(
            "restored {n} breakpoint{}, default behavior {} from {}",
            if n == 1 { "" } else { "s" },
            settings.global.as_str(),
            path.display()
        );
        let off = settings.breakpoints.iter().filter(|b| !b.enabled).count();
        if off > 0 {
            log::info!("{off} of them switched off (they keep their settings and pause nothing)");
        }
        if !settings.pausing {
            log::warn!(
                "pausing is off (restored from {}): no call pauses until it is switched on \
                 (web UI, POST /api/pausing or the MCP tool breakpoint_set_pausing)",
                path.display()
            );
        }
    }
}

/// Runs a change of the settings and writes what it changed before returning (see the
/// module doc). `change` runs under the state lock.
/// The key of a settings record that lists the granted browser origins (the whole list, so
/// the last such record holds them all): `{"settings": 1, "granted_origins": [...]}`. Files
/// written before grants have no such record; a server of that time skips it harmlessly (a
/// version-1 record that changes no breakpoint).
const ORIGINS_KEY: &str = "granted_origins";

/// The key of a settings record that holds a run's label and notes (both, whole):
/// `{"settings": 1, "run": "<process key>", "label": "...", "notes": "..."}`. A server that
/// predates it reads it as a version-1 record that changes no breakpoint.
const RUN_KEY: &str = "run";

/// The key of a settings record that holds the note on a call record (whole; "" removed it):
/// `{"settings": 1, "record_note": "<call id>", "note": "..."}`.
const NOTE_KEY: &str = "record_note";

/// Sets the note on a call record and writes it (with a database file) before the change is
/// acknowledged; a failed write undoes it (`storage_error`).
pub(crate) fn persisted_note(shared: &Shared, call_id: &str, note: String) -> Result<(), ApiError> {
    let _order = shared.settings_writer();
    let notes = || {
        shared
            .record_notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    };
    let before = notes().set(call_id, note.clone());
    if !shared.store.is_durable() || before.as_deref().unwrap_or("") == note {
        return Ok(());
    }
    let mut record = Map::new();
    record.insert(SETTINGS_KEY.into(), json!(VERSION));
    record.insert(NOTE_KEY.into(), json!(call_id));
    record.insert("note".into(), json!(note));
    let record = Value::Object(record);
    match shared
        .store
        .append_records(&[(RecordKind::Settings, &record, IndexKey::default())])
    {
        Ok(_) => Ok(()),
        Err(err) => {
            log::error!("writing the note on call {call_id} failed: {err}; the change is undone");
            notes().set(call_id, before.unwrap_or_default());
            Err(ApiError::storage(&err))
        }
    }
}

/// Writes a run's label and notes (with a database file) before the change is acknowledged;
/// a failed write undoes it (`storage_error`).
pub(crate) fn persisted_run(
    shared: &Shared,
    run: &str,
    change: impl FnOnce(&mut crate::runs::RunMeta),
) -> Result<crate::runs::RunMeta, ApiError> {
    let _order = shared.settings_writer();
    let mut st = shared.lock();
    let before = st.runs.get(run);
    let mut after = before.clone();
    change(&mut after);
    st.runs.set(run, after.clone());
    drop(st);
    if !shared.store.is_durable() || before == after {
        return Ok(after);
    }
    let mut record = Map::new();
    record.insert(SETTINGS_KEY.into(), json!(VERSION));
    record.insert(RUN_KEY.into(), json!(run));
    record.insert("label".into(), json!(after.label));
    record.insert("notes".into(), json!(after.notes));
    let record = Value::Object(record);
    match shared
        .store
        .append_records(&[(RecordKind::Settings, &record, IndexKey::default())])
    {
        Ok(_) => Ok(after),
        Err(err) => {
            log::error!("writing the label of run {run} failed: {err}; the change is undone");
            shared.lock().runs.set(run, before);
            Err(ApiError::storage(&err))
        }
    }
}

/// Changes the browser-origin grants and writes them (when they changed, with a database file)
/// before the change is acknowledged; a failed write undoes the change (`storage_error`).
pub(crate) fn persisted_origins<T>(
    shared: &Shared,
    change: impl FnOnce(&mut State) -> T,
) -> Result<T, ApiError> {
    let _order = shared.settings_writer();
    let mut st = shared.lock();
    let before = st.origins.granted().to_vec();
    let out = change(&mut st);
    st.emit(EventKind::OriginsChanged);
    let after = st.origins.granted().to_vec();
    drop(st);
    if !shared.store.is_durable() || before == after {
        return Ok(out);
    }
    let mut record = Map::new();
    record.insert(SETTINGS_KEY.into(), json!(VERSION));
    record.insert(ORIGINS_KEY.into(), json!(after));
    let record = Value::Object(record);
    match shared
        .store
        .append_records(&[(RecordKind::Settings, &record, IndexKey::default())])
    {
        Ok(_) => Ok(out),
        Err(err) => {
            log::error!("writing the granted origins failed: {err}; the change is undone");
            let mut st = shared.lock();
            st.origins.restore(&before);
            st.emit(EventKind::OriginsChanged);
            Err(ApiError::storage(&err))
        }
    }
}

pub(super) fn persisted<T>(
    shared: &Shared,
    change: impl FnOnce(&mut State) -> T,
) -> Result<T, ApiError> {
    let mut written = shared.settings_writer();
    let mut st = shared.lock();
    if !shared.store.is_durable() {
        return Ok(change(&mut st));
    }
    let before = st.breakpoints.settings();
    let out = change(&mut st);
    let after = st.breakpoints.settings();
    drop(st);
    match write(shared, &mut written, after) {
        Ok(()) => Ok(out),
        Err(err) => {
            *written = None;
            log::error!("settings write failed: {err}; the change is undone");
            let mut st = shared.lock();
            st.breakpoints.restore(&before);
            st.emit(EventKind::BreakpointsChanged);
            Err(ApiError::storage(&err))
        }
    }
}

/// Writes the settings as they are now, unless the database holds them so: for changes the
/// calls make themselves (a one-shot breakpoint switching to `go` after its pause). A failure
/// is logged; the next change writes them.
pub fn write_current(shared: &Shared) {
    if !shared.store.is_durable() {
        return;
    }
    let mut written = shared.settings_writer();
    let now = shared.lock().breakpoints.settings();
    if let Err(err) = write(shared, &mut written, now) {
        *written = None;
        log::error!("settings write failed: {err}; the next change of the settings writes them");
    }
}

/// Appends the record that takes `written` (what the database holds) to `settings`, unless
/// they are the same.
fn write(
    shared: &Shared,
    written: &mut Option<Settings>,
    settings: Settings,
) -> std::io::Result<()> {
    if written.as_ref() == Some(&settings) {
        return Ok(());
    }
    let record = to_disk(written.as_ref(), &settings);
    shared
        .store
        .append_records(&[(RecordKind::Settings, &record, IndexKey::default())])?;
    *written = Some(settings);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_and_note_records_are_replayed_in_order_and_change_no_breakpoint() {
        let mut l = SettingsLoader::default();
        l.add(&json!({"settings": 1, "run": "1.5+7", "label": "a", "notes": ""}));
        l.add(&json!({"settings": 1, "record_note": "c1", "note": "slow"}));
        l.add(&json!({"settings": 1, "run": "1.5+7", "label": "b", "notes": "n"}));
        l.add(&json!({"settings": 1, "record_note": "c2", "note": "x"}));
        l.add(&json!({"settings": 1, "record_note": "c2", "note": ""}));
        l.add(&json!({"settings": 1, "run": 3, "label": "bad"}));
        assert!(l.settings().is_none(), "no breakpoint settings");
        assert_eq!(l.warnings.len(), 1);
        let mut runs = crate::runs::RunNotes::default();
        l.restore_runs(&mut runs);
        assert_eq!(runs.get("1.5+7").label, "b");
        assert_eq!(runs.get("1.5+7").notes, "n");
        assert_eq!(runs.len(), 1);
        let mut notes = crate::runs::RecordNotes::default();
        l.restore_notes(&mut notes);
        assert_eq!(notes.get("c1"), Some("slow"));
        assert_eq!(notes.get("c2"), None);
    }

    fn two_breakpoints() -> Breakpoints {
        let mut bp = Breakpoints::default();
        bp.add("f");
        bp.add("g");
        bp.set_before("f", Before::Stop);
        bp.set_after("g", After::Global(Global::Exception));
        bp.set_options(
            "f",
            Options {
                condition: Some(Condition::parse("args[0] > 1").unwrap()),
                hit_condition: Some(HitCondition::parse(">= 2").unwrap()),
                log_message: None,
                one_shot: true,
            },
        );
        bp.set_options(
            "g",
            Options {
                log_message: Some(LogMessage::parse("x={args[0]}").unwrap()),
                ..Options::default()
            },
        );
        bp.set_global(Global::Go);
        bp
    }

    fn load(records: &[Value]) -> SettingsLoader {
        let mut loader = SettingsLoader::default();
        for r in records {
            loader.add(r);
        }
        loader
    }

    #[test]
    fn records_read_back_as_written_and_hold_only_what_changed() {
        let mut bp = two_breakpoints();
        let first = bp.settings();
        let full = to_disk(None, &first);
        assert_eq!(
            (&full["settings"], &full["full"]),
            (&json!(1), &json!(true))
        );
        assert_eq!(full["breakpoints"][0]["hit_condition"], ">=2");
        let from_empty = to_disk(Some(&Breakpoints::default().settings()), &first);
        assert_eq!(from_empty["breakpoints"], full["breakpoints"]);
        let loader = load(std::slice::from_ref(&from_empty));
        assert!(loader.warnings.is_empty(), "{:?}", loader.warnings);
        assert_eq!(loader.settings(), Some(first.clone()));

        bp.set_before("g", Before::Go);
        bp.remove("f");
        bp.add("h");
        let second = bp.settings();
        let delta = to_disk(Some(&first), &second);
        let names: Vec<&str> = delta["breakpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["function_name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["g", "h"], "only what changed: {delta}");
        assert_eq!(delta["removed"], json!(["f"]));
        assert!(delta.get("full").is_none());
        assert_eq!(
            load(&[from_empty.clone(), delta.clone()]).settings(),
            Some(second.clone())
        );
        // A full record replaces what came before it.
        let mut only_h = Breakpoints::default();
        only_h.add("h");
        let reset = to_disk(None, &only_h.settings());
        assert_eq!(
            load(&[from_empty, delta, reset]).settings(),
            Some(only_h.settings())
        );
        let mut fresh = Breakpoints::default();
        fresh.restore(&second);
        assert_eq!(fresh.settings(), second);
        assert_eq!(load(&[]).settings(), None);
    }

    #[test]
    fn switches_read_back_and_records_from_before_them_leave_everything_on() {
        // A record as the version before the switches wrote it.
        let old = json!({"settings": 1, "default_behavior": "stop", "full": true, "breakpoints": [
            {"function_name": "f", "behavior": "stop", "after_behavior": "yield", "one_shot": false}]});
        let s = load(std::slice::from_ref(&old)).settings().unwrap();
        assert!(s.pausing && s.breakpoints[0].enabled, "{s:?}");
        let mut bp = Breakpoints::default();
        bp.restore(&s);
        bp.set_enabled("f", false);
        bp.set_pausing(false);
        let off = to_disk(Some(&s), &bp.settings());
        assert_eq!(
            (&off["pausing"], &off["breakpoints"][0]["enabled"]),
            (&json!(false), &json!(false)),
            "{off}"
        );
        // A later record without the master switch (an older server's) keeps it as it was.
        let older = json!({"settings": 1, "default_behavior": "go", "breakpoints": []});
        let loader = load(&[
            old,
            off,
            older,
            json!({"settings": 1, "default_behavior": "go", "pausing": "no"}),
        ]);
        let s = loader.settings().unwrap();
        assert!(!s.pausing && !s.breakpoints[0].enabled, "{s:?}");
        assert_eq!(loader.warnings.len(), 1, "{:?}", loader.warnings);
    }

    #[test]
    fn what_cannot_be_read_is_left_out_with_a_warning() {
        let v = json!({"settings": 1, "default_behavior": "sometimes", "breakpoints": [
            {"function_name": "f", "behavior": "later", "condition": "args[", "one_shot": true,
             "log_message": "hi"},
            {"no_name": true},
        ]});
        let loader = load(&[v, json!({"settings": 2, "full": true}), json!([])]);
        let s = loader.settings().unwrap();
        assert_eq!(s.global, Global::Stop);
        assert_eq!(
            s.breakpoints.len(),
            1,
            "the record of another version is skipped"
        );
        let f = &s.breakpoints[0];
        assert_eq!(
            (f.before, f.options.condition.is_none()),
            (Before::Yield, true)
        );
        assert!(
            !f.options.one_shot,
            "one_shot and a log message do not go together"
        );
        assert_eq!(loader.warnings.len(), 7, "{:?}", loader.warnings);
    }

    #[test]
    fn concurrent_changes_reach_the_database_in_their_order() {
        use crate::service::testing::{body, Durable};
        let d = Durable::new(10);
        let s = &d.shared;
        std::thread::scope(|scope| {
            for t in 0..4 {
                scope.spawn(move || {
                    for i in 0..25 {
                        let name = format!("f{}", i % 5);
                        let cond = format!("args[0] == {t}{i}");
                        crate::service::breakpoint_add(
                            s,
                            &body(json!({"function_name": name, "condition": cond})),
                        )
                        .unwrap();
                        if i % 3 == t % 3 {
                            crate::service::breakpoint_remove(s, &name).unwrap();
                        }
                        let g = [Global::Go, Global::Stop, Global::Exception][(i + t) % 3];
                        crate::service::set_global(s, g).unwrap();
                    }
                });
            }
        });
        let (at, _) = s
            .store
            .index_page(RecordKind::Settings, &|_| true, 0, 10_000)
            .unwrap();
        let mut loader = SettingsLoader::default();
        for &o in at.iter().rev() {
            loader.add(&s.store.read_record(o).unwrap().1);
        }
        assert_eq!(loader.settings(), Some(s.lock().breakpoints.settings()));
    }

    #[test]
    fn restoring_keeps_the_counts_of_unchanged_breakpoints() {
        let mut bp = Breakpoints::default();
        bp.add("f");
        bp.add("g");
        let o = Options::default();
        bp.count("f", &o);
        bp.count("g", &o);
        let mut s = bp.settings();
        s.breakpoints[1].options = Arc::new(Options {
            hit_condition: Some(HitCondition::Every(2)),
            ..Options::default()
        });
        bp.restore(&s);
        assert_eq!((bp.hits("f"), bp.hits("g")), (1, 0));
    }

    #[test]
    fn each_change_writes_one_record_and_a_change_of_nothing_none() {
        use crate::service::testing::{body, Durable};
        let d = Durable::new(10);
        let s = &d.shared;
        let records = || {
            let (at, total) = s
                .store
                .index_page(RecordKind::Settings, &|_| true, 0, 100)
                .unwrap();
            let mut all: Vec<Value> = at
                .iter()
                .map(|&o| s.store.read_record(o).unwrap().1)
                .collect();
            all.reverse();
            (all, total)
        };
        let loaded = || load(&records().0).settings().unwrap();
        crate::service::breakpoint_add(s, &body(json!({"function_name": "f"}))).unwrap();
        crate::service::breakpoint_add(s, &body(json!({"function_name": "f"}))).unwrap();
        assert_eq!(records().1, 1, "adding again changes nothing");
        crate::service::breakpoint_add(
            s,
            &body(json!({"function_name": "f", "condition": "args[0] > 1"})),
        )
        .unwrap();
        crate::service::set_global(s, Global::Go).unwrap();
        crate::service::set_global(s, Global::Go).unwrap();
        assert_eq!(records().1, 3);
        assert_eq!(loaded(), s.lock().breakpoints.settings());
        // The default behavior alone: no breakpoint in the record.
        assert_eq!(records().0[2]["breakpoints"], json!([]));
        // A refused change writes nothing.
        assert!(crate::service::set_before(s, "nope", Before::Stop)
            .unwrap()
            .is_err());
        crate::service::breakpoint_remove(s, "f").unwrap();
        crate::service::breakpoint_remove(s, "f").unwrap();
        assert_eq!(records().1, 4);
        assert_eq!(records().0[3]["removed"], json!(["f"]));
        assert!(loaded().breakpoints.is_empty());
    }
}
