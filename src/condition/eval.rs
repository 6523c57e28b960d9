//! The evaluator: an expression's value from a call's environment, within a budget of steps.

use super::*;

/// How the call ended, as far as the condition can see.
#[derive(Debug, Clone)]
pub enum Outcome<V> {
    /// Not yet (a condition before the call): `result` and `exception` cannot be read.
    Pending,
    /// It returned this value (`exception` is `None`).
    Returned(V),
    /// It raised an exception of this type name (`result` is `None`).
    Raised(String),
}

/// What a condition reads.
#[derive(Debug, Clone)]
pub struct Env<V> {
    /// The positional arguments, if known.
    pub args: Option<Vec<V>>,
    /// The keyword arguments, if known.
    pub kwargs: Option<Vec<(String, V)>>,
    /// How the call ended.
    pub outcome: Outcome<V>,
}

/// Why a condition could not be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// What went wrong, naming the sub-expression, e.g. ``args[0].x: no attribute 'x' on int``.
    pub message: String,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for EvalError {}

pub(super) fn fail<T>(e: &Expr, what: impl fmt::Display) -> Result<T, EvalError> {
    let mut text = e.to_string();
    if text.len() > 200 {
        let cut = (0..=200)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    Err(EvalError {
        message: format!("{text}: {what}"),
    })
}

/// A value met during evaluation.
#[derive(Debug, Clone)]
pub(super) enum Val<V> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A container or instance of the environment.
    Host(V),
    Args,
    Kwargs,
}

#[derive(Clone, Copy)]
pub(super) enum Num {
    I(i64),
    F(f64),
}

impl<V: CondValue> Val<V> {
    /// An int beyond 64 bits, which arithmetic and ordering cannot use.
    fn is_big_int(&self) -> bool {
        matches!(self, Val::Host(h) if h.kind() == Kind::Int)
    }

    fn type_name(&self) -> String {
        match self {
            Val::None => "NoneType".to_owned(),
            Val::Bool(_) => "bool".to_owned(),
            Val::Int(_) => "int".to_owned(),
            Val::Float(_) => "float".to_owned(),
            Val::Str(_) => "str".to_owned(),
            Val::Host(v) => v.type_name(),
            Val::Args => "tuple".to_owned(),
            Val::Kwargs => "dict".to_owned(),
        }
    }

    fn num(&self) -> Option<Num> {
        match self {
            Val::Bool(b) => Some(Num::I(i64::from(*b))),
            Val::Int(n) => Some(Num::I(*n)),
            Val::Float(x) => Some(Num::F(*x)),
            _ => None,
        }
    }
}

/// `name[key]`, the expression that reads an element of `args` or `kwargs`.
pub(super) fn element_expr(name: Name, key: Expr) -> Expr {
    Expr::Index(Box::new(Expr::Name(name)), Box::new(key))
}

/// A host value as a scalar when it is one. Every host value the evaluator reads comes
/// through here, so this is where a value that could not be read fails the evaluation.
pub(super) fn lift<V: CondValue>(e: &Expr, v: V) -> Result<Val<V>, EvalError> {
    if let Some(why) = v.unreadable() {
        return fail(
            e,
            format!(
                "unreadable value ({})",
                cut_text(&why, LOG_VALUE_CHARS, false)
            ),
        );
    }
    let unreadable = |what: &str| fail(e, format!("unreadable {what} value"));
    Ok(match v.kind() {
        Kind::None => Val::None,
        Kind::Bool => match v.to_bool() {
            Some(b) => Val::Bool(b),
            None => return unreadable("bool"),
        },
        // An int beyond 64 bits stays a host value: its type and truth can be read.
        Kind::Int => match v.to_int() {
            Some(n) => Val::Int(n),
            None => Val::Host(v),
        },
        Kind::Float => match v.to_float() {
            Some(x) => Val::Float(x),
            None => return unreadable("float"),
        },
        Kind::Str => match v.to_str() {
            Some(s) => Val::Str(s),
            None => return unreadable("str"),
        },
        _ => Val::Host(v),
    })
}

pub(super) fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // 2^63: every i64 is below it, and at least -2^63.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f >= TWO_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_63 {
        return Some(Ordering::Greater);
    }
    let t = f.trunc();
    Some(i.cmp(&(t as i64)).then_with(|| {
        if f > t {
            Ordering::Less
        } else if f < t {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }))
}

pub(super) fn cmp_num(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
        (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
        (Num::I(x), Num::F(y)) => cmp_int_float(x, y),
        (Num::F(x), Num::I(y)) => cmp_int_float(y, x).map(Ordering::reverse),
    }
}

/// Evaluates a condition with the default step budget ([`CONDITION_STEPS`]): its value's truth.
pub fn eval<V: CondValue>(expr: &Expr, env: &Env<V>) -> Result<bool, EvalError> {
    eval_with_budget(expr, env, CONDITION_STEPS)
}

/// Evaluates a condition within `steps` steps.
pub fn eval_with_budget<V: CondValue>(
    expr: &Expr,
    env: &Env<V>,
    steps: usize,
) -> Result<bool, EvalError> {
    let mut ev = Evaluator { env, steps };
    let v = ev.eval(expr)?;
    ev.truth(expr, &v)
}

/// The value of an expression as text, as a Python f-string's `{expr}` shows it: `None`,
/// `True`, `42`, floats as Python prints them, a str as its own text, `args` as a tuple
/// (`(1, 'a')`) and `kwargs` as a dict (`{'x': 1}`) of their elements' reprs, and any other
/// value of the call through [`CondValue::display`]. At most [`LOG_VALUE_CHARS`] characters,
/// then `...`. Within the step budget of [`eval`] ([`CONDITION_STEPS`]), each element shown of
/// `args` or `kwargs` costing a step.
pub fn eval_text<V: CondValue>(expr: &Expr, env: &Env<V>) -> Result<String, EvalError> {
    let mut ev = Evaluator {
        env,
        steps: CONDITION_STEPS,
    };
    let v = ev.eval(expr)?;
    ev.text(expr, &v)
}

pub(super) struct Evaluator<'e, V> {
    pub(super) env: &'e Env<V>,
    pub(super) steps: usize,
}

impl<V: CondValue> Evaluator<'_, V> {
    fn step(&mut self, e: &Expr) -> Result<(), EvalError> {
        if self.steps == 0 {
            return fail(e, "evaluation step budget spent");
        }
        self.steps -= 1;
        Ok(())
    }

    /// A value of the call read as a scalar. A string is copied out of its payload: it costs a
    /// step per [`STR_BYTES_PER_STEP`] bytes, so that the budget bounds the bytes an evaluation
    /// copies and keeps as well as its steps.
    fn lift(&mut self, e: &Expr, v: V) -> Result<Val<V>, EvalError> {
        let v = lift(e, v)?;
        self.charge_text(e, &v)?;
        Ok(v)
    }

    /// Charges a string made or copied by the evaluation (see [`Evaluator::lift`]).
    fn charge_text(&mut self, e: &Expr, v: &Val<V>) -> Result<(), EvalError> {
        if let Val::Str(s) = v {
            let cost = s.len() / STR_BYTES_PER_STEP;
            if cost > self.steps {
                return fail(
                    e,
                    format!(
                        "a string of {} bytes: evaluation step budget spent",
                        s.len()
                    ),
                );
            }
            self.steps -= cost;
        }
        Ok(())
    }

    /// `v` as `str(v)` shows it, cut at [`LOG_VALUE_CHARS`] characters.
    pub(super) fn text(&mut self, e: &Expr, v: &Val<V>) -> Result<String, EvalError> {
        Ok(match v {
            Val::None => "None".to_owned(),
            Val::Bool(true) => "True".to_owned(),
            Val::Bool(false) => "False".to_owned(),
            Val::Int(n) => n.to_string(),
            Val::Float(x) => float_repr(*x),
            Val::Str(s) => cut_text(s, LOG_VALUE_CHARS, false),
            Val::Host(h) => h.display(),
            Val::Args => {
                let env = self.env;
                let args = env.args.as_deref().unwrap_or_default();
                let close = if args.len() == 1 { ",)" } else { ")" };
                let items = args.iter().enumerate().map(|(i, a)| {
                    let i = Expr::Int(i64::try_from(i).unwrap_or(i64::MAX));
                    (None, element_expr(Name::Args, i), a)
                });
                self.elements(e, "(", close, items)?
            }
            Val::Kwargs => {
                let env = self.env;
                let kwargs = env.kwargs.as_deref().unwrap_or_default();
                let items = kwargs.iter().map(|(k, a)| {
                    let key = Expr::Str(k.clone());
                    (Some(k.as_str()), element_expr(Name::Kwargs, key), a)
                });
                self.elements(e, "{", "}", items)?
            }
        })
    }

    /// The elements of `args` or `kwargs` between `open` and `close`, each as `repr` shows it
    /// after its key if any, and each read as the expression given with it (`args[1]`) and
    /// costing a step; cut at [`LOG_VALUE_CHARS`] characters, and none read past the cut.
    fn elements<'a>(
        &mut self,
        e: &Expr,
        open: &str,
        close: &str,
        items: impl Iterator<Item = (Option<&'a str>, Expr, &'a V)>,
    ) -> Result<String, EvalError>
    where
        V: 'a,
    {
        let mut out = String::from(open);
        let mut chars = open.chars().count();
        for (i, (key, at, x)) in items.enumerate() {
            if chars > LOG_VALUE_CHARS {
                return Ok(cut_text(&out, LOG_VALUE_CHARS, true));
            }
            self.step(e)?;
            let x = self.lift(&at, x.clone())?;
            let mut part = String::new();
            if i > 0 {
                part.push_str(", ");
            }
            if let Some(k) = key {
                part.push_str(&str_repr(k));
                part.push_str(": ");
            }
            part.push_str(&self.repr(&at, &x)?);
            chars += part.chars().count();
            out.push_str(&part);
        }
        out.push_str(close);
        Ok(cut_text(&out, LOG_VALUE_CHARS, false))
    }

    /// `v` as `repr(v)` shows it (a str quoted), as an element of `args` or `kwargs`.
    fn repr(&mut self, e: &Expr, v: &Val<V>) -> Result<String, EvalError> {
        match v {
            Val::Str(s) => Ok(str_repr(s)),
            _ => self.text(e, v),
        }
    }

    fn length(&self, e: &Expr, v: &Val<V>) -> Result<usize, EvalError> {
        let n = match v {
            Val::Str(s) => Some(s.chars().count()),
            Val::Host(h) => h.length(),
            Val::Args => self.env.args.as_ref().map(Vec::len),
            Val::Kwargs => self.env.kwargs.as_ref().map(Vec::len),
            _ => None,
        };
        match n {
            Some(n) => Ok(n),
            None => fail(
                e,
                format!("object of type '{}' has no len()", v.type_name()),
            ),
        }
    }

    fn truth(&self, e: &Expr, v: &Val<V>) -> Result<bool, EvalError> {
        Ok(match v {
            Val::None => false,
            Val::Bool(b) => *b,
            Val::Int(n) => *n != 0,
            Val::Float(x) => *x != 0.0,
            Val::Str(s) => !s.is_empty(),
            Val::Host(h) if h.kind() == Kind::Int => true,
            Val::Host(h) if h.kind() == Kind::Object && h.length().is_none() => true,
            _ => self.length(e, v)? > 0,
        })
    }

    fn name(&mut self, e: &Expr, n: Name) -> Result<Val<V>, EvalError> {
        match (n, &self.env.outcome) {
            (Name::Args, _) if self.env.args.is_some() => Ok(Val::Args),
            (Name::Kwargs, _) if self.env.kwargs.is_some() => Ok(Val::Kwargs),
            (Name::Args | Name::Kwargs, _) => fail(e, "not available for this call"),
            (Name::Result | Name::Exception, Outcome::Pending) => {
                fail(e, "not available before the call returns")
            }
            (Name::Result, Outcome::Returned(v)) => self.lift(e, v.clone()),
            (Name::Result, Outcome::Raised(_)) | (Name::Exception, Outcome::Returned(_)) => {
                Ok(Val::None)
            }
            (Name::Exception, Outcome::Raised(t)) => Ok(Val::Str(t.clone())),
        }
    }

    pub(super) fn eval(&mut self, e: &Expr) -> Result<Val<V>, EvalError> {
        self.step(e)?;
        match e {
            Expr::None => Ok(Val::None),
            Expr::Bool(b) => Ok(Val::Bool(*b)),
            Expr::Int(n) => Ok(Val::Int(*n)),
            Expr::Float(x) => Ok(Val::Float(*x)),
            Expr::Str(s) => Ok(Val::Str(s.clone())),
            Expr::Name(n) => self.name(e, *n),
            Expr::Attr(x, name) => {
                let v = self.eval(x)?;
                let found = match &v {
                    Val::Host(h) => h.attr(name),
                    _ => None,
                };
                match found {
                    Some(h) => self.lift(e, h),
                    None => fail(e, format!("no attribute '{name}' on {}", v.type_name())),
                }
            }
            Expr::Index(x, k) => {
                let v = self.eval(x)?;
                let k = self.eval(k)?;
                self.index(e, v, k)
            }
            Expr::Call(func, x) => {
                let v = self.eval(x)?;
                match func {
                    Func::Len => {
                        let n = self.length(e, &v)?;
                        Ok(Val::Int(i64::try_from(n).unwrap_or(i64::MAX)))
                    }
                    Func::Type => Ok(Val::Str(v.type_name())),
                    Func::Abs => match v.num() {
                        Some(Num::I(n)) => match n.checked_abs() {
                            Some(a) => Ok(Val::Int(a)),
                            None => fail(e, "integer overflow"),
                        },
                        Some(Num::F(x)) => Ok(Val::Float(x.abs())),
                        None if v.is_big_int() => fail(e, BIG_INT),
                        None => fail(
                            e,
                            format!("bad operand type for abs(): '{}'", v.type_name()),
                        ),
                    },
                }
            }
            Expr::Method(x, m, a) => {
                let v = self.eval(x)?;
                let a = self.eval(a)?;
                let (Val::Str(s), Val::Str(p)) = (&v, &a) else {
                    return fail(
                        e,
                        format!(
                            "{}() needs a str and a str argument, not {} and {}",
                            m.text(),
                            v.type_name(),
                            a.type_name()
                        ),
                    );
                };
                Ok(Val::Bool(match m {
                    Method::StartsWith => s.starts_with(p.as_str()),
                    Method::EndsWith => s.ends_with(p.as_str()),
                    Method::Contains => s.contains(p.as_str()),
                }))
            }
            Expr::Neg(x) => {
                let v = self.eval(x)?;
                match v.num() {
                    Some(Num::I(n)) => match n.checked_neg() {
                        Some(m) => Ok(Val::Int(m)),
                        None => fail(e, "integer overflow"),
                    },
                    Some(Num::F(x)) => Ok(Val::Float(-x)),
                    None if v.is_big_int() => fail(e, BIG_INT),
                    None => fail(
                        e,
                        format!("bad operand type for unary -: '{}'", v.type_name()),
                    ),
                }
            }
            Expr::Not(x) => {
                let v = self.eval(x)?;
                Ok(Val::Bool(!self.truth(x, &v)?))
            }
            Expr::And(a, b) => {
                let v = self.eval(a)?;
                if self.truth(a, &v)? {
                    self.eval(b)
                } else {
                    Ok(v)
                }
            }
            Expr::Or(a, b) => {
                let v = self.eval(a)?;
                if self.truth(a, &v)? {
                    Ok(v)
                } else {
                    self.eval(b)
                }
            }
            Expr::Arith(op, a, b) => {
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                let v = arith(e, *op, &x, &y)?;
                self.charge_text(e, &v)?;
                Ok(v)
            }
            Expr::Compare(first, rest) => {
                let mut left = self.eval(first)?;
                for (op, x) in rest {
                    let right = self.eval(x)?;
                    if !self.compare(e, *op, &left, &right)? {
                        return Ok(Val::Bool(false));
                    }
                    left = right;
                }
                Ok(Val::Bool(true))
            }
        }
    }

    fn index(&mut self, e: &Expr, v: Val<V>, k: Val<V>) -> Result<Val<V>, EvalError> {
        let position = |n: usize| -> Result<usize, EvalError> {
            let Some(Num::I(i)) = (match &k {
                Val::Int(_) | Val::Bool(_) => k.num(),
                _ => None,
            }) else {
                return fail(
                    e,
                    format!(
                        "{} indices must be integers, not {}",
                        v.type_name(),
                        k.type_name()
                    ),
                );
            };
            let j = if i < 0 {
                i.checked_add(n as i64)
            } else {
                Some(i)
            };
            match j.and_then(|j| usize::try_from(j).ok()).filter(|&j| j < n) {
                Some(j) => Ok(j),
                None => fail(e, format!("index {i} out of range (length {n})")),
            }
        };
        let key_text = || match &k {
            Val::Str(s) => format!("{s:?}"),
            Val::Int(n) => n.to_string(),
            _ => k.type_name(),
        };
        match &v {
            Val::Args => {
                let args = self.env.args.as_deref().unwrap_or_default();
                let j = position(args.len())?;
                self.lift(e, args[j].clone())
            }
            Val::Kwargs => {
                let Val::Str(s) = &k else {
                    return fail(e, format!("no key {} in kwargs", key_text()));
                };
                let kwargs = self.env.kwargs.as_deref().unwrap_or_default();
                match kwargs.iter().rev().find(|(n, _)| n == s) {
                    Some((_, x)) => self.lift(e, x.clone()),
                    None => fail(e, format!("no key {} in kwargs", key_text())),
                }
            }
            Val::Str(s) => {
                let j = position(s.chars().count())?;
                Ok(Val::Str(
                    s.chars().nth(j).map(String::from).unwrap_or_default(),
                ))
            }
            Val::Host(h) => match h.kind() {
                Kind::List | Kind::Tuple => {
                    let j = position(h.length().unwrap_or(0))?;
                    match h.element(j) {
                        Some(x) => self.lift(e, x),
                        None => fail(e, "unreadable element"),
                    }
                }
                Kind::Dict | Kind::Object => {
                    let key = match &k {
                        Val::Str(s) => Some(Key::Str(s)),
                        Val::Int(n) => Some(Key::Int(*n)),
                        Val::Bool(b) => Some(Key::Int(i64::from(*b))),
                        _ => None,
                    };
                    match key.and_then(|key| h.key(key)) {
                        Some(x) => self.lift(e, x),
                        None => fail(e, format!("no key {}", key_text())),
                    }
                }
                _ => fail(
                    e,
                    format!("'{}' object is not subscriptable", h.type_name()),
                ),
            },
            _ => fail(
                e,
                format!("'{}' object is not subscriptable", v.type_name()),
            ),
        }
    }

    fn equal(&self, e: &Expr, a: &Val<V>, b: &Val<V>) -> Result<bool, EvalError> {
        if let (Some(x), Some(y)) = (a.num(), b.num()) {
            return Ok(cmp_num(x, y) == Some(Ordering::Equal));
        }
        match (a, b) {
            (Val::None, Val::None) => Ok(true),
            (Val::Str(x), Val::Str(y)) => Ok(x == y),
            (Val::Host(_) | Val::Args | Val::Kwargs, Val::Host(_) | Val::Args | Val::Kwargs) => {
                fail(
                    e,
                    format!(
                        "comparing {} with {} is not supported (compare their parts)",
                        a.type_name(),
                        b.type_name()
                    ),
                )
            }
            _ => Ok(false),
        }
    }

    fn contains(&mut self, e: &Expr, item: &Val<V>, c: &Val<V>) -> Result<bool, EvalError> {
        let unsupported = || {
            fail(
                e,
                format!(
                    "'in <{}>' needs a matching left operand, not {}",
                    c.type_name(),
                    item.type_name()
                ),
            )
        };
        match c {
            Val::Str(s) => match item {
                Val::Str(p) => Ok(s.contains(p.as_str())),
                _ => unsupported(),
            },
            Val::Args => {
                let args = self.env.args.as_deref().unwrap_or_default();
                for a in args {
                    self.step(e)?;
                    let a = self.lift(e, a.clone())?;
                    if self.equal(e, item, &a)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Val::Kwargs => match item {
                Val::Str(s) => Ok(self
                    .env
                    .kwargs
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|(n, _)| n == s)),
                _ => Ok(false),
            },
            Val::Host(h) => match h.kind() {
                Kind::List | Kind::Tuple | Kind::Set => {
                    for i in 0..h.length().unwrap_or(0) {
                        self.step(e)?;
                        let Some(x) = h.element(i) else {
                            return fail(e, "unreadable element");
                        };
                        let x = self.lift(e, x)?;
                        if self.equal(e, item, &x)? {
                            return Ok(true);
                        }
                    }
                    Ok(false)
                }
                Kind::Dict => Ok(match item {
                    Val::Str(s) => h.key(Key::Str(s)).is_some(),
                    Val::Int(n) => h.key(Key::Int(*n)).is_some(),
                    Val::Bool(b) => h.key(Key::Int(i64::from(*b))).is_some(),
                    _ => false,
                }),
                _ => fail(
                    e,
                    format!("argument of type '{}' is not iterable", h.type_name()),
                ),
            },
            _ => fail(
                e,
                format!("argument of type '{}' is not iterable", c.type_name()),
            ),
        }
    }

    fn compare(&mut self, e: &Expr, op: CmpOp, a: &Val<V>, b: &Val<V>) -> Result<bool, EvalError> {
        let order = |o: Option<Ordering>| -> Result<bool, EvalError> {
            let Some(o) = o else {
                return Ok(false);
            };
            Ok(match op {
                CmpOp::Lt => o.is_lt(),
                CmpOp::Le => o.is_le(),
                CmpOp::Gt => o.is_gt(),
                _ => o.is_ge(),
            })
        };
        match op {
            CmpOp::Eq => self.equal(e, a, b),
            CmpOp::Ne => Ok(!self.equal(e, a, b)?),
            CmpOp::In => self.contains(e, a, b),
            CmpOp::NotIn => Ok(!self.contains(e, a, b)?),
            CmpOp::Is | CmpOp::IsNot => {
                let same = match (a, b) {
                    (Val::None, Val::None) => true,
                    (Val::Bool(x), Val::Bool(y)) => x == y,
                    _ => false,
                };
                Ok(same == (op == CmpOp::Is))
            }
            CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                if let (Some(x), Some(y)) = (a.num(), b.num()) {
                    return order(cmp_num(x, y));
                }
                if let (Val::Str(x), Val::Str(y)) = (a, b) {
                    return order(Some(x.cmp(y)));
                }
                if a.is_big_int() || b.is_big_int() {
                    return fail(e, BIG_INT);
                }
                fail(
                    e,
                    format!(
                        "'{}' not supported between {} and {}",
                        op.text(),
                        a.type_name(),
                        b.type_name()
                    ),
                )
            }
        }
    }
}

pub(super) fn arith<V: CondValue>(
    e: &Expr,
    op: ArithOp,
    a: &Val<V>,
    b: &Val<V>,
) -> Result<Val<V>, EvalError> {
    if let (ArithOp::Add, Val::Str(x), Val::Str(y)) = (op, a, b) {
        return Ok(Val::Str(format!("{x}{y}")));
    }
    let (Some(x), Some(y)) = (a.num(), b.num()) else {
        if a.is_big_int() || b.is_big_int() {
            return fail(e, BIG_INT);
        }
        return fail(
            e,
            format!(
                "unsupported operand types for {}: {} and {}",
                op.text(),
                a.type_name(),
                b.type_name()
            ),
        );
    };
    let zero = matches!(y, Num::I(0)) || matches!(y, Num::F(z) if z == 0.0);
    if zero && matches!(op, ArithOp::Div | ArithOp::FloorDiv | ArithOp::Mod) {
        return fail(e, "division by zero");
    }
    if let (Num::I(x), Num::I(y)) = (x, y) {
        let r = match op {
            ArithOp::Add => x.checked_add(y),
            ArithOp::Sub => x.checked_sub(y),
            ArithOp::Mul => x.checked_mul(y),
            ArithOp::Div => return Ok(Val::Float(x as f64 / y as f64)),
            // Python floors the quotient; Rust truncates it.
            ArithOp::FloorDiv => x.checked_div(y).map(|q| {
                if x % y != 0 && (x < 0) != (y < 0) {
                    q - 1
                } else {
                    q
                }
            }),
            ArithOp::Mod => x.checked_rem(y).map(|r| {
                if r != 0 && (r < 0) != (y < 0) {
                    r + y
                } else {
                    r
                }
            }),
        };
        return match r {
            Some(r) => Ok(Val::Int(r)),
            None => fail(e, "integer overflow"),
        };
    }
    let f = |n: Num| match n {
        Num::I(i) => i as f64,
        Num::F(x) => x,
    };
    let (x, y) = (f(x), f(y));
    Ok(Val::Float(match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div => x / y,
        ArithOp::FloorDiv => (x / y).floor(),
        ArithOp::Mod => {
            let r = x % y;
            if r != 0.0 && (r < 0.0) != (y < 0.0) {
                r + y
            } else {
                r
            }
        }
    }))
}
