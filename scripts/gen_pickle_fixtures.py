#!/usr/bin/env python3
"""Generate the pickle fixture corpus for cideldill-server's safe pickle reader.

What it does
    Builds a few hundred Python values, pickles each one and writes one JSON line per value
    to tests/fixtures/pickles/corpus.jsonl (line format: tests/fixtures/pickles/README.md).
    The server has to show these values without running Python, so each line carries the
    pickle bytes, what Python itself prints for them (`python_repr`) and what our renderer
    must print (`expected_repr`).

    Values are pickled the way the real client (`cideldill_client`) does it:
    `dill.settings["recurse"] = True` and `dill.dumps(obj, protocol=4)`, so classes and
    functions defined here in `__main__` travel by value. Placeholders for objects the
    client cannot pickle (protocol doc section 4.4) are made by dill from a stand-in of
    `cideldill_client.custom_picklers` registered exactly like the client registers its
    reducer, plus one built opcode by opcode like scripts/demo_app.py does. The group
    "protocols" repeats a dozen values with pickle protocols 0, 1, 2, 3 and 5 and with the
    standard `pickle` module. The group "unknown_global" holds hand-made pickles that name
    modules which do not exist or must never run (os.system, builtins.eval); they are never
    unpickled here.

    The output is deterministic: the script re-runs itself with PYTHONHASHSEED=0, pickled
    code objects carry their file's base name instead of its path, and addresses in
    Python's reprs are replaced by `0x...`. Running it twice gives byte-identical files
    (with the same Python minor version: dill pickles bytecode, which differs between
    versions).

What it needs
    Python 3.11 (other versions run, but produce other bytes and print a warning) and
    dill 0.4.1. If that dill is not importable from the cache, the script runs
        python3 -m pip install --quiet --target <cache> dill==0.4.1
    where <cache> is $CIDELDILL_DEMO_CACHE, else <repo>/.cache/python (the same cache and
    pin as scripts/demo_app.py), and imports it from there. It also writes a small module
    `fixture_mod.py` into that cache, so a few classes are pickled by reference.

How to call it
    python3 scripts/gen_pickle_fixtures.py            # (re)write the corpus
    python3 scripts/gen_pickle_fixtures.py --check    # exit 1 if the corpus is stale
    python3 scripts/gen_pickle_fixtures.py --out F    # write somewhere else

    It prints the number of lines per group and every (module, name) global that the
    pickles reference on stderr.
"""

from __future__ import annotations

import os
import sys

# Set ordering of strings depends on the hash seed: fix it before anything is hashed.
if os.environ.get("PYTHONHASHSEED") != "0":
    env = dict(os.environ, PYTHONHASHSEED="0")
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)

import argparse
import base64
import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import http
import importlib
import io
import json
import math
import pathlib
import pickle
import pickletools
import re
import struct
import subprocess
import types
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

DILL_VERSION = "0.4.1"
CLIENT_PROTOCOL = 4
REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "fixtures" / "pickles" / "corpus.jsonl"
PLACEHOLDER_MODULE = "cideldill_client.custom_picklers"
PLACEHOLDER_FUNCTION = "_reconstruct_placeholder"
SERVER_REPR_LIMIT = 500  # the server's repr cut (protocol doc section 4.2)

# Ints of thousands of digits: Python 3.11 refuses repr() past 4300 digits by default.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)


def log(message: str) -> None:
    print(f"gen_pickle_fixtures: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# dill (same cache and pin as scripts/demo_app.py)
# ---------------------------------------------------------------------------


def cache_dir() -> Path:
    return Path(os.environ.get("CIDELDILL_DEMO_CACHE") or REPO / ".cache" / "python")


def _import_dill() -> Optional[Any]:
    importlib.invalidate_caches()
    try:
        import dill  # type: ignore[import-not-found]
    except ImportError:
        return None
    return dill


def ensure_dill() -> Any:
    """Import dill==0.4.1 from the cache, installing it there first if needed."""
    cache = cache_dir()
    if str(cache) not in sys.path:
        sys.path.insert(0, str(cache))
    dill = _import_dill()
    if dill is not None and dill.__version__ == DILL_VERSION:
        return dill
    if dill is not None:
        raise SystemExit(
            f"gen_pickle_fixtures: dill {dill.__version__} was imported from "
            f"{getattr(dill, '__file__', '?')}, need {DILL_VERSION}; "
            f"remove it or point CIDELDILL_DEMO_CACHE to an empty directory")
    log(f"installing dill=={DILL_VERSION} into {cache} ...")
    cache.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PIP_ROOT_USER_ACTION="ignore", PIP_DISABLE_PIP_VERSION_CHECK="1")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(cache),
               f"dill=={DILL_VERSION}"]
    completed = subprocess.run(command, env=env, stdout=sys.stderr, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"gen_pickle_fixtures: '{' '.join(command)}' failed "
                         f"with exit code {completed.returncode}")
    dill = _import_dill()
    if dill is None or dill.__version__ != DILL_VERSION:
        raise SystemExit(f"gen_pickle_fixtures: dill {DILL_VERSION} is still not importable "
                         f"from {cache}")
    return dill


dill = ensure_dill()
dill.settings["recurse"] = True  # as the real client (serialization_common.py) sets it


# ---------------------------------------------------------------------------
# An importable module: its classes are pickled by reference, not by value
# ---------------------------------------------------------------------------

FIXTURE_MOD_SOURCE = '''\
"""Classes pickled by reference in the pickle fixture corpus.

Written by scripts/gen_pickle_fixtures.py; edits are overwritten.
"""

import collections
import dataclasses
import enum


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Plain:
    def __init__(self, a, b):
        self.a = a
        self.b = b


class Slotted:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class ModError(Exception):
    pass


Pair = collections.namedtuple("Pair", "left right")


def helper(x):
    return x
'''


def load_fixture_mod() -> types.ModuleType:
    path = cache_dir() / "fixture_mod.py"
    if not path.exists() or path.read_text(encoding="utf-8") != FIXTURE_MOD_SOURCE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(FIXTURE_MOD_SOURCE, encoding="utf-8")
    importlib.invalidate_caches()
    return importlib.import_module("fixture_mod")


fixture_mod = load_fixture_mod()


# ---------------------------------------------------------------------------
# Stand-in for cideldill_client.custom_picklers (placeholders, protocol doc 4.4)
# ---------------------------------------------------------------------------

CLIENT_MODULE_SOURCE = '''
from dataclasses import dataclass
from typing import Any


@dataclass
class UnpicklablePlaceholder:
    type_name: str
    module: str
    qualname: str
    object_id: str
    repr_text: str
    str_text: "str | None"
    attributes: "dict[str, Any]"
    failed_attributes: "dict[str, str]"
    pickle_error: str
    pickle_attempts: "list[str]"
    capture_timestamp: float
    depth: int
    object_name: "str | None" = None
    object_path: "str | None" = None

    def __repr__(self):
        return (
            f"<UnpicklablePlaceholder {self.module}.{self.qualname} "
            f"attrs={len(self.attributes)} failed={len(self.failed_attributes)} "
            f"error={self.pickle_error!r}>"
        )

    def to_dict(self):
        return {
            "type_name": self.type_name,
            "module": self.module,
            "qualname": self.qualname,
            "object_name": self.object_name,
            "object_path": self.object_path,
            "object_id": self.object_id,
            "repr_text": self.repr_text,
            "str_text": self.str_text,
            "attributes": self.attributes,
            "failed_attributes": self.failed_attributes,
            "pickle_error": self.pickle_error,
            "pickle_attempts": list(self.pickle_attempts),
            "capture_timestamp": self.capture_timestamp,
            "depth": self.depth,
        }


def _reconstruct_placeholder(info):
    return UnpicklablePlaceholder(
        type_name=str(info.get("type_name", "Unknown")),
        module=info.get("module", "unknown"),
        qualname=info.get("qualname", "Unknown"),
        object_id=info.get("object_id", "unknown"),
        repr_text=info.get("repr_text", ""),
        str_text=info.get("str_text"),
        attributes=info.get("attributes", {}),
        failed_attributes=info.get("failed_attributes", {}),
        pickle_error=info.get("pickle_error", ""),
        pickle_attempts=info.get("pickle_attempts", []),
        capture_timestamp=info.get("capture_timestamp", 0.0),
        depth=info.get("depth", 0),
        object_name=info.get("object_name"),
        object_path=info.get("object_path"),
    )
'''


def install_client_stand_in() -> types.ModuleType:
    """Registers `cideldill_client.custom_picklers` in sys.modules (never on disk).

    Like the real client, the placeholder type gets a dill dispatch entry that saves it as
    a REDUCE of `_reconstruct_placeholder` over its `to_dict()`; since that function lives
    in an importable module, dill references it with a global instead of pickling it.
    """
    package = types.ModuleType("cideldill_client")
    package.__path__ = []  # type: ignore[attr-defined]
    module = types.ModuleType(PLACEHOLDER_MODULE)
    sys.modules["cideldill_client"] = package
    sys.modules[PLACEHOLDER_MODULE] = module
    package.custom_picklers = module  # type: ignore[attr-defined]
    exec(compile(CLIENT_MODULE_SOURCE, "custom_picklers.py", "exec"), module.__dict__)

    def dispatch(pickler: Any, obj: Any) -> None:
        pickler.save_reduce(module._reconstruct_placeholder, (obj.to_dict(),), obj=obj)

    dill.Pickler.dispatch[module.UnpicklablePlaceholder] = dispatch
    return module


client_picklers = install_client_stand_in()
UnpicklablePlaceholder = client_picklers.UnpicklablePlaceholder


# ---------------------------------------------------------------------------
# __main__ classes and functions (pickled by value by dill)
# ---------------------------------------------------------------------------

SCALE = 3


class MainEmpty:
    pass


class MainPlain:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)

    def method(self, x: int) -> int:
        return x + len(self.__dict__)


class MainCustomRepr:
    def __init__(self, a: int, b: str) -> None:
        self.a = a
        self.b = b

    def __repr__(self) -> str:
        return f"<custom a={self.a}>"


@dataclasses.dataclass
class MainPoint:
    x: int
    y: int


@dataclasses.dataclass
class MainConfig:
    name: str
    tags: list = dataclasses.field(default_factory=list)
    opts: dict = dataclasses.field(default_factory=dict)
    ratio: float = 0.5
    enabled: bool = True


@dataclasses.dataclass(frozen=True)
class MainFrozen:
    key: str
    value: int


@dataclasses.dataclass(slots=True)
class MainSlotsDataclass:
    x: int
    y: int


@dataclasses.dataclass
class MainLine:
    start: MainPoint
    end: MainPoint


@dataclasses.dataclass
class MainReprOverride:
    a: int
    b: int

    def __repr__(self) -> str:
        return "MainReprOverride!"


@dataclasses.dataclass
class MainNode:
    name: str
    ref: Any = None


@dataclasses.dataclass
class MainPairRef:
    name: str
    other: Any = None


@dataclasses.dataclass
class MainStamp:
    when: datetime.datetime
    amount: decimal.Decimal


class MainSlotted:
    __slots__ = ("x", "y")

    def __init__(self, x: Any = None, y: Any = None, *, set_y: bool = True) -> None:
        self.x = x
        if set_y:
            self.y = y


class MainSlotsAndDict:
    __slots__ = ("a", "__dict__")

    def __init__(self) -> None:
        self.a = 1
        self.extra = "e"


class MainTree:
    def __init__(self, value: int, children: list) -> None:
        self.value = value
        self.children = children


class MainBase:
    def __init__(self) -> None:
        self.a = 1


class MainChild(MainBase):
    def __init__(self) -> None:
        super().__init__()
        self.b = 2


def make_money(amount: int, currency: str) -> "MainMoney":
    return MainMoney(amount, currency)


class MainMoney:
    def __init__(self, amount: int, currency: str) -> None:
        self.amount = amount
        self.currency = currency

    def __reduce__(self):
        return (make_money, (self.amount, self.currency))

    def __repr__(self) -> str:
        return f"MainMoney({self.amount}, {self.currency!r})"


class MainReduceSelf:
    def __init__(self, a: int) -> None:
        self.a = a

    def __reduce__(self):
        return (type(self), (self.a,))

    def __repr__(self) -> str:
        return f"MainReduceSelf({self.a})"


class MainTupleState:
    def __init__(self, a: int, b: int) -> None:
        self.a = a
        self.b = b

    def __getstate__(self):
        return (self.a, self.b)

    def __setstate__(self, state):
        self.a, self.b = state

    def __repr__(self) -> str:
        return f"MainTupleState{(self.a, self.b)}"


class MainDictState:
    def __init__(self) -> None:
        self.keep = 1
        self.cache = object()

    def __getstate__(self):
        return {"keep": self.keep}

    def __setstate__(self, state):
        self.__dict__.update(state)


MainCoords = collections.namedtuple("MainCoords", "lat lon")


class MainList(list):
    pass


class MainDict(dict):
    pass


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


class AppError(Exception):
    pass


class CodeError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def add(x, y=1):
    return x + y


def make_adder(n):
    def adder(x):
        return x + n * SCALE + math.floor(1.5)
    return adder


def annotated(a: int, b: str = "b", *rest: int, flag: bool = False, **extra: Any) -> str:
    """A function with defaults, keyword-only defaults and annotations."""
    return f"{a}{b}{rest}{flag}{extra}"


def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)


def countdown(n):
    while n > 0:
        yield n
        n -= 1


async def fetch(url):
    return url


def shout(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return str(fn(*args, **kwargs)).upper()
    return wrapper


@shout
def greet(name):
    return f"hello {name}"


# Module-level lambdas on purpose: their qualname is just "<lambda>".
square = lambda x: x * x  # noqa: E731
times = lambda x, y=2: x * y  # noqa: E731
zero_factory = lambda: 0  # noqa: E731
noop = lambda: None  # noqa: E731


# ---------------------------------------------------------------------------
# Deterministic code objects: a fixed file name instead of the script's path
# ---------------------------------------------------------------------------


def _fixed_code(code: types.CodeType) -> types.CodeType:
    consts = tuple(_fixed_code(c) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    filename = code.co_filename
    if filename.startswith("<"):  # "<string>" of dataclass-generated methods stays
        return code.replace(co_consts=consts)
    return code.replace(co_filename=os.path.basename(filename), co_consts=consts)


def _fix_function(fn: Any, seen: set) -> None:
    if not isinstance(fn, types.FunctionType) or id(fn) in seen:
        return
    seen.add(id(fn))
    fn.__code__ = _fixed_code(fn.__code__)
    for cell in fn.__closure__ or ():
        try:
            _fix_function(cell.cell_contents, seen)
        except ValueError:  # empty cell
            pass
    for value in vars(fn).values():
        _fix_function(value, seen)


def normalize_main_code(namespace: Dict[str, Any]) -> None:
    """Cuts co_filename of every function and method defined here to its base name.

    dill pickles code objects of `__main__` functions, and those carry the path the script
    was started with (and, for dataclass reprs, the path of dataclasses.py).
    """
    seen: set = set()
    for value in list(namespace.values()):
        if isinstance(value, types.FunctionType) and value.__module__ == "__main__":
            _fix_function(value, seen)
        elif isinstance(value, type) and value.__module__ == "__main__":
            for attr in vars(value).values():
                if isinstance(attr, (staticmethod, classmethod, types.MethodType)):
                    attr = attr.__func__
                if isinstance(attr, property):
                    for accessor in (attr.fget, attr.fset, attr.fdel):
                        _fix_function(accessor, seen)
                _fix_function(attr, seen)



# ---------------------------------------------------------------------------
# Expected renderings
# ---------------------------------------------------------------------------

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
USER_MODULES = ("__main__", "fixture_mod")


def python_repr_text(value: Any) -> str:
    """repr() with memory addresses replaced by `0x...` (they change between runs)."""
    return ADDRESS.sub(" at 0x...", repr(value))


def _is_user_instance(obj: Any) -> bool:
    kind = type(obj)
    return (kind.__module__ in USER_MODULES and not isinstance(obj, (BaseException, type,
                                                                     enum.Enum))
            and not isinstance(obj, types.FunctionType))


def _instance_state(obj: Any) -> List[Tuple[str, Any]]:
    """The attributes pickle saves: __dict__ in order, then set slots in MRO order."""
    items = list(getattr(obj, "__dict__", {}).items())
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        for slot in slots:
            if slot in ("__dict__", "__weakref__"):
                continue
            try:
                items.append((slot, getattr(obj, slot)))
            except AttributeError:
                continue
    return items


def doc_repr(obj: Any, _active: Optional[set] = None) -> str:
    """The documented rendering: Python's repr, except for these forms.

    * instances of user classes: `ClassName(attr=repr, ...)` from the pickled state;
    * functions: `<function qualname>` (no address);
    * sets and frozensets in the order they were pickled (the original's iteration order);
    * anything else: Python's repr without ` at 0x...` parts.
    """
    active = set() if _active is None else _active
    kind = type(obj)
    recursive = kind in (list, tuple, dict, set, frozenset) or _is_user_instance(obj)
    if recursive:
        if id(obj) in active:
            return {list: "[...]", tuple: "(...)", dict: "{...}"}.get(kind, "...")
        active.add(id(obj))
    try:
        if kind is list:
            return "[" + ", ".join(doc_repr(x, active) for x in obj) + "]"
        if kind is tuple:
            inner = ", ".join(doc_repr(x, active) for x in obj)
            return f"({inner},)" if len(obj) == 1 else f"({inner})"
        if kind is dict:
            return "{" + ", ".join(f"{doc_repr(k, active)}: {doc_repr(v, active)}"
                                   for k, v in obj.items()) + "}"
        if kind is set:
            return "{" + ", ".join(doc_repr(x, active) for x in obj) + "}" if obj else "set()"
        if kind is frozenset:
            if not obj:
                return "frozenset()"
            return "frozenset({" + ", ".join(doc_repr(x, active) for x in obj) + "})"
        if isinstance(obj, types.FunctionType):
            return f"<function {obj.__qualname__}>"
        if _is_user_instance(obj):
            fields = ", ".join(f"{name}={doc_repr(value, active)}"
                               for name, value in _instance_state(obj))
            return f"{kind.__qualname__}({fields})"
        return ADDRESS.sub("", repr(obj))
    finally:
        if recursive:
            active.discard(id(obj))


def _is_placeholder(value: Any) -> bool:
    return all(hasattr(value, name)
               for name in ("pickle_error", "attributes", "failed_attributes", "type_name"))


def _server_repr(value: Any) -> str:
    text = repr(value)
    return text[:SERVER_REPR_LIMIT] + "..." if len(text) > SERVER_REPR_LIMIT else text


def placeholder_summary(value: Any) -> str:
    """`<Unpicklable [name ]module.qualname attrs=N failed=M error=E>` (section 4.4)."""
    name = f"{value.object_name} " if value.object_name else ""
    return (f"<Unpicklable {name}{value.module}.{value.qualname} "
            f"attrs={len(value.attributes or {})} failed={len(value.failed_attributes or {})} "
            f"error={value.pickle_error}>")


def _server_value(value: Any, depth: int, max_depth: int) -> Any:
    """One attribute value as the server formats it (section 4.4)."""
    if _is_placeholder(value):
        if depth < max_depth:
            return server_placeholder(value, depth + 1, max_depth)
        return placeholder_summary(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if depth > max_depth:
        return _server_repr(value)
    if isinstance(value, dict):
        out: Dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= 50:
                out["__skipped__"] = f"{len(value) - 50} more items skipped"
                break
            out[key if isinstance(key, str) else _server_repr(key)] = \
                _server_value(item, depth + 1, max_depth)
        return out
    if isinstance(value, (list, tuple)):
        items: List[Any] = []
        for index, item in enumerate(value):
            if index >= 50:
                items.append(f"<{len(value) - 50} more items skipped>")
                break
            items.append(_server_value(item, depth + 1, max_depth))
        return items
    if isinstance(value, (set, frozenset)):
        ordered = sorted(value, key=_server_repr)
        members: List[Any] = []
        for index, item in enumerate(ordered):
            if index >= 50:
                members.append(f"<{len(ordered) - 50} more items skipped>")
                break
            members.append(_server_value(item, depth + 1, max_depth))
        return {"__cideldill_set__": members}
    return _server_repr(value)


def server_placeholder(value: Any, depth: int = 0, max_depth: int = 2) -> Dict[str, Any]:
    """The server-side placeholder dict (section 4.4), key order as the original server."""
    attributes: Dict[str, Any] = {}
    items = list((value.attributes or {}).items())
    for index, (name, item) in enumerate(items):
        if index >= 50:
            attributes["__skipped__"] = f"{len(items) - 50} more attributes skipped"
            break
        attributes[name] = _server_value(item, depth, max_depth)
    return {
        "__cideldill_placeholder__": True,
        "summary": placeholder_summary(value),
        "type_name": value.type_name,
        "module": value.module,
        "qualname": value.qualname,
        "object_name": value.object_name,
        "object_path": value.object_path,
        "object_id": value.object_id,
        "repr_text": value.repr_text,
        "str_text": value.str_text,
        "pickle_error": value.pickle_error,
        "pickle_attempts": list(value.pickle_attempts or []),
        "attributes": attributes,
        "failed_attributes": {k: _server_repr(v)
                              for k, v in (value.failed_attributes or {}).items()},
        "depth": value.depth,
        "capture_timestamp": value.capture_timestamp,
    }


# ---------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------

AUTO = object()
NAME_RE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)*$")


class Corpus:
    def __init__(self) -> None:
        self.records: List[Dict[str, Any]] = []
        self.skipped: List[str] = []  # combinations that dill or pickle refuse
        self._names: set = set()

    def _record(self, name: str, group: str, data: bytes, protocol: int, pickler: str,
                python_repr: Optional[str], expected: Optional[str]) -> None:
        if not NAME_RE.match(name) or name in self._names:
            raise ValueError(f"bad or duplicate name: {name}")
        self._names.add(name)
        pickletools.dis(data, out=io.StringIO())  # must be well-formed
        self.records.append({
            "name": name,
            "group": group,
            "pickle": base64.b64encode(data).decode("ascii"),
            "protocol": protocol,
            "pickler": pickler,
            "python_repr": python_repr,
            "expected_repr": expected,
            "exact": expected is not None and expected == python_repr,
        })

    def add(self, name: str, group: str, obj: Any, *, protocol: int = CLIENT_PROTOCOL,
            pickler: str = "dill", expected: Any = AUTO) -> None:
        """Pickles obj; expected defaults to doc_repr(obj) (None: the reader decides)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if pickler == "dill":
                data = dill.dumps(obj, protocol=protocol)
            else:
                data = pickle.dumps(obj, protocol=protocol)
        python_repr = loaded_repr(data)
        if expected is AUTO:
            expected = doc_repr(obj)
        self._record(name, group, data, protocol, pickler, python_repr, expected)

    def add_loaded_doc(self, name: str, group: str, obj: Any) -> None:
        """Like add(), but the documented form is taken from the unpickled value."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = dill.dumps(obj, protocol=CLIENT_PROTOCOL)
        self._record(name, group, data, CLIENT_PROTOCOL, "dill", loaded_repr(data),
                     doc_repr(dill.loads(data)))

    def add_placeholder(self, name: str, placeholder: Any = None, *,
                        data: Optional[bytes] = None) -> None:
        if data is None:
            data = dill.dumps(placeholder, protocol=CLIENT_PROTOCOL)
            pickler = "dill"
        else:
            pickler = "pickle"
        value = dill.loads(data)
        expected = json.dumps(server_placeholder(value), separators=(",", ":"))
        self._record(name, "placeholder", data, CLIENT_PROTOCOL, pickler,
                     python_repr_text(value), expected)

    def add_raw(self, name: str, group: str, data: bytes, protocol: int) -> None:
        """Hand-made bytes naming globals that must never be imported: not unpickled."""
        self._record(name, group, data, protocol, "pickle", None, None)


def loaded_repr(data: bytes) -> Optional[str]:
    """repr(dill.loads(data)); None when Python itself cannot unpickle or repr it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return python_repr_text(dill.loads(data))
    except Exception:  # noqa: BLE001 - recorded as null
        return None


def nested(depth: int, make: Callable[[Any], Any], leaf: Any) -> Any:
    value = leaf
    for _ in range(depth - 1):
        value = make(value)
    return value


def add_ints(c: Corpus) -> None:
    g = "ints"
    values = [
        ("zero", 0), ("one", 1), ("answer", 42), ("bi1_max", 255), ("bi2_min", 256),
        ("bi2_max", 65535), ("bi4_from_65536", 65536), ("minus_one", -1), ("minus_255", -255),
        ("minus_256", -256), ("minus_257", -257), ("i32_max", 2**31 - 1), ("i32_min", -2**31),
        ("i32_max_plus_1", 2**31), ("i32_min_minus_1", -2**31 - 1), ("two_pow_32", 2**32),
        ("long1_5byte_max", 2**39 - 1), ("long1_6byte_min", 2**39),
        ("long1_5byte_min", -2**39), ("long1_6byte_neg", -2**39 - 1),
        ("i64_max", 2**63 - 1), ("i64_max_plus_1", 2**63), ("i64_min", -2**63),
        ("i64_min_minus_1", -2**63 - 1), ("u64_max", 2**64 - 1), ("two_pow_64", 2**64),
        ("ten_pow_20", 10**20), ("minus_ten_pow_20", -10**20), ("two_pow_127", 2**127),
        ("i128_min", -2**127), ("long1_max", 2**(8 * 255 - 1) - 1),
        ("long4_min_positive", 2**(8 * 255 - 1)), ("long1_min", -2**(8 * 255 - 1)),
        ("long4_min_negative", -2**(8 * 255 - 1) - 1), ("googol", 10**100),
        ("ten_pow_1000", 10**1000), ("minus_ten_pow_3000", -10**3000),
        ("three_pow_8000", 3**8000), ("digits_4300", 10**4299 + 7),
        ("digits_10000", 7**11835), ("nineteen_digits", 1234567890123456789),
        ("list_mixed_ints", [0, 1, -1, 255, 256, -129, 65536, 2**31, -2**31 - 1, 2**70]),
    ]
    for name, value in values:
        c.add(f"int_{name}", g, value)


def add_constants(c: Corpus) -> None:
    g = "constants"
    for name, value in [("none", None), ("true", True), ("false", False),
                        ("ellipsis", Ellipsis), ("not_implemented", NotImplemented),
                        ("list_none_true_false", [None, True, False]),
                        ("type_int", int), ("type_nonetype", type(None)), ("type_str", str),
                        ("type_value_error", ValueError)]:
        c.add(f"const_{name}", g, value)


def add_floats(c: Corpus) -> None:
    g = "floats"
    nan_payload = struct.unpack(">d", bytes.fromhex("7ff8000000000001"))[0]
    neg_nan = struct.unpack(">d", bytes.fromhex("fff8000000000000"))[0]
    values = [
        ("zero", 0.0), ("neg_zero", -0.0), ("one", 1.0), ("minus_one_half", -1.5),
        ("hundred", 100.0), ("e15", 1e15), ("e16", 1e16), ("below_e16", 9999999999999998.0),
        ("e_minus_4", 0.0001), ("e_minus_5", 1e-05), ("e22", 1e22), ("e23", 1e23),
        ("e100", 1e100), ("min_subnormal", 5e-324), ("min_normal", 2.2250738585072014e-308),
        ("max", 1.7976931348623157e308), ("inf", math.inf), ("neg_inf", -math.inf),
        ("nan", math.nan), ("nan_payload", nan_payload), ("neg_nan", neg_nan),
        ("tenth", 0.1), ("third", 1 / 3), ("two_thirds", 2 / 3),
        ("exact_binary", 123456789.125), ("point_three_17_digits", 0.1 + 0.2),
        ("one_plus_ulp", 1.0000000000000002), ("two_plus_ulp", 2.0000000000000004),
        ("tiny_17_digits", 5.551115123125783e-17), ("big_17_digits", 1.2345678901234568e17),
        ("two_pow_53", float(2**53)), ("neg_small", -2.5e-300),
        ("list_specials", [math.nan, math.inf, -0.0, 1e16, 1e-05]),
    ]
    for name, value in values:
        c.add(f"float_{name}", g, value)


def add_strings(c: Corpus) -> None:
    g = "strings"
    values = [
        ("empty", ""), ("ascii", "hello world"), ("single_quote", "it's"),
        ("double_quote", 'say "hi"'), ("both_quotes", "both ' and \""),
        ("only_single_quote", "'"), ("only_double_quote", '"'), ("backslash", "\\"),
        ("windows_path", "C:\\new\\table"), ("newline", "line1\nline2"), ("tab", "a\tb"),
        ("carriage_return", "a\rb"), ("nul", "a\x00b"), ("del", "\x7f"), ("c1_x80", "\x80"),
        ("c1_nel", "\x85"), ("c1_x9f", "\x9f"), ("nbsp", "\xa0"), ("soft_hyphen", "\xad"),
        ("y_diaeresis", "\xff"), ("latin1", "naïve café"), ("cjk", "日本語"),
        ("escape_bell_etc", "\x07\x08\x0b\x0c\x1b[31m"), ("emoji", "😀"),
        ("zwj_family", "👨\u200d👩\u200d👧"), ("line_separator", "a\u2028b"),
        ("paragraph_separator", "\u2029"), ("zero_width_space", "a\u200bb"), ("bom", "\ufeff"),
        ("rtl_mark", "\u200f"), ("combining_acute", "e\u0301"), ("g_clef", "\U0001d11e"),
        ("lone_high_surrogate", "\ud800"), ("lone_low_surrogate", "a\udfffb"),
        ("surrogate_pair_as_two", "\ud83d\ude00"), ("private_use", "\ue000"),
        ("plane15_private_use", "\U000f0000"), ("noncharacter_ffff", "\uffff"),
        ("max_code_point", "\U0010ffff"), ("unassigned_0378", "\u0378"),
        ("bytes_255", "x" * 255), ("bytes_256", "x" * 256), ("two_byte_chars_256", "é" * 128),
        ("repr_500", "a" * 498), ("repr_501", "a" * 499), ("long_1000", "a" * 1000),
        ("long_mixed", "ab'" * 200 + "😀" * 10 + "\n"), ("long_accented", "é" * 600),
        ("list_of_strings", ["a", "it's", 'say "hi"', "\n", "é", ""]),
    ]
    for name, value in values:
        c.add(f"str_{name}", g, value)


def add_bytes(c: Corpus) -> None:
    g = "bytes"
    values = [
        ("empty", b""), ("ascii", b"abc"), ("all_256", bytes(range(256))),
        ("single_quote", b"it's"), ("double_quote", b'say "hi"'), ("both_quotes", b"'\""),
        ("backslash", b"\\"), ("controls", b"\t\n\r\x00"), ("high", b"\x7f\x80\xff"),
        ("len_255", b"x" * 255), ("len_256", b"y" * 256), ("long_600", b"z" * 600),
        ("bytearray_empty", bytearray()), ("bytearray_ascii", bytearray(b"abc")),
        ("bytearray_all_256", bytearray(range(256))),
        ("bytearray_quotes", bytearray(b"it's \"x\"")),
        ("list_mixed", [b"a", bytearray(b"b"), b""]),
    ]
    for name, value in values:
        c.add(f"bytes_{name}", g, value)


def add_containers(c: Corpus) -> None:
    g = "containers"
    shared = [1, 2]
    cyclic_list: list = [1]
    cyclic_list.append(cyclic_list)
    twice: list = [1]
    twice.append(twice)
    twice.append(twice)
    cyclic_dict: dict = {"a": 1}
    cyclic_dict["self"] = cyclic_dict
    inner: list = []
    list_dict_cycle = [{"a": inner}]
    inner.append(list_dict_cycle)
    recursive_tuple: tuple = ([],)
    recursive_tuple[0].append(recursive_tuple)
    order_set = set(range(1000))
    for i in range(1000):
        if i not in (7, 9):
            order_set.discard(i)
    shared_tuple = (1, 2)
    shared_str = "shared string"

    def mixed(value: Any) -> Any:
        mixed.turn = (mixed.turn + 1) % 3  # type: ignore[attr-defined]
        return [value] if mixed.turn == 0 else {"k": value} if mixed.turn == 1 else (value,)

    mixed.turn = 0  # type: ignore[attr-defined]
    values = [
        ("list_empty", []), ("list_one", [1]),
        ("list_mixed", [1, "a", None, 2.5, True, b"x"]),
        ("list_doc_example", [1, "a", None, 2.5, {"k": True}]),
        ("tuple_empty", ()), ("tuple_one", (1,)), ("tuple_two", (1, 2)),
        ("tuple_three", (1, "b", None)), ("tuple_four", (1, 2, 3, 4)),
        ("tuple_nested", ((), (1,), ((),))), ("tuple_of_empty_list", ([],)),
        ("dict_empty", {}), ("dict_one", {"y": 0}), ("dict_str_keys", {"a": 1, "b": 2}),
        ("dict_insertion_order", {"z": 1, "a": 2, "m": 3}),
        ("dict_mixed_keys", {1: "int", "b": "str", None: "none", (1, "x"): "tuple",
                             2.5: "float", frozenset({1}): "frozenset", b"k": "bytes",
                             False: "bool"}),
        ("dict_nested", {"a": {"b": {"c": [1, {"d": ()}]}}}),
        ("dict_of_sets", {"s": {1, 2}, "f": frozenset({"x"}), "e": set()}),
        ("set_empty", set()), ("set_ints", {3, 1, 2}), ("set_strs", {"b", "a", "c"}),
        ("set_mixed", {1, "a", (1, 2), None, 2.5}),
        ("set_order_as_pickled", order_set),
        ("set_1500", set(range(1500))),
        ("frozenset_empty", frozenset()), ("frozenset_ints", frozenset({1, 2})),
        ("frozenset_nested", frozenset({frozenset({1}), 2})),
        ("list_of_empties", [[], {}, (), set(), frozenset(), "", b""]),
        ("deep_list_50", nested(50, lambda v: [v], [1])),
        ("deep_dict_50", nested(50, lambda v: {"k": v}, {"k": 1})),
        ("deep_tuple_50", nested(50, lambda v: (v,), (1,))),
        ("deep_mixed_50", nested(50, mixed, "leaf")),
        ("shared_list", [shared, shared]),
        ("shared_dict_values", {"a": shared, "b": shared}),
        ("shared_in_tuple", (shared, [shared])),
        ("shared_tuple", [shared_tuple, shared_tuple, (shared_tuple,)]),
        ("shared_string", [shared_str, shared_str]),
        ("cyclic_list", cyclic_list), ("cyclic_list_twice", twice),
        ("cyclic_dict", cyclic_dict), ("list_dict_cycle", list_dict_cycle),
        ("recursive_tuple", recursive_tuple),
        ("list_2000_ints", [i * i - 1000 for i in range(2000)]),
        ("dict_1500", {f"k{i}": i for i in range(1500)}),
        ("tuple_300", tuple(range(300))),
        ("list_floats_and_none", [0.5, None, -0.0, math.inf]),
    ]
    for name, value in values:
        c.add(name, g, value)


def add_stdlib(c: Corpus) -> None:
    g = "stdlib"
    utc = datetime.timezone.utc
    ist = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    est = datetime.timezone(datetime.timedelta(hours=-5), "EST")
    recursive_od: collections.OrderedDict = collections.OrderedDict()
    recursive_od["self"] = recursive_od
    values: List[Tuple[str, Any]] = [
        ("date", datetime.date(2024, 2, 29)),
        ("datetime", datetime.datetime(2024, 1, 2, 3, 4, 5)),
        ("datetime_micro", datetime.datetime(2024, 1, 2, 3, 4, 5, 678901)),
        ("datetime_no_seconds", datetime.datetime(2024, 1, 2, 3, 4)),
        ("datetime_midnight", datetime.datetime(2024, 1, 2)),
        ("datetime_utc", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc)),
        ("datetime_plus_0530", datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=ist)),
        ("datetime_named_tz", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=est)),
        ("datetime_fold", datetime.datetime(2024, 11, 3, 1, 30, fold=1)),
        ("datetime_min", datetime.datetime.min), ("datetime_max", datetime.datetime.max),
        ("time", datetime.time(12, 30, 15, 500)), ("time_midnight", datetime.time(0, 0)),
        ("time_tz", datetime.time(8, 0, tzinfo=utc)),
        ("timedelta_zero", datetime.timedelta(0)),
        ("timedelta", datetime.timedelta(days=1, seconds=5)),
        ("timedelta_negative", datetime.timedelta(microseconds=-1)),
        ("timedelta_max", datetime.timedelta.max), ("timezone_utc", utc),
        ("timezone_offset", ist),
        ("decimal", decimal.Decimal("1.5")), ("decimal_neg_zero", decimal.Decimal("-0")),
        ("decimal_nan", decimal.Decimal("NaN")), ("decimal_neg_nan", decimal.Decimal("-NaN")),
        ("decimal_snan", decimal.Decimal("sNaN")),
        ("decimal_inf", decimal.Decimal("Infinity")),
        ("decimal_neg_inf", decimal.Decimal("-Infinity")),
        ("decimal_exp_pos", decimal.Decimal("1E+3")),
        ("decimal_exp_neg", decimal.Decimal("1.23E-10")),
        ("decimal_zero_exp", decimal.Decimal("0E-7")),
        ("decimal_long", decimal.Decimal("123456789012345678901234567890.123456789")),
        ("decimal_from_float", decimal.Decimal(0.1)),
        ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
        ("uuid5", uuid.uuid5(uuid.NAMESPACE_DNS, "example.com")),
        ("uuid_safe", uuid.UUID("00000000-0000-0000-0000-0000000000ff",
                                is_safe=uuid.SafeUUID.safe)),
        ("ordereddict", collections.OrderedDict([("a", 1), ("b", [2])])),
        ("ordereddict_empty", collections.OrderedDict()),
        ("ordereddict_recursive", recursive_od),
        ("defaultdict_list", collections.defaultdict(list, {"a": [1]})),
        ("defaultdict_int_empty", collections.defaultdict(int)),
        ("defaultdict_lambda", collections.defaultdict(zero_factory, {"x": 0})),
        ("defaultdict_none", collections.defaultdict(None, {1: 2})),
        ("deque", collections.deque([1, 2])), ("deque_empty", collections.deque()),
        ("deque_maxlen", collections.deque([1, 2, 3], maxlen=3)),
        ("deque_maxlen_zero", collections.deque([], maxlen=0)),
        ("counter", collections.Counter({"a": 2})),
        ("counter_sorted_by_count", collections.Counter("abbccc")),
        ("counter_ties_and_negative", collections.Counter({"x": 1, "y": -1, "z": 1, "w": 0})),
        ("counter_empty", collections.Counter()),
        ("enum_main", Color.RED), ("int_enum_main", Level.HIGH),
        ("flag_main", Perm.R | Perm.W),
        ("regexflag", re.IGNORECASE), ("regexflag_combined", re.IGNORECASE | re.MULTILINE),
        ("http_status", http.HTTPStatus.NOT_FOUND),
        ("regex_pattern", re.compile(r"a+\d", re.IGNORECASE)),
        ("fraction", fractions.Fraction(1, 3)), ("fraction_negative", fractions.Fraction(-7, 2)),
        ("fraction_integer", fractions.Fraction(5)),
        ("complex", complex(1, 2)), ("complex_imag_only", 1j), ("complex_zero", 0j),
        ("complex_neg_zeros", complex(-0.0, -0.0)), ("complex_inf", complex(1.5, -math.inf)),
        ("complex_nan", complex(math.nan, math.nan)), ("complex_exp", complex(1e16, 1e-05)),
        ("range", range(5)), ("range_step", range(0, 10, 2)),
        ("range_negative_step", range(10, 0, -3)), ("range_empty", range(0)),
        ("slice", slice(1, 2)), ("slice_reverse", slice(None, None, -1)),
        ("slice_objects", slice("a", [1], None)),
        ("pure_posix_path", pathlib.PurePosixPath("/tmp/a b")),
        ("pure_posix_path_relative", pathlib.PurePosixPath("rel/x.txt")),
        ("pure_posix_path_root", pathlib.PurePosixPath("/")),
        ("posix_path", pathlib.PosixPath("/etc/hosts")),
    ]
    for name, value in values:
        c.add(f"std_{name}", g, value)
    # By reference from an importable module: the pickle has no member names.
    c.add("std_enum_by_reference", g, fixture_mod.Color.GREEN, expected=None)


def add_exceptions(c: Corpus) -> None:
    g = "exceptions"
    try:
        1 / 0
    except ZeroDivisionError as exc:
        raised = exc
    try:
        try:
            {}["missing"]
        except KeyError as exc:
            raise ValueError("outer") from exc
    except ValueError as exc:
        with_cause = exc
    noted = RuntimeError("with a note")
    noted.add_note("first note")
    app = AppError("failed", 42)
    app.code = 7  # type: ignore[attr-defined]
    values = [
        ("zero_division_raised", raised),
        ("zero_division", ZeroDivisionError("division by zero")),
        ("value_error_two_args", ValueError("bad value", 2)),
        ("key_error", KeyError("k")), ("key_error_tuple", KeyError(("a", 1))),
        ("exception_no_args", Exception()), ("runtime_multiline", RuntimeError("multi\nline")),
        ("os_error_errno", OSError(2, "No such file or directory")),
        ("os_error_filename", OSError(2, "No such file or directory", "/tmp/f")),
        ("stop_iteration", StopIteration(42)), ("system_exit", SystemExit(3)),
        ("keyboard_interrupt", KeyboardInterrupt()),
        ("unicode_decode", UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")),
        ("deprecation_warning", DeprecationWarning("old")), ("assertion", AssertionError()),
        ("with_cause_dropped", with_cause), ("with_note", noted),
        ("exception_group", ExceptionGroup("eg", [ValueError(1), TypeError("t")])),
        ("custom_main_with_attribute", app),
        ("custom_init_mismatch", CodeError("boom", 3)),
        ("custom_by_reference", fixture_mod.ModError("from module")),
        ("list_of_exceptions", [KeyError("k"), ValueError()]),
    ]
    for name, value in values:
        c.add(f"exc_{name}", g, value)


def add_user_classes(c: Corpus) -> None:
    g = "user_classes"
    node = MainNode("n")
    node.ref = node
    plain_self = MainPlain(name="p")
    plain_self.me = plain_self  # type: ignore[attr-defined]
    first, second = MainPairRef("a"), MainPairRef("b")
    first.other, second.other = second, first
    point = MainPoint(1, 2)
    values: List[Tuple[str, Any, Any]] = [
        ("plain", MainPlain(a=1, b="x", c=[1, 2]), AUTO),
        ("plain_empty", MainEmpty(), AUTO),
        ("plain_custom_repr", MainCustomRepr(1, "b"), AUTO),
        ("plain_holding_function", MainPlain(f=square, g=add), AUTO),
        ("plain_inherited", MainChild(), AUTO),
        ("dataclass", point, AUTO),
        ("dataclass_defaults", MainConfig("svc", ["a"], {"x": 1}), AUTO),
        ("dataclass_frozen", MainFrozen("k", 1), AUTO),
        ("dataclass_slots", MainSlotsDataclass(3, 4), AUTO),
        ("dataclass_nested", MainLine(MainPoint(0, 0), MainPoint(1, 2)), AUTO),
        ("dataclass_repr_overridden", MainReprOverride(1, 2), AUTO),
        ("dataclass_stdlib_fields", MainStamp(datetime.datetime(2024, 5, 6, 7, 8, 9),
                                              decimal.Decimal("9.99")), AUTO),
        ("dataclass_self_reference", node, AUTO),
        ("dataclass_mutual_reference", first, AUTO),
        ("dataclass_shared_in_list", [point, point], AUTO),
        ("plain_self_reference", plain_self, AUTO),
        ("slots", MainSlotted(1, "y"), AUTO),
        ("slots_partly_set", MainSlotted(1, set_y=False), AUTO),
        ("slots_and_dict", MainSlotsAndDict(), AUTO),
        ("nested_instances", MainTree(1, [MainTree(2, []), MainTree(3, [MainTree(4, [])])]),
         AUTO),
        ("getstate_dict", MainDictState(), "MainDictState(keep=1)"),
        ("getstate_tuple", MainTupleState(1, 2), None),
        ("reduce_custom_callable", MainMoney(5, "EUR"), None),
        ("reduce_class_itself", MainReduceSelf(8), None),
        ("namedtuple", MainCoords(1.5, -2.0), None),
        ("list_subclass", MainList([1, 2]), None),
        ("dict_subclass", MainDict(a=1), None),
        ("module_dataclass", fixture_mod.Point(1, 2), AUTO),
        ("module_plain", fixture_mod.Plain("a", [1]), AUTO),
        ("module_slots", fixture_mod.Slotted(1, 2), AUTO),
        ("module_namedtuple", fixture_mod.Pair(1, 2), None),
    ]
    for name, value, expected in values:
        c.add(f"obj_{name}", g, value, expected=expected)


def add_functions(c: Corpus) -> None:
    g = "functions"
    for name, value in [
        ("named", add), ("lambda", times), ("lambda_one_arg", square),
        ("lambda_in_function", lambda: SCALE),
        ("closure", make_adder(2)), ("annotated_defaults", annotated),
        ("recursive", factorial), ("generator_function", countdown),
        ("async_function", fetch), ("decorated_wraps", greet),
        ("unbound_method", MainPlain.method), ("list_of_functions", [add, square]),
        ("dict_of_functions", {"add": add, "lambda": noop}),
        ("class_plain", MainPlain), ("class_dataclass", MainPoint),
        ("class_exception", AppError),
    ]:
        c.add_loaded_doc(f"fn_{name}", g, value)
    for name, value in [
        ("bound_method", MainPoint(1, 2).__repr__), ("bound_method_plain", MainPlain().method),
        ("builtin_len", len), ("builtin_math_sqrt", math.sqrt),
        ("builtin_bound_method", [1].append), ("partial", functools.partial(add, 1)),
        ("module_function_by_reference", fixture_mod.helper),
        ("module_class_by_reference", fixture_mod.Point),
    ]:
        c.add(f"fn_{name}", g, value, expected=None)


# -- placeholders ------------------------------------------------------------

CAPTURED_AT = 1717171717.25
SOCKET_ERROR = "TypeError: cannot pickle 'socket' object"
LOCK_ERROR = "TypeError: cannot pickle '_thread.lock' object"


def placeholder(*, type_name: str, module: str = "__main__", qualname: Optional[str] = None,
                object_name: Optional[str] = None, object_id: str = "0x7f0000001000",
                repr_text: Optional[str] = None, str_text: Optional[str] = None,
                attributes: Optional[dict] = None, failed: Optional[dict] = None,
                error: str = SOCKET_ERROR, attempts: Optional[list] = None,
                depth: int = 0) -> Any:
    qualname = qualname or type_name
    return UnpicklablePlaceholder(
        type_name=type_name, module=module, qualname=qualname, object_id=object_id,
        repr_text=repr_text if repr_text is not None else f"<{module}.{qualname} object>",
        str_text=str_text, attributes=attributes or {}, failed_attributes=failed or {},
        pickle_error=error,
        pickle_attempts=attempts if attempts is not None else
        [f"dill.dumps: {error}", "auto_register: no reducer found"],
        capture_timestamp=CAPTURED_AT, depth=depth, object_name=object_name,
        object_path=f"{module}.{qualname}",
    )


def socket_placeholder(depth: int) -> Any:
    return placeholder(
        type_name="socket", module="socket", object_name="socket", depth=depth,
        object_id="0x7f0000002000",
        repr_text="<socket.socket fd=3, family=2, type=1, proto=0>")


def _hand_text(text: str, out: bytearray) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    out += (b"\x8c" + bytes([len(raw)])) if len(raw) < 256 else (b"X" + struct.pack("<I", len(raw)))
    out += raw


def _hand_value(value: Any, out: bytearray) -> None:
    """Protocol 4 opcodes without memo or frames, as scripts/demo_app.py writes them."""
    if isinstance(value, UnpicklablePlaceholder):
        _hand_text(PLACEHOLDER_MODULE, out)
        _hand_text(PLACEHOLDER_FUNCTION, out)
        out += b"\x93"
        _hand_value(value.to_dict(), out)
        out += b"\x85R"
    elif value is None:
        out += b"N"
    elif value is True or value is False:
        out += b"\x88" if value else b"\x89"
    elif isinstance(value, int) and 0 <= value < 256:
        out += b"K" + bytes([value])
    elif isinstance(value, int) and -(2**31) <= value < 2**31:
        out += b"J" + struct.pack("<i", value)
    elif isinstance(value, float):
        out += b"G" + struct.pack(">d", value)
    elif isinstance(value, str):
        _hand_text(value, out)
    elif isinstance(value, list):
        out += b"]"
        if value:
            out += b"("
            for item in value:
                _hand_value(item, out)
            out += b"e"
    elif isinstance(value, dict):
        out += b"}"
        if value:
            out += b"("
            for key, item in value.items():
                _hand_value(str(key), out)
                _hand_value(item, out)
            out += b"u"
    else:
        raise TypeError(f"not supported by the hand encoder: {type(value).__name__}")


def add_placeholders(c: Corpus) -> None:
    channel = placeholder(
        type_name="Channel", object_name="metrics", repr_text="Channel('metrics')",
        attributes={"name": "metrics", "sock": socket_placeholder(1),
                    "tags": "['demo', 'unpicklable']"},
        failed={"sock": SOCKET_ERROR})
    c.add_placeholder("placeholder_nested_socket", channel)
    c.add_placeholder("placeholder_minimal_no_name", placeholder(
        type_name="Lock", module="_thread", qualname="lock", object_name=None,
        repr_text="<unlocked _thread.lock object>", error=LOCK_ERROR))
    c.add_placeholder("placeholder_failed_attributes", placeholder(
        type_name="Worker", object_name="worker", str_text="worker #1",
        attributes={"id": 1, "ratio": 0.25, "ok": True, "blob": b"\x00\xff", "note": None},
        failed={"lock": "TypeError: cannot pickle '_thread.lock' object",
                "conn": "RuntimeError: attribute access failed: \"closed\""},
        error=LOCK_ERROR))
    level3 = placeholder(type_name="Leaf", object_name="leaf", depth=3,
                         attributes={"sock": "<socket.socket fd=3>"})
    level2 = placeholder(type_name="Inner", object_name="inner", depth=2,
                         attributes={"leaf": level3}, failed={"leaf": SOCKET_ERROR})
    level1 = placeholder(type_name="Middle", object_name="middle", depth=1,
                         attributes={"inner": level2}, failed={"inner": SOCKET_ERROR})
    c.add_placeholder("placeholder_depth_chain", placeholder(
        type_name="Outer", object_name="outer", attributes={"middle": level1, "n": 5},
        failed={"middle": SOCKET_ERROR}))
    c.add_placeholder("placeholder_circular_reference", placeholder(
        type_name="Holder", object_name="holder", error="circular_reference",
        attempts=["circular_reference"], depth=1))
    c.add_placeholder("placeholder_many_attributes", placeholder(
        type_name="Wide", object_name="wide",
        attributes={f"a{i:02d}": i for i in range(60)}))
    c.add_placeholder("placeholder_collection_attributes", placeholder(
        type_name="Bag", object_name="bag", module="app.models",
        attributes={"items": list(range(55)), "pair": (1, "two"),
                    "mapping": {"k": [1, {"deep": {"deeper": [1]}}], 3: "int key"},
                    "tags": {"b", "a", "c"}, "when": datetime.date(2024, 1, 2),
                    "text": "é ünïcode"}))
    c.add_placeholder("placeholder_in_module_class", placeholder(
        type_name="Client", module="app.net", qualname="Pool.Client", object_name="client",
        attributes={"sock": socket_placeholder(1), "retries": 3},
        failed={"sock": SOCKET_ERROR}))
    data = bytearray(b"\x80\x04")
    _hand_value(channel, data)
    data += b"."
    c.add_placeholder("placeholder_hand_built_like_demo", data=bytes(data))


# -- unknown globals ---------------------------------------------------------


def _p4_global(module: str, name: str) -> bytes:
    out = bytearray()
    _hand_text(module, out)
    _hand_text(name, out)
    return bytes(out) + b"\x93"


def add_unknown_globals(c: Corpus) -> None:
    g = "unknown_global"
    c.add_raw("unknown_reduce_mymodule_make", g,
              b"\x80\x04" + _p4_global("mymodule", "make") + b"K\x01K\x02\x86R.", 4)
    c.add_raw("unknown_newobj_build_instance", g,
              b"\x80\x04" + _p4_global("pkg.sub", "Thing") + b")\x81}(\x8c\x01aK\x01ub.", 4)
    c.add_raw("unknown_os_system_never_run", g,
              b"\x80\x04" + _p4_global("os", "system") + b"\x8c\x04true\x85R.", 4)
    c.add_raw("unknown_builtins_eval_never_run", g,
              b"\x80\x04" + _p4_global("builtins", "eval") + b"\x8c\x031+1\x85R.", 4)
    c.add_raw("unknown_protocol0_global_in_list", g,
              b"(lp0\ncmain_missing\nfunction\np1\n(I1\nVx\np2\ntp3\nRp4\na.", 0)


# -- protocols ---------------------------------------------------------------


def add_protocols(c: Corpus) -> None:
    g = "protocols"
    shared = [1]
    shared_cyclic: list = [shared, shared]
    shared_cyclic.append(shared_cyclic)
    recursive_tuple: tuple = ([],)
    recursive_tuple[0].append(recursive_tuple)
    values: List[Tuple[str, Any]] = [
        ("ints", [0, 1, 255, 256, 65535, 65536, -1, -129, 2**31 - 1, -2**31, 2**31, 2**64,
                  -2**100, None, True, False]),
        ("floats", [0.0, -0.0, 0.1, 1e16, 1e-05, 5e-324, math.inf, -math.inf, math.nan]),
        ("text", "it's \"quoted\" \\ é 😀 \u2028 \x00\n\ud800"),
        ("bytes", b"\x00\xffab'\"" + bytes(range(256))),
        ("bytearray", bytearray(b"ab\x00\xff")),
        ("nested", {"t": (1,), "e": (), "l": [1, [2, 3]], "s": {1, 2}, "f": frozenset({3}),
                    (1, "k"): None, 2.5: b"x"}),
        ("shared_cyclic", shared_cyclic),
        ("recursive_tuple", recursive_tuple),
        ("stdlib", [datetime.datetime(2024, 1, 2, 3, 4, 5, 6,
                                      tzinfo=datetime.timezone(datetime.timedelta(hours=5))),
                    decimal.Decimal("-1.5E+3"), collections.OrderedDict(a=1),
                    collections.deque([1], maxlen=2), fractions.Fraction(1, 3)]),
        ("module_instances", [fixture_mod.Point(1, 2), fixture_mod.Plain("a", [1])]),
        ("main_dataclass", MainPoint(3, 4)),
        ("exception", ValueError("bad", 2)),
    ]
    for name, value in values:
        for protocol in (0, 1, 2, 3, 5):
            try:
                c.add(f"proto_{name}_dill_p{protocol}", g, value, protocol=protocol)
            except Exception as exc:  # noqa: BLE001 - dill itself cannot do it
                c.skipped.append(f"proto_{name}_dill_p{protocol}: {type(exc).__name__}: {exc}")
        c.add(f"proto_{name}_pickle_p4", g, value, pickler="pickle")
    for name, value in values:
        if name in ("ints", "recursive_tuple", "module_instances"):
            for protocol in (0, 2):
                c.add(f"proto_{name}_pickle_p{protocol}", g, value, protocol=protocol,
                      pickler="pickle")


def build() -> Corpus:
    corpus = Corpus()
    for step in (add_ints, add_constants, add_floats, add_strings, add_bytes, add_containers,
                 add_stdlib, add_exceptions, add_user_classes, add_functions,
                 add_placeholders, add_unknown_globals, add_protocols):
        step(corpus)
    return corpus


def render(corpus: Corpus) -> bytes:
    lines = [json.dumps(record) for record in corpus.records]
    return ("\n".join(lines) + "\n").encode("ascii")


# ---------------------------------------------------------------------------
# Reporting: which globals the pickles reference
# ---------------------------------------------------------------------------

STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING",
              "BINSTRING", "SHORT_BINSTRING"}


def globals_in(data: bytes) -> List[Tuple[str, str]]:
    """(module, name) of every GLOBAL, INST and STACK_GLOBAL, following the memo."""
    memo: Dict[int, Any] = {}
    pushed: List[Any] = []
    found: List[Tuple[str, str]] = []
    for op, arg, _pos in pickletools.genops(data):
        if op.name in STRING_OPS:
            pushed.append(arg)
        elif op.name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(arg))
        elif op.name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = pushed[-1] if pushed else None
        elif op.name == "STACK_GLOBAL":
            found.append((str(pushed[-2]), str(pushed[-1])))
            pushed.append(None)
        elif op.name in ("GLOBAL", "INST"):
            module, name = arg.split(" ", 1)
            found.append((module, name))
            pushed.append(None)
        else:
            pushed.append(None)
    return found


def report(corpus: Corpus, size: int) -> None:
    groups = collections.Counter(record["group"] for record in corpus.records)
    log(f"{len(corpus.records)} lines, {size} bytes")
    for group, count in groups.items():
        exact = sum(1 for r in corpus.records if r["group"] == group and r["exact"])
        null = sum(1 for r in corpus.records if r["group"] == group and r["expected_repr"] is None)
        log(f"  {group:16} {count:4} lines ({exact} exact, {null} expected_repr null)")
    uses: Dict[Tuple[str, str], int] = collections.Counter()
    for record in corpus.records:
        for pair in set(globals_in(base64.b64decode(record["pickle"]))):
            uses[pair] += 1
    for line in corpus.skipped:
        log(f"  skipped (cannot be pickled): {line}")
    log("globals referenced (module, name): lines using it")
    for (module, name), count in sorted(uses.items()):
        log(f"  {module} {name}: {count}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Write the pickle fixture corpus.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output file")
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the output file differs")
    options = parser.parse_args(argv)
    if sys.version_info[:2] != (3, 11):
        log(f"warning: Python {sys.version.split()[0]}: the corpus was made with 3.11; "
            "bytes of pickled code objects will differ")
    normalize_main_code(globals())
    corpus = build()
    content = render(corpus)
    if options.check:
        current = options.out.read_bytes() if options.out.exists() else b""
        if current != content:
            log(f"{options.out} is stale: re-run scripts/gen_pickle_fixtures.py")
            return 1
        log(f"{options.out} is up to date")
    else:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_bytes(content)
        log(f"wrote {options.out}")
    report(corpus, len(content))
    return 0


if __name__ == "__main__":
    sys.exit(main())
