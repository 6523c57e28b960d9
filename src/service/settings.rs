//! The breakpoint settings in the database: every change of a breakpoint, its behaviours,
//! options or replacement, or of the default behaviour, is written as a snapshot of all the
//! settings (a `RecordKind::Settings` record) before it is acknowledged; at start the newest
//! snapshot is restored (`restore`). Hit counts are not kept: they start from 0 after a
//! restart.
//!
//! Snapshots are written in the order of the changes: one writer at a time
//! (`Shared::settings_writer`) takes the state lock, changes, takes the snapshot, releases the
//! state lock, then writes (the fsync happens without the state lock). Settings equal to the
//! ones the database holds are not written again. If the write fails, the settings go back to
//! the snapshot before the change and the change is answered with `storage_error`.
//!
//! The calls change one setting themselves: a one-shot breakpoint switches to `go` after its
//! first pause; `write_current` writes that after the pause (a failure there is logged and
//! the next change writes it).
//!
//! The body of a snapshot (version 1):
//!
//! ```json
//! {"settings": 1, "default_behavior": "go",
//!  "breakpoints": [{"function_name": "f", "behavior": "stop", "after_behavior": "yield",
//!                   "replacement_function": "g", "condition": "args[0] > 1",
//!                   "hit_condition": ">=2", "log_message": "x={args[0]}", "one_shot": false}]}
//! ```
//!
//! `replacement_function`, `condition`, `hit_condition` and `log_message` are left out when
//! unset. Reading is lenient: an unknown value or an option that no longer parses is left out
//! of the restored breakpoint (with a warning), never a reason to refuse the file.

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

/// The version of the snapshot body this server writes.
const VERSION: u64 = 1;

/// The body of a settings record.
pub fn to_disk(settings: &Settings) -> Value {
    let breakpoints: Vec<Value> = settings
        .breakpoints
        .iter()
        .map(|b| {
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
            Value::Object(m)
        })
        .collect();
    let mut m = Map::new();
    m.insert(SETTINGS_KEY.into(), json!(VERSION));
    m.insert("default_behavior".into(), json!(settings.global.as_str()));
    m.insert("breakpoints".into(), Value::Array(breakpoints));
    Value::Object(m)
}

/// Reads a settings record; `Err` when it is not one this server can read at all. What cannot
/// be read of one breakpoint is left out and described in the returned warnings.
pub fn from_disk(v: &Value) -> Result<(Settings, Vec<String>), String> {
    let m = v.as_object().ok_or("not an object")?;
    match m.get(SETTINGS_KEY).and_then(Value::as_u64) {
        Some(VERSION) => {}
        other => return Err(format!("unknown settings version {other:?}")),
    }
    let mut warnings = Vec::new();
    let global = match m.get("default_behavior").and_then(Value::as_str) {
        Some(g) => Global::parse(g).unwrap_or_else(|| {
            warnings.push(format!("unknown default behavior {g:?}; using stop"));
            Global::Stop
        }),
        None => Global::Stop,
    };
    let mut breakpoints = Vec::new();
    for b in m
        .get("breakpoints")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let Some(name) = b.get("function_name").and_then(Value::as_str) else {
            warnings.push("a breakpoint without a function_name".to_owned());
            continue;
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
        breakpoints.push(BreakpointSettings {
            name: name.to_owned(),
            before,
            after,
            replacement: text("replacement_function").map(str::to_owned),
            options: Arc::new(options),
        });
    }
    breakpoints.sort_by(|a, b| a.name.cmp(&b.name));
    breakpoints.dedup_by(|a, b| a.name == b.name);
    Ok((
        Settings {
            global,
            breakpoints,
        },
        warnings,
    ))
}

/// Restores the newest settings record found in the database `path` (at start, before any
/// request), logging what was restored: "restored 3 breakpoints, default behavior go from
/// FILE".
pub fn restore_settings(breakpoints: &mut Breakpoints, record: &Value, path: &Path) {
    match from_disk(record) {
        Ok((settings, warnings)) => {
            for w in warnings {
                log::warn!("database {}: settings: {w}", path.display());
            }
            breakpoints.restore(&settings);
            let n = settings.breakpoints.len();
            log::info!(
                "restored {n} breakpoint{}, default behavior {} from {}",
                if n == 1 { "" } else { "s" },
                settings.global.as_str(),
                path.display()
            );
        }
        Err(e) => log::warn!(
            "database {}: the newest settings record is not readable ({e}); \
             starting without breakpoints",
            path.display()
        ),
    }
}

/// Runs a change of the settings and writes the settings it leaves before returning (see the
/// module doc). `change` runs under the state lock.
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

/// Writes the settings as they are now, unless they were written so: for changes the calls
/// make themselves (a one-shot breakpoint switching to `go` after its pause). A failure is
/// logged; the next change writes them.
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

/// Appends `settings` unless they are the ones last written.
fn write(
    shared: &Shared,
    written: &mut Option<Settings>,
    settings: Settings,
) -> std::io::Result<()> {
    if written.as_ref() == Some(&settings) {
        return Ok(());
    }
    let record = to_disk(&settings);
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
    fn a_snapshot_reads_back_as_written() {
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
        let settings = bp.settings();
        let disk = to_disk(&settings);
        assert_eq!(disk["settings"], 1);
        assert_eq!(disk["breakpoints"][0]["hit_condition"], ">=2");
        let (read, warnings) = from_disk(&disk).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(read, settings);
        let mut fresh = Breakpoints::default();
        fresh.restore(&read);
        assert_eq!(fresh.settings(), settings);
    }

    #[test]
    fn what_cannot_be_read_is_left_out_with_a_warning() {
        let v = json!({"settings": 1, "default_behavior": "sometimes", "breakpoints": [
            {"function_name": "f", "behavior": "later", "condition": "args[", "one_shot": true,
             "log_message": "hi"},
            {"no_name": true},
        ]});
        let (s, warnings) = from_disk(&v).unwrap();
        assert_eq!(s.global, Global::Stop);
        assert_eq!(s.breakpoints.len(), 1);
        let f = &s.breakpoints[0];
        assert_eq!(
            (f.before, f.options.condition.is_none()),
            (Before::Yield, true)
        );
        assert!(
            !f.options.one_shot,
            "one_shot and a log message do not go together"
        );
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert!(from_disk(&json!({"settings": 2})).is_err());
        assert!(from_disk(&json!([])).is_err());
    }

    #[test]
    fn each_change_writes_one_snapshot_and_a_change_of_nothing_none() {
        use crate::service::testing::{body, Durable};
        let d = Durable::new(10);
        let s = &d.shared;
        let snapshots = || {
            s.store
                .index_page(RecordKind::Settings, &|_| true, 0, 100)
                .unwrap()
        };
        let newest = || {
            let (at, _) = snapshots();
            from_disk(&s.store.read_record(at[0]).unwrap().1).unwrap().0
        };
        crate::service::breakpoint_add(s, &body(json!({"function_name": "f"}))).unwrap();
        crate::service::breakpoint_add(s, &body(json!({"function_name": "f"}))).unwrap();
        assert_eq!(snapshots().1, 1, "adding again changes nothing");
        crate::service::breakpoint_add(
            s,
            &body(json!({"function_name": "f", "condition": "args[0] > 1"})),
        )
        .unwrap();
        crate::service::set_global(s, Global::Go).unwrap();
        crate::service::set_global(s, Global::Go).unwrap();
        assert_eq!(snapshots().1, 3);
        assert_eq!(newest(), s.lock().breakpoints.settings());
        // A refused change writes nothing.
        assert!(crate::service::set_before(s, "nope", Before::Stop)
            .unwrap()
            .is_err());
        crate::service::breakpoint_remove(s, "f").unwrap();
        crate::service::breakpoint_remove(s, "f").unwrap();
        assert_eq!(snapshots().1, 4);
        assert!(newest().breakpoints.is_empty());
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
}
