//! What a person wrote about runs (a run is what one process recorded; its id is the process
//! key): a label and notes for each. Pure; `service::runs` persists every change as a settings
//! record and `service::SettingsLoader` reads them back.

use std::collections::HashMap;

use crate::limits::{MAX_RECORD_NOTE_CHARS, MAX_RUN_LABEL_CHARS, MAX_RUN_NOTES_CHARS};

/// The label and notes of one run ("" when none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunMeta {
    pub label: String,
    pub notes: String,
}

impl RunMeta {
    pub fn is_empty(&self) -> bool {
        self.label.is_empty() && self.notes.is_empty()
    }
}

/// The labels and notes of every run that has some.
#[derive(Debug, Default)]
pub struct RunNotes {
    by_run: HashMap<String, RunMeta>,
}

/// Why a label or notes were refused: the field and its limit in characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLong {
    pub field: &'static str,
    pub max: usize,
}

/// Checks a label (one line, at most `MAX_RUN_LABEL_CHARS`) and returns it trimmed.
pub fn check_label(label: &str) -> Result<String, TooLong> {
    let label = label.trim();
    if label.chars().count() > MAX_RUN_LABEL_CHARS || label.contains(['\n', '\r']) {
        return Err(TooLong {
            field: "label",
            max: MAX_RUN_LABEL_CHARS,
        });
    }
    Ok(label.to_owned())
}

/// Checks notes (at most `MAX_RUN_NOTES_CHARS`); surrounding blank space is dropped.
pub fn check_notes(notes: &str) -> Result<String, TooLong> {
    let notes = notes.trim();
    if notes.chars().count() > MAX_RUN_NOTES_CHARS {
        return Err(TooLong {
            field: "notes",
            max: MAX_RUN_NOTES_CHARS,
        });
    }
    Ok(notes.to_owned())
}

/// Checks a call record's note (at most `MAX_RECORD_NOTE_CHARS`); blank space around it is
/// dropped.
pub fn check_note(note: &str) -> Result<String, TooLong> {
    let note = note.trim();
    if note.chars().count() > MAX_RECORD_NOTE_CHARS {
        return Err(TooLong {
            field: "note",
            max: MAX_RECORD_NOTE_CHARS,
        });
    }
    Ok(note.to_owned())
}

/// The notes on call records, by call id.
#[derive(Debug, Default)]
pub struct RecordNotes {
    by_call: HashMap<String, String>,
}

impl RecordNotes {
    pub fn get(&self, call_id: &str) -> Option<&str> {
        self.by_call.get(call_id).map(String::as_str)
    }

    /// Sets a record's note; "" removes it. Answers the note it had.
    pub fn set(&mut self, call_id: &str, note: String) -> Option<String> {
        if note.is_empty() {
            self.by_call.remove(call_id)
        } else {
            self.by_call.insert(call_id.to_owned(), note)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_call.is_empty()
    }
}

impl RunNotes {
    /// The label and notes of a run (empty when it has none).
    pub fn get(&self, run: &str) -> RunMeta {
        self.by_run.get(run).cloned().unwrap_or_default()
    }

    /// Sets what a run has; an empty one is forgotten.
    pub fn set(&mut self, run: &str, meta: RunMeta) {
        if meta.is_empty() {
            self.by_run.remove(run);
        } else {
            self.by_run.insert(run.to_owned(), meta);
        }
    }

    pub fn len(&self) -> usize {
        self.by_run.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_run.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_and_clear() {
        let mut n = RunNotes::default();
        assert_eq!(n.get("1+2"), RunMeta::default());
        n.set(
            "1+2",
            RunMeta {
                label: "baseline".into(),
                notes: String::new(),
            },
        );
        assert_eq!(n.get("1+2").label, "baseline");
        assert_eq!(n.len(), 1);
        n.set("1+2", RunMeta::default());
        assert!(n.is_empty());
        n.set(
            "3+4",
            RunMeta {
                label: String::new(),
                notes: "slow".into(),
            },
        );
        assert_eq!(n.get("3+4").notes, "slow");
    }

    #[test]
    fn record_notes_are_set_and_removed() {
        let mut n = RecordNotes::default();
        assert_eq!(n.set("c1", "slow".into()), None);
        assert_eq!(n.get("c1"), Some("slow"));
        assert_eq!(n.set("c1", String::new()).as_deref(), Some("slow"));
        assert!(n.is_empty());
        assert_eq!(
            check_note(&"x".repeat(MAX_RECORD_NOTE_CHARS + 1))
                .unwrap_err()
                .field,
            "note"
        );
        assert_eq!(check_note(" a\nb ").as_deref(), Ok("a\nb"));
    }

    #[test]
    fn limits() {
        assert_eq!(check_label("  a run  ").as_deref(), Ok("a run"));
        assert_eq!(check_label("two\nlines").unwrap_err().field, "label");
        let long = "x".repeat(MAX_RUN_LABEL_CHARS + 1);
        assert_eq!(check_label(&long).unwrap_err().max, MAX_RUN_LABEL_CHARS);
        assert!(check_label(&long[1..]).is_ok());
        assert_eq!(check_notes("line\nline\n").as_deref(), Ok("line\nline"));
        let long = "é".repeat(MAX_RUN_NOTES_CHARS + 1);
        assert_eq!(check_notes(&long).unwrap_err().field, "notes");
    }
}
