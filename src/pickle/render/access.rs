//! Checked reads of a [`Tree`]: globals, items, dict pairs, names, ints, callees, class
//! descriptions, exception args, code objects, bytes.

use super::*;

/// `(module, name)` of a `Global` node.
pub fn global_name(t: &Tree, id: NodeId) -> Option<(&str, &str)> {
    t.global_of(id).map(|g| (&*g.module, &*g.name))
}

/// The elements of a tuple (or list) node, empty otherwise.
pub fn items(t: &Tree, id: NodeId) -> &[NodeId] {
    t.seq_of(id).unwrap_or(&[])
}

/// The pairs of a dict node.
pub fn dict_pairs(t: &Tree, id: NodeId) -> &[(NodeId, NodeId)] {
    match t.get(id) {
        Some(Node::Dict(d)) => d,
        _ => &[],
    }
}

/// The value under a str key in a dict node (the last pair with that key, as Python keeps).
/// Larger dicts are scanned once per tree for all of [`KEYS`] ([`Lookups`]).
pub fn dict_get(t: &Tree, id: NodeId, key: &'static str) -> Option<NodeId> {
    let pairs = dict_pairs(t, id);
    let slot = KEYS.iter().position(|&k| k == key);
    let (Some(slot), true) = (slot, pairs.len() > SCAN_PAIRS) else {
        return pairs
            .iter()
            .rev()
            .find(|(k, _)| matches!(t.get(*k), Some(Node::Str(s)) if &**s == key.as_bytes()))
            .map(|&(_, v)| v);
    };
    if let Some(index) = t.lookups.keys.borrow().get(&id) {
        return index[slot];
    }
    let mut index = Box::new([None; KEYS.len()]);
    for &(k, v) in pairs {
        if let Some(Node::Str(s)) = t.get(k) {
            if let Some(j) = KEYS.iter().position(|&known| known.as_bytes() == &**s) {
                index[j] = Some(v);
            }
        }
    }
    let found = index[slot];
    t.lookups.keys.borrow_mut().insert(id, index);
    found
}

/// A str node as a shared name (converted once per tree), `None` for other nodes or once the
/// lookups are out of room.
pub(super) fn name_of(t: &Tree, id: NodeId) -> Option<Rc<str>> {
    let Some(Node::Str(b)) = t.get(id) else {
        return None;
    };
    if let Some(name) = t.lookups.names.borrow().get(&id) {
        return Some(name.clone());
    }
    if !t.lookups.take(b.len() + 48) {
        return None;
    }
    let name: Rc<str> = Rc::from(text::lossy(b));
    t.lookups.names.borrow_mut().insert(id, name.clone());
    Some(name)
}

/// An int value (ints and bools).
pub fn int_of(t: &Tree, id: NodeId) -> Option<i64> {
    match t.get(id)? {
        Node::Int(v) => Some(*v),
        Node::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

/// `(module, name)` of the callable of an object, when it is a known global (or a builtin type
/// named through `dill._dill._load_type`).
pub fn callee(t: &Tree, o: &Object) -> Option<(&'static str, &'static str)> {
    callee_at(t, o, 4)
}

pub(super) fn callee_at(
    t: &Tree,
    o: &Object,
    depth: usize,
) -> Option<(&'static str, &'static str)> {
    let find = |m: &str, n: &str| KNOWN.iter().copied().find(|&(km, kn)| km == m && kn == n);
    if let Some((m, n)) = global_name(t, o.callable) {
        return find(m, n);
    }
    let ti = type_info(t, o.callable, depth.saturating_sub(1))?;
    if ti.by_value || &*ti.module != "builtins" {
        return None;
    }
    find("builtins", &ti.qualname)
}

/// Globals the renderer gives a meaning to.
pub(super) const KNOWN: &[(&str, &str)] = &[
    (
        "cideldill_client.custom_picklers",
        "_reconstruct_placeholder",
    ),
    ("dill._dill", "_load_type"),
    ("dill._dill", "_create_type"),
    ("dill._dill", "_create_function"),
    ("dill._dill", "_create_code"),
    ("dill._dill", "_create_cell"),
    ("dill._dill", "_import_module"),
    ("dill._dill", "_get_attr"),
    ("dill._dill", "_eval_repr"),
    ("builtins", "getattr"),
    ("copyreg", "_reconstructor"),
    ("copyreg", "__newobj__"),
    ("_codecs", "encode"),
    ("builtins", "bytes"),
    ("builtins", "bytearray"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("builtins", "range"),
    ("builtins", "slice"),
    ("builtins", "object"),
    ("builtins", "list"),
    ("builtins", "tuple"),
    ("builtins", "dict"),
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("decimal", "Decimal"),
    ("fractions", "Fraction"),
    ("uuid", "UUID"),
    ("collections", "OrderedDict"),
    ("collections", "defaultdict"),
    ("collections", "deque"),
    ("collections", "Counter"),
    ("re", "RegexFlag"),
    ("re", "_compile"),
    ("http", "HTTPStatus"),
    ("pathlib", "PurePosixPath"),
    ("pathlib", "PureWindowsPath"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("pathlib", "PurePath"),
    ("pathlib", "Path"),
];

/// The class a node denotes, if it denotes one (bounded by `depth` levels of bases). Memoized
/// per tree and depth ([`Lookups`]), so shared classes and bases cost one examination each;
/// `None` for a class found once the lookups are out of room.
pub fn type_info(t: &Tree, id: NodeId, depth: usize) -> Option<TypeInfo> {
    match t.get(id) {
        _ if depth == 0 => return None,
        // A global with short names costs less to describe than to look up.
        Some(Node::Global(g)) if g.module.len() + g.name.len() <= SHORT_GLOBAL => {
            return type_info_uncached(t, id, depth);
        }
        Some(Node::Global(_) | Node::Object(_)) => {}
        _ => return None,
    }
    let key = (id, u8::try_from(depth).unwrap_or(u8::MAX));
    let cached = t.lookups.types.borrow().get(&key).cloned();
    if let Some(found) = cached {
        return found;
    }
    if !t.lookups.take(TYPE_ENTRY_COST) {
        return None;
    }
    let found = type_info_uncached(t, id, depth);
    // Names are charged as often as classes hold them: a long name shared by many classes
    // soon fills the room.
    if let Some(ti) = &found {
        if !t.lookups.take(ti.module.len() + ti.qualname.len()) {
            return None;
        }
    }
    t.lookups.types.borrow_mut().insert(key, found.clone());
    found
}

pub(super) fn type_info_uncached(t: &Tree, id: NodeId, depth: usize) -> Option<TypeInfo> {
    match t.get(id)? {
        Node::Global(g) => {
            let exception = if g.module.as_ref() == "builtins" {
                EXCEPTIONS.contains(&&*g.name)
            } else {
                let last = g.name.rsplit('.').next().unwrap_or(&g.name);
                last.starts_with(char::is_uppercase)
                    && ["Error", "Exception", "Warning"]
                        .iter()
                        .any(|x| last.ends_with(x))
            };
            Some(TypeInfo {
                module: Rc::from(&*g.module),
                qualname: Rc::from(&*g.name),
                exception,
                enum_class: false,
                by_value: false,
            })
        }
        Node::Object(o) => match callee_at(t, o, depth - 1)? {
            ("dill._dill", "_load_type") => {
                let name = name_of(t, *items(t, o.args).first()?)?;
                let (module, qualname) = match DILL_TYPES.iter().find(|(n, _, _)| **n == *name) {
                    Some(&(_, m, q)) => (Rc::from(m), Rc::from(q)),
                    None => (Rc::from("builtins"), name.clone()),
                };
                Some(TypeInfo {
                    exception: EXCEPTIONS.contains(&&*name),
                    module,
                    qualname,
                    enum_class: false,
                    by_value: false,
                })
            }
            ("dill._dill", "_create_type") => {
                let a = items(t, o.args);
                let meta = *a.first()?;
                let name = name_of(t, *a.get(1)?)?;
                let bases = a.get(2).map(|&b| items(t, b)).unwrap_or(&[]);
                let dict = a.get(3).copied();
                let module = dict
                    .and_then(|d| dict_get(t, d, "__module__"))
                    .and_then(|m| name_of(t, m))
                    .unwrap_or_else(|| Rc::from("__main__"));
                let qualname = dict
                    .and_then(|d| dict_get(t, d, "__qualname__"))
                    .and_then(|m| name_of(t, m))
                    .unwrap_or(name);
                let meta_enum = global_name(t, meta)
                    .is_some_and(|(m, n)| m == "enum" && (n == "EnumMeta" || n == "EnumType"));
                let (mut exception, mut enum_class) = (false, meta_enum);
                for &b in bases {
                    let Some(b) = type_info(t, b, depth - 1) else {
                        continue;
                    };
                    exception |= b.exception;
                    enum_class |= b.enum_class
                        || (&*b.module == "enum"
                            && ["Enum", "IntEnum", "Flag", "IntFlag", "StrEnum"]
                                .contains(&&*b.qualname));
                }
                Some(TypeInfo {
                    module,
                    qualname,
                    exception,
                    enum_class,
                    by_value: true,
                })
            }
            ("dill._dill", "_get_attr") | ("builtins", "getattr") => {
                let a = items(t, o.args);
                let owner = type_info(t, *a.first()?, depth - 1)?;
                let attr = name_of(t, *a.get(1)?)?;
                Some(TypeInfo {
                    qualname: Rc::from(format!("{}.{attr}", owner.qualname)),
                    exception: false,
                    enum_class: false,
                    ..owner
                })
            }
            _ => None,
        },
        _ => None,
    }
}

/// The args an exception's repr shows (OSError drops the filename arguments).
pub fn exception_args<'a>(t: &Tree, cls: &TypeInfo, args: &'a [NodeId]) -> &'a [NodeId] {
    if OS_ERRORS.contains(&cls.name())
        && (3..=5).contains(&args.len())
        && args.first().and_then(|&a| int_of(t, a)).is_some()
    {
        return args.get(..2).unwrap_or(args);
    }
    args
}

/// Whether the class is `OSError` or one of its builtin subclasses.
pub fn exception_args_is_os(cls: &TypeInfo) -> bool {
    OS_ERRORS.contains(&cls.name())
}

/// The last two or three str arguments of a code object (only the last three are ever read).
pub(super) fn code_strs(t: &Tree, code: &Object) -> Vec<NodeId> {
    let mut strs: Vec<NodeId> = items(t, code.args)
        .iter()
        .rev()
        .copied()
        .filter(|&x| matches!(t.get(x), Some(Node::Str(_))))
        .take(3)
        .collect();
    strs.reverse();
    strs
}

/// A code object's name (`co_name`): the first str argument after the bytecode.
pub(super) fn code_name(t: &Tree, code: &Object) -> Option<String> {
    // _create_code(lnotab?, ... co_code, consts, names, varnames, filename, name, qualname, ...)
    // Python 3.11 layout: filename, name, qualname are consecutive str arguments.
    let strs = code_strs(t, code);
    match strs.as_slice() {
        [_file, name, qual] => {
            let (name, qual) = (t.str_of(*name)?, t.str_of(*qual)?);
            Some(if qual.contains(name.as_str()) {
                name
            } else {
                qual
            })
        }
        [_file, name] => t.str_of(*name),
        _ => None,
    }
}

/// A code object's `co_qualname` (Python 3.11 `_create_code` argument layout).
pub(super) fn code_qualname(t: &Tree, code: &Object) -> Option<String> {
    match code_strs(t, code).as_slice() {
        [_file, name, qual] => {
            let (name, qual) = (t.str_of(*name)?, t.str_of(*qual)?);
            qual.ends_with(name.as_str()).then_some(qual)
        }
        _ => None,
    }
}

/// The bytes of a node that denotes bytes (`bytes`, Latin-1 `str`, `_codecs.encode`): at most
/// `max` of them, and whether there were more.
pub fn bytes_value(t: &Tree, id: NodeId, max: usize) -> Option<(Vec<u8>, bool)> {
    match t.get(id)? {
        Node::Bytes(b) | Node::ByteArray(b) => {
            let part = b.get(..max).unwrap_or(b);
            Some((part.to_vec(), part.len() < b.len()))
        }
        Node::Str(s) => {
            let mut out = Vec::new();
            for c in text::code_points(s) {
                if out.len() == max {
                    return Some((out, true));
                }
                out.push(u8::try_from(c?).ok()?);
            }
            Some((out, false))
        }
        Node::Object(o) => match callee(t, o)? {
            ("_codecs", "encode") => {
                let a = items(t, o.args);
                let enc = a.get(1).and_then(|&e| t.str_of(e)).unwrap_or_default();
                if !enc.replace(['-', '_'], "").eq_ignore_ascii_case("latin1") {
                    return None;
                }
                let first = *a.first()?;
                match t.get(first)? {
                    Node::Str(_) => bytes_value(t, first, max),
                    _ => None,
                }
            }
            ("builtins", "bytes") if items(t, o.args).is_empty() => Some((Vec::new(), false)),
            _ => None,
        },
        _ => None,
    }
}

/// The repr of a bare global reference.
pub fn global_repr(module: &str, name: &str) -> String {
    if module == "builtins" {
        if BUILTIN_TYPES.contains(&name) || EXCEPTIONS.contains(&name) {
            return format!("<class '{name}'>");
        }
        if name.starts_with(char::is_lowercase) {
            return format!("<built-in function {name}>");
        }
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    if last.starts_with(char::is_uppercase) {
        format!("<class '{module}.{name}'>")
    } else {
        format!("<function {name}>")
    }
}

/// `<Unpicklable name module.qualname attrs=N failed=M error=...>` for a placeholder dict.
pub fn placeholder_summary(t: &Tree, d: NodeId) -> String {
    let s = |k: &'static str| dict_get(t, d, k).and_then(|v| t.str_of(v));
    let count = |k: &'static str| {
        dict_get(t, d, k).map_or(0, |v| match t.get(v) {
            Some(Node::Dict(p)) => p.len(),
            _ => 0,
        })
    };
    let mut out = String::from("<Unpicklable ");
    if let Some(n) = s("object_name").filter(|n| !n.is_empty()) {
        out.push_str(&n);
        out.push(' ');
    }
    let _ = write!(
        out,
        "{}.{} attrs={} failed={} error={}>",
        s("module").unwrap_or_default(),
        s("qualname").unwrap_or_default(),
        count("attributes"),
        count("failed_attributes"),
        s("pickle_error").unwrap_or_else(|| "None".to_owned())
    );
    out
}
