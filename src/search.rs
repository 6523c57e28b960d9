//! Text search over call records: a case-insensitive substring match (both sides compared in
//! Unicode lowercase) over what the Calls page shows of a record: its rendered arguments, its
//! keyword arguments (names and rendered values), its result, and its exception (rendered
//! value, type, message, traceback). Rendered values come from a `Render` (the content store
//! behind a cache); the items of many records name the same few CIDs, so each CID (with its
//! format hint) is rendered and tested once per search and remembered, up to `SEARCH_MEMO_MAX`
//! entries. Pure: no I/O of its own, no locks; the caller bounds the time.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use crate::intern::{Cid, DigestBuild, Val};
use crate::limits::SEARCH_MEMO_MAX;
use crate::records::{CallRecord, EventRecord, Hint, Item, Record, Render};

/// The text a rendered value is shown as: a string as it is, a placeholder by its summary,
/// anything else as compact JSON.
pub fn shown(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        Value::Object(m) => match m.get("summary").and_then(Value::as_str) {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(v.to_string()),
        },
        other => Cow::Owned(other.to_string()),
    }
}

/// One search: the lowercased needle and what it learned about CIDs.
pub struct TextSearch {
    needle: String,
    memo: HashMap<(Cid, Hint), bool, DigestBuild>,
    buf: String,
    /// Values rendered for this search (those not remembered).
    pub rendered: usize,
}

impl TextSearch {
    pub fn new(text: &str) -> TextSearch {
        TextSearch {
            needle: text.to_lowercase(),
            memo: HashMap::default(),
            buf: String::new(),
            rendered: 0,
        }
    }

    /// Whether the text occurs in what is shown of the record, or in its note.
    pub fn matches(&mut self, r: &Record, render: &dyn Render) -> bool {
        if self.needle.is_empty() {
            return true;
        }
        if r.note(render)
            .is_some_and(|n| n.to_lowercase().contains(&self.needle))
        {
            return true;
        }
        match r {
            Record::Call(c) => self.call(c, render),
            Record::Event(e) => self.event(e),
            Record::Other(v) => self.other(v),
        }
    }

    fn call(&mut self, c: &CallRecord, render: &dyn Render) -> bool {
        c.args.iter().any(|a| self.item(a, render))
            || c.kwargs
                .iter()
                .any(|(k, v)| self.text(k) || self.item(v, render))
            || self.cid(&c.result_cid, c.result_format, render)
            || c.exception.as_deref().is_some_and(|e| {
                [&e.shown, &e.exception_type, &e.message, &e.traceback]
                    .iter()
                    .any(|v| self.val(v))
            })
    }

    fn event(&mut self, e: &EventRecord) -> bool {
        [&e.pretty_args, &e.pretty_kwargs]
            .iter()
            .any(|v| self.spread(&v.to_value()))
            || self.val(&e.pretty_result)
            || self.val(&e.exception)
    }

    /// An external tool call: its arguments, result preview and error.
    fn other(&mut self, v: &Value) -> bool {
        v.get("arguments").is_some_and(|a| self.spread(a))
            || v.get("pretty_result").is_some_and(|r| self.value(r))
            || v.get("error")
                .filter(|e| !e.is_null())
                .is_some_and(|e| self.value(e.get("message").unwrap_or(e)))
    }

    fn item(&mut self, item: &Item, render: &dyn Render) -> bool {
        match item {
            Item::Std { cid, format, .. } => self.remembered(cid, *format, &mut |s: &mut Self| {
                s.value(&render.item(item))
            }),
            Item::Other { .. } => {
                self.rendered += 1;
                self.value(&render.item(item))
            }
        }
    }

    fn cid(&mut self, cid: &Val, hint: Hint, render: &dyn Render) -> bool {
        match cid {
            Val::Absent | Val::Null => false,
            Val::Cid(c) => {
                self.remembered(c, hint, &mut |s: &mut Self| s.value(&render.cid(cid, hint)))
            }
            other => {
                self.rendered += 1;
                self.value(&render.cid(other, hint))
            }
        }
    }

    fn remembered(
        &mut self,
        cid: &Cid,
        hint: Hint,
        test: &mut dyn FnMut(&mut Self) -> bool,
    ) -> bool {
        let key = (cid.clone(), hint);
        if let Some(&known) = self.memo.get(&key) {
            return known;
        }
        self.rendered += 1;
        let found = test(self);
        if self.memo.len() < SEARCH_MEMO_MAX {
            self.memo.insert(key, found);
        }
        found
    }

    /// The elements of a list or the keys and values of a dict one by one (as a page lists
    /// arguments), anything else whole.
    fn spread(&mut self, v: &Value) -> bool {
        match v {
            Value::Array(a) => a.iter().any(|x| self.value(x)),
            Value::Object(m) => m.iter().any(|(k, x)| self.text(k) || self.value(x)),
            other => self.value(other),
        }
    }

    fn val(&mut self, v: &Val) -> bool {
        match v {
            Val::Absent | Val::Null => false,
            Val::Str(s) => self.text(s),
            other => self.value(&other.to_value()),
        }
    }

    fn value(&mut self, v: &Value) -> bool {
        match v {
            Value::Null => false,
            other => self.text(&shown(other)),
        }
    }

    /// Whether the needle occurs in `hay`, both in lowercase.
    fn text(&mut self, hay: &str) -> bool {
        if hay.is_ascii() {
            // Lowercase of ASCII text is ASCII: a needle with other characters cannot occur.
            if hay.len() < self.needle.len() || !self.needle.is_ascii() {
                return false;
            }
            self.buf.clear();
            self.buf.push_str(hay);
            self.buf.make_ascii_lowercase();
            self.buf.contains(self.needle.as_str())
        } else {
            hay.to_lowercase().contains(self.needle.as_str())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intern::Interner;
    use serde_json::json;
    use std::cell::Cell;
    use std::sync::Arc;

    /// Renders an item as `v<first hex digit pair of its CID>`, counting the calls.
    struct Counting(Cell<usize>);
    impl Render for Counting {
        fn item(&self, item: &Item) -> Value {
            self.0.set(self.0.get() + 1);
            json!(format!("Value-{}", &item.cid().unwrap_or_default()[..2]))
        }
        fn cid(&self, cid: &Val, _: Hint) -> Value {
            self.0.set(self.0.get() + 1);
            match cid {
                Val::Cid(c) => json!({"summary": format!("Result-{}", &c.hex()[..2])}),
                _ => Value::Null,
            }
        }
    }

    fn call(i: &mut Interner, arg: u8, result: u8) -> Record {
        let mut c = CallRecord::for_tests("f", "1.000000-001");
        let item = |i: &mut Interner, n: u8| {
            Item::parse(i, &json!({"cid": format!("{n:02x}").repeat(64)}))
        };
        c.args = vec![item(i, arg)].into();
        c.kwargs = vec![(i.sym("flag"), item(i, 0xee))].into();
        c.result_cid = Val::Cid(i.cid([result; 64]));
        Record::Call(Arc::new(c))
    }

    #[test]
    fn a_search_looks_at_arguments_keywords_results_and_exceptions_in_any_case() {
        let mut i = Interner::default();
        let r = call(&mut i, 0x1a, 0x2b);
        let render = Counting(Cell::new(0));
        for (needle, found) in [
            ("value-1a", true),
            ("VALUE-EE", true),
            ("FLAG", true),
            ("result-2B", true),
            ("value-2b", false),
            ("", true),
            ("é", false),
        ] {
            assert_eq!(
                TextSearch::new(needle).matches(&r, &render),
                found,
                "{needle}"
            );
        }
        let mut c = CallRecord::for_tests("g", "x");
        c.exception = Some(Box::new(crate::records::ExceptionInfo {
            exception_type: i.val(&json!("ZeroDivisionError")),
            message: i.val(&json!("division by zéro")),
            traceback: i.val(&json!(
                "Traceback (most recent call last):\n  File \"app.py\""
            )),
            ..Default::default()
        }));
        let r = Record::Call(Arc::new(c));
        for needle in ["zerodivision", "DIVISION BY ZÉRO", "app.py"] {
            assert!(TextSearch::new(needle).matches(&r, &render), "{needle}");
        }
        assert!(!TextSearch::new("nothing").matches(&r, &render));
    }

    #[test]
    fn each_cid_is_rendered_once_per_search() {
        let mut i = Interner::default();
        let records: Vec<Record> = (0..50).map(|n| call(&mut i, n % 5, 0x2b)).collect();
        let render = Counting(Cell::new(0));
        let mut search = TextSearch::new("nowhere");
        assert!(!records.iter().any(|r| search.matches(r, &render)));
        // 5 distinct arguments, one keyword value, one result.
        assert_eq!((render.0.get(), search.rendered), (7, 7));
    }

    #[test]
    fn events_and_external_calls_are_searched_in_their_shown_values() {
        let mut i = Interner::default();
        let event = EventRecord {
            call_id: Val::Null,
            method: i.sym("with_debug.register"),
            status: i.sym("event"),
            pretty_args: i.val(&json!(["<Widget 7>"])),
            pretty_kwargs: i.val(&json!({"mode": "fast"})),
            signature: Val::Null,
            call_site: Default::default(),
            page_url: Val::Null,
            event_type: Val::Null,
            process: crate::records::Process {
                pid: 1,
                start_time: 1.0,
            },
            at: 1.0,
            result_cid: Val::Null,
            exception_cid: Val::Null,
            pretty_result: i.val(&json!({"function_name": "add"})),
            exception: Val::Null,
        };
        let r = Record::Event(Arc::new(event));
        let render = Counting(Cell::new(0));
        for (needle, found) in [
            ("widget 7", true),
            ("MODE", true),
            ("fast", true),
            ("add", true),
            ("slow", false),
        ] {
            assert_eq!(
                TextSearch::new(needle).matches(&r, &render),
                found,
                "{needle}"
            );
        }
        let ext = Record::Other(Arc::new(json!({
            "source": "mcp_client", "arguments": {"path": "/tmp/x"},
            "pretty_result": "hello", "error": {"code": "call_timeout", "message": "timed out"}
        })));
        for (needle, found) in [
            ("/TMP/x", true),
            ("hello", true),
            ("timed out", true),
            ("call_timeout", false),
        ] {
            assert_eq!(
                TextSearch::new(needle).matches(&ext, &render),
                found,
                "{needle}"
            );
        }
        assert_eq!(
            render.0.get(),
            0,
            "nothing of these is rendered from the store"
        );
    }
}
