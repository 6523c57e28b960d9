//! What the debugger did to a call: how it was let run (`Action`), who decided (`Actor`), and
//! what that changed (the arguments that ran, the replacement, the fake result, the raised
//! exception). A call record keeps one when anything decided about the call, so its history
//! says what actually ran, not only what the program asked for. Pure: no I/O, no locks.

use serde_json::{json, Map, Value};

use crate::intern::{Interner, Sym};
use crate::records::{Item, Render};

type Obj = Map<String, Value>;

/// How a call was let run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Ran with the arguments the program gave.
    Continue,
    /// Ran with other arguments.
    Modify,
    /// Did not run: a fake result was returned instead.
    Skip,
    /// Did not run: an exception was raised instead.
    Raise,
    /// Another function ran instead.
    Replace,
}

impl Action {
    pub const ALL: [Action; 5] = [
        Action::Continue,
        Action::Modify,
        Action::Skip,
        Action::Raise,
        Action::Replace,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Continue => "continue",
            Action::Modify => "modify",
            Action::Skip => "skip",
            Action::Raise => "raise",
            Action::Replace => "replace",
        }
    }

    pub fn parse(text: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == text)
    }
}

/// Who decided: the face a pause was resumed through, or the breakpoint itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    /// A page of the web UI (a browser request from an allowed origin).
    WebUi,
    /// The REST API (a request without a browser origin: curl, a script).
    Rest,
    /// An MCP agent (a `breakpoint_continue` tool call).
    Mcp,
    /// Continue all (REST, the web UI or `breakpoint_continue_all`).
    ContinueAll,
    /// The breakpoint's replacement function, applied without a pause.
    Breakpoint,
    /// A conditional breakpoint whose condition or hit condition did not hold: no pause.
    Condition,
    /// A logpoint: a line was logged instead of pausing.
    Logpoint,
    /// The pause limit of a browser origin (`limits::MAX_PAUSES_PER_ORIGIN`): the page that
    /// reported the call already had that many paused calls, so it ran without pausing.
    PauseLimit,
    /// A replay: the program was running a replayed call for the server (in the REPL relay of
    /// a paused call), and calls it makes meanwhile run without pausing.
    Replay,
}

impl Actor {
    pub const ALL: [Actor; 9] = [
        Actor::WebUi,
        Actor::Rest,
        Actor::Mcp,
        Actor::ContinueAll,
        Actor::Breakpoint,
        Actor::Condition,
        Actor::Logpoint,
        Actor::PauseLimit,
        Actor::Replay,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Actor::WebUi => "web_ui",
            Actor::Rest => "rest",
            Actor::Mcp => "mcp",
            Actor::ContinueAll => "continue_all",
            Actor::Breakpoint => "breakpoint",
            Actor::Condition => "condition",
            Actor::Logpoint => "logpoint",
            Actor::PauseLimit => "pause_limit",
            Actor::Replay => "replay",
        }
    }

    pub fn parse(text: &str) -> Option<Actor> {
        Actor::ALL.into_iter().find(|a| a.as_str() == text)
    }

    /// How a person reads it: "the web UI", "an MCP agent", ...
    pub fn describe(self) -> &'static str {
        match self {
            Actor::WebUi => "the web UI",
            Actor::Rest => "the REST API",
            Actor::Mcp => "an MCP agent",
            Actor::ContinueAll => "continue all",
            Actor::Breakpoint => "the breakpoint's replacement",
            Actor::Condition => "the breakpoint's condition",
            Actor::Logpoint => "a logpoint",
            Actor::PauseLimit => "the pause limit of its page's origin",
            Actor::Replay => "a replay",
        }
    }
}

/// What the debugger did to one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    pub action: Action,
    pub by: Actor,
    /// The pause it was resumed from (none when the breakpoint decided without pausing).
    pub pause_id: Option<Sym>,
    /// Server time of the decision.
    pub at: f64,
    /// `modify`: the positional and keyword arguments that ran, as items.
    pub args: Option<Box<[Item]>>,
    pub kwargs: Option<Box<[(Sym, Item)]>>,
    /// `replace`: the function that ran instead.
    pub replacement: Option<Sym>,
    /// `skip`: the fake result returned, as an item (none when it was sent only as data the
    /// server could not name, or not at all: the client then returns None).
    pub fake_result: Option<Item>,
    /// `raise`: the builtin exception raised, and its message.
    pub exception_type: Option<Sym>,
    pub exception_message: Option<Box<str>>,
}

impl Resolution {
    /// A decision with nothing changed but the action.
    pub fn new(action: Action, by: Actor, at: f64) -> Resolution {
        Resolution {
            action,
            by,
            pause_id: None,
            at,
            args: None,
            kwargs: None,
            replacement: None,
            fake_result: None,
            exception_type: None,
            exception_message: None,
        }
    }

    /// About how many bytes it keeps (see `Val::weight`).
    pub fn weight(&self) -> usize {
        std::mem::size_of::<Resolution>()
            + self.pause_id.as_ref().map_or(0, |s| s.len())
            + self
                .args
                .as_ref()
                .map_or(0, |a| a.iter().map(Item::weight).sum())
            + self.kwargs.as_ref().map_or(0, |k| {
                k.iter().map(|(n, v)| n.len() + v.weight()).sum::<usize>()
            })
            + self.replacement.as_ref().map_or(0, |s| s.len())
            + self.fake_result.as_ref().map_or(0, Item::weight)
            + self.exception_type.as_ref().map_or(0, |s| s.len())
            + self.exception_message.as_ref().map_or(0, |s| s.len())
    }

    /// The wire form: `{action, by, pause_id?, at, args?, kwargs?, pretty_args?,
    /// pretty_kwargs?, replacement_function?, fake_result?, pretty_fake_result?,
    /// exception_type?, exception_message?}`; the `pretty_*` values only with a `render`.
    pub fn to_json(&self, render: Option<&dyn Render>) -> Value {
        let mut m = Obj::new();
        m.insert("action".into(), json!(self.action.as_str()));
        m.insert("by".into(), json!(self.by.as_str()));
        if let Some(p) = &self.pause_id {
            m.insert("pause_id".into(), json!(&**p));
        }
        m.insert("at".into(), json!(self.at));
        if let Some(args) = &self.args {
            m.insert(
                "args".into(),
                Value::Array(args.iter().map(Item::to_value).collect()),
            );
            if let Some(r) = render {
                m.insert(
                    "pretty_args".into(),
                    Value::Array(args.iter().map(|a| r.item(a)).collect()),
                );
            }
        }
        if let Some(kwargs) = &self.kwargs {
            m.insert(
                "kwargs".into(),
                Value::Object(
                    kwargs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_value()))
                        .collect(),
                ),
            );
            if let Some(r) = render {
                m.insert(
                    "pretty_kwargs".into(),
                    Value::Object(
                        kwargs
                            .iter()
                            .map(|(k, v)| (k.to_string(), r.item(v)))
                            .collect(),
                    ),
                );
            }
        }
        if let Some(f) = &self.replacement {
            m.insert("replacement_function".into(), json!(&**f));
        }
        if let Some(item) = &self.fake_result {
            m.insert("fake_result".into(), item.to_value());
            if let Some(r) = render {
                m.insert("pretty_fake_result".into(), r.item(item));
            }
        }
        if let Some(t) = &self.exception_type {
            m.insert("exception_type".into(), json!(&**t));
        }
        if let Some(msg) = &self.exception_message {
            m.insert("exception_message".into(), json!(&**msg));
        }
        Value::Object(m)
    }

    /// Reads the wire form back (rendered values are ignored). `None` if it is not one.
    pub fn from_json(interner: &mut Interner, v: &Value) -> Option<Resolution> {
        let m = v.as_object()?;
        let action = Action::parse(m.get("action")?.as_str()?)?;
        let by = Actor::parse(m.get("by")?.as_str()?)?;
        let text = |k: &str| m.get(k).and_then(Value::as_str);
        Some(Resolution {
            action,
            by,
            pause_id: text("pause_id").map(Sym::new),
            at: m.get("at").and_then(Value::as_f64).unwrap_or(0.0),
            args: m
                .get("args")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|x| Item::parse(interner, x)).collect()),
            kwargs: m.get("kwargs").and_then(Value::as_object).map(|k| {
                k.iter()
                    .map(|(n, x)| (interner.sym(n), Item::parse(interner, x)))
                    .collect()
            }),
            replacement: text("replacement_function").map(|s| interner.sym(s)),
            fake_result: m.get("fake_result").map(|x| Item::parse(interner, x)),
            exception_type: text("exception_type").map(|s| interner.sym(s)),
            exception_message: text("exception_message").map(Into::into),
        })
    }

    /// One line for people: "modified through the REST API", "skipped by an MCP agent", ...
    pub fn summary(&self) -> String {
        let verb = match self.action {
            Action::Continue => "continued",
            Action::Modify => "ran with modified arguments",
            Action::Skip => "skipped (the function did not run)",
            Action::Raise => "raised instead of running",
            Action::Replace => "replaced",
        };
        let how = match self.by {
            Actor::Breakpoint | Actor::Condition | Actor::Logpoint | Actor::PauseLimit => "by",
            _ => "through",
        };
        format!("{verb} {how} {}", self.by.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(a));
        }
        for a in Actor::ALL {
            assert_eq!(Actor::parse(a.as_str()), Some(a));
        }
        assert_eq!(Action::parse("fly"), None);
        assert_eq!(Actor::parse(""), None);
    }

    #[test]
    fn the_stored_form_reads_back() {
        let mut i = Interner::default();
        let cid = "ab".repeat(64);
        let mut r = Resolution::new(Action::Modify, Actor::Mcp, 12.5);
        r.pause_id = Some(Sym::new("p1"));
        r.args = Some(vec![Item::parse(&mut i, &json!({"cid": cid}))].into());
        r.kwargs = Some(
            vec![(
                Sym::new("y"),
                Item::parse(&mut i, &json!({"cid": cid, "serialization_format": "dill"})),
            )]
            .into(),
        );
        let wire = r.to_json(None);
        assert_eq!(wire["action"], "modify");
        assert_eq!(wire["by"], "mcp");
        assert_eq!(wire["args"][0]["cid"], json!(cid));
        assert!(wire.get("pretty_args").is_none());
        assert_eq!(Resolution::from_json(&mut i, &wire), Some(r.clone()));
        let mut skip = Resolution::new(Action::Skip, Actor::WebUi, 1.0);
        skip.fake_result = Some(Item::parse(&mut i, &json!({"cid": cid})));
        skip.exception_message = Some("m".into());
        assert_eq!(
            Resolution::from_json(&mut i, &skip.to_json(None)),
            Some(skip)
        );
        assert_eq!(
            Resolution::from_json(&mut i, &json!({"action": "modify"})),
            None
        );
        assert_eq!(
            r.summary(),
            "ran with modified arguments through an MCP agent"
        );
    }
}
