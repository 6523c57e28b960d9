//! Conditional breakpoints at work: a call's arguments (and, once it returned, its result or
//! exception) are read back from the content store, decoded (JSON text, or a pickle through the
//! safe reader: nothing runs), and the breakpoint's condition and log message are evaluated on
//! them, outside the state lock. The decisions that count hits and pause are taken by
//! `calls.rs` under the lock, from the verdict made here.

use serde_json::Value;

use crate::breakpoints::Options;
use crate::condition::{self, Env, Outcome, PickleValue};
use crate::intern::Sym;
use crate::pickle::{self, Tree};
use crate::records::{Hint, Item};
use crate::state::Shared;
use crate::store::Format;

/// The result of a call that returned without a result payload.
static NONE: Value = Value::Null;

/// What the condition and log message say of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Whether the condition holds (`true` without one); the reason when it cannot be decided.
    pub holds: Result<bool, String>,
    /// The log message, formatted, when the breakpoint has one and the condition holds.
    pub log: Option<String>,
}

/// How a call ended, as its completion reports it.
pub struct Ending<'a> {
    /// The result's CID and format, when it returned one.
    pub result: Option<(&'a str, Hint)>,
    /// The exception's type name as reported (`ValueError`, `mymod.Error`), when it raised.
    pub exception_type: Option<&'a str>,
}

/// A decoded payload.
enum Decoded {
    Json(Value),
    Pickle(Tree),
    Unreadable(String),
}

impl Decoded {
    fn view(&self) -> condition::Item<'_> {
        match self {
            Decoded::Json(v) => condition::Item::Json(v),
            Decoded::Pickle(t) => condition::Item::Pickle(PickleValue::root(t)),
            Decoded::Unreadable(why) => condition::Item::Unreadable(why),
        }
    }
}

fn decode_cid(shared: &Shared, cid: &str, hint: Hint) -> Decoded {
    let blob = match shared.store.get(cid) {
        Ok(Some(b)) => b,
        Ok(None) => return Decoded::Unreadable("payload missing from the store".to_owned()),
        Err(e) => return Decoded::Unreadable(format!("storage unavailable: {e}")),
    };
    let format = match hint {
        Hint::Json => Some(Format::Json),
        Hint::Dill => Some(Format::Dill),
        Hint::Absent | Hint::Null => blob.format,
    };
    let as_json = || {
        serde_json::from_slice::<Value>(&blob.bytes)
            .ok()
            .map(Decoded::Json)
    };
    let as_pickle = || match pickle::decode(&blob.bytes, &pickle::Limits::default()) {
        Ok(tree) => Decoded::Pickle(tree),
        Err(e) => Decoded::Unreadable(format!("the pickle does not decode: {e}")),
    };
    match format {
        Some(Format::Json) => {
            as_json().unwrap_or_else(|| Decoded::Unreadable("the JSON does not parse".to_owned()))
        }
        Some(Format::Dill) => as_pickle(),
        // An unknown format tries JSON first, as the pretty values do.
        None => as_json().unwrap_or_else(as_pickle),
    }
}

fn decode_item(shared: &Shared, item: &Item) -> Decoded {
    match item {
        Item::Std { cid, format, .. } => decode_cid(shared, &cid.hex(), *format),
        Item::Other { .. } => Decoded::Unreadable("not an item with a CID".to_owned()),
    }
}

/// Evaluates `options`' condition and log message on a call: before it runs (`ending` is
/// `None`) or once it ended.
pub fn judge(
    shared: &Shared,
    options: &Options,
    args: &[Item],
    kwargs: &[(Sym, Item)],
    ending: Option<&Ending<'_>>,
) -> Verdict {
    let args: Vec<Decoded> = args.iter().map(|a| decode_item(shared, a)).collect();
    let kwargs: Vec<(String, Decoded)> = kwargs
        .iter()
        .map(|(k, v)| (k.to_string(), decode_item(shared, v)))
        .collect();
    let result = ending
        .and_then(|e| e.result)
        .map(|(cid, hint)| decode_cid(shared, cid, hint));
    let outcome = match ending {
        None => Outcome::Pending,
        Some(Ending {
            exception_type: Some(t),
            ..
        }) => Outcome::Raised(short_type_name(t).to_owned()),
        Some(_) => match &result {
            Some(r) => Outcome::Returned(r.view()),
            None => Outcome::Returned(condition::Item::Json(&NONE)),
        },
    };
    let env = Env {
        args: Some(args.iter().map(Decoded::view).collect()),
        kwargs: Some(kwargs.iter().map(|(k, v)| (k.clone(), v.view())).collect()),
        outcome,
    };
    let holds = match &options.condition {
        None => Ok(true),
        Some(c) => condition::eval(&c.expr, &env).map_err(|e| e.message),
    };
    let log = match (&options.log_message, &holds) {
        (Some(m), Ok(true)) => Some(m.template.render(&env)),
        _ => None,
    };
    Verdict { holds, log }
}

/// `ValueError` of `ValueError` and of `builtins.ValueError`, `Error` of `mymod.Error`: what
/// `exception == "..."` compares with.
fn short_type_name(t: &str) -> &str {
    t.rsplit('.').next().unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exception_names_compare_by_their_last_component() {
        assert_eq!(short_type_name("ValueError"), "ValueError");
        assert_eq!(short_type_name("mymod.sub.Error"), "Error");
    }
}
