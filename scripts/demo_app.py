#!/usr/bin/env python3
"""A small Python app that talks to cideldill-server exactly like `cideldill_client` does.

What it does
    It wraps a few functions the way `with_debug(...)` does, then calls them. Each wrapped
    function gets a breakpoint, so with the server's default settings every call pauses
    twice: before it runs and after it returns. While a call is paused, you
    resume it with curl and watch the effect on stdout:

        add(x, y=1)          adds two numbers
        greet(name)          builds a greeting
        summarize(data, point, box, when, tags)
                             takes a dict, a dataclass, a plain class instance, a datetime
                             and a set: the server shows each as Python would
        describe(channel)    takes an object holding a socket, which cannot be pickled:
                             the client sends a `pickle_error` event and a placeholder
        divide(a, b)         called as divide(1, 0): raises ZeroDivisionError
        multiply(x, y=1)     registered but never called: a replacement for add
        resize(x, label, scale=2)
                             with --items N, called N times instead of the above, as
                             resize(i, label="item-00i", scale=2): try a conditional
                             breakpoint or a logpoint on it

    The wire traffic follows the real client (see docs/protocol.md, the wire protocol,
    sections 0 to 3): GET /api/breakpoints; per wrapped function POST
    /api/breakpoints, POST /api/functions and a `with_debug.register` event; per call the
    spurious `__getattr__('_cideldill_alias_name')` event, POST /api/call/start (CID items,
    data sent only the first time, `cid_not_found` resend), polling of /api/poll/<id> and
    /api/poll-repl/<id>, REPL results on /api/call/repl-result, and POST
    /api/call/complete with its optional after-pause. A 4xx/5xx answer is fatal, as in
    the real client: the demo reports it on /api/report-com-error and exits with 1.

How to run it
    Start the server, then the demo, in two terminals:

        target/debug/cideldill-server --memory            # terminal 1
        python3 scripts/demo_app.py                        # terminal 2

    The demo prints a ready-to-paste curl command on stderr at every pause, e.g.

        curl -s -X POST http://localhost:5174/api/paused/<id>/continue \\
             -H 'Content-Type: application/json' -d '{"action":"continue"}'

    Other resume bodies worth trying on a before-pause:
        {"action":"modify","modified_args":[10],"modified_kwargs":{"y":20}}   (for add)
        {"action":"skip","fake_result":99}
        {"action":"raise","exception_type":"ValueError","exception_message":"boom"}
        {"action":"continue","replacement_function":"multiply"}
    An after-pause only accepts "continue" (the real client raises on anything else).

    With the server's default global behavior `stop`, a call that raises does not pause
    after it (only `exception` and `stop_exception` pause on exceptions). To also see the
    exception pause of divide(1, 0), run this before starting the demo:
        curl -s -X POST $URL/api/behavior -H 'Content-Type: application/json' \\
             -d '{"behavior":"stop_exception"}'

    ($URL stands for the server URL, e.g. http://localhost:5174.)
    While a call is paused you can evaluate Python in it:
        curl -s -X POST $URL/api/repl/start -H 'Content-Type: application/json' \\
             -d '{"pause_id":"<id>"}'                          # -> {"session_id": ...}
        curl -s -X POST $URL/api/repl/<session_id>/eval \\
             -H 'Content-Type: application/json' -d '{"expr":"args"}'

    Options:
        --server URL   server URL (else $CIDELDILL_SERVER_URL, else the port file
                       --port-file PATH, $CIDELDILL_PORT_FILE, $CIDELDILL_HOME/port or
                       ~/.cideldill/port, else http://localhost:5174); only localhost,
                       127.0.0.1 and ::1
        --port-file PATH  the port file of a server started with --port-file PATH
        --loop N       run the sequence of calls N times (default 1)
        --dill         pickle with dill (as the real client does) instead of the
                       standard pickle module
        --items N      call resize(i, label="item-<i, 3 digits>", scale=2) for i in
                       0..N-1 instead of the usual sequence, e.g. with
                         curl -s -X POST $URL/api/breakpoints \\
                              -H 'Content-Type: application/json' -d '{"function_name":
                              "resize", "behavior": "stop", "condition":
                              "kwargs[\\"label\\"].startswith(\\"item-00\\") and args[0] % 2 == 1"}'
                       and the global behavior go: only the odd calls among the first
                       ten pause
        --self-test    check the pickle/CID building offline and exit

Exit status
    0 all calls finished; 1 the server failed or answered with an error status (like the
    real client); 2 bad usage or setup (non-local URL, dill could not be installed);
    3 a call ended in a client-side protocol error (the server sent something the real
    client cannot handle).

What it needs
    Python 3.8 or newer (tested with 3.11) and its standard library. With --dill it needs
    `dill`: if it is not importable, the demo runs
        python3 -m pip install --quiet --target <cache> dill==0.4.1
    where <cache> is $CIDELDILL_DEMO_CACHE, else <repo>/.cache/python, and imports it
    from there.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime
import builtins
import codeop
import hashlib
import http.client
import importlib
import inspect
import io
import json
import os
import pickle
import pickletools
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
import types
import urllib.error
import urllib.parse
import urllib.request
import warnings
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

DILL_VERSION = "0.4.1"
DEFAULT_SERVER_URL = "http://localhost:5174"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
PICKLE_PROTOCOL = 4

PLACEHOLDER_MODULE = "cideldill_client.custom_picklers"
PLACEHOLDER_FUNCTION = "_reconstruct_placeholder"
MAX_REPR_LENGTH = 300
MAX_SNAPSHOT_DEPTH = 3
MAX_SNAPSHOT_ATTRIBUTES = 100
CACHE_LIMIT = 10_000
REPL_EVAL_TIMEOUT_S = 30.0

EXIT_OK = 0
EXIT_SERVER_FAILURE = 1
EXIT_USAGE = 2
EXIT_PROTOCOL = 3


def log(message: str) -> None:
    """Progress output: always stderr, so stdout only carries call results."""
    print(f"demo: {message}", file=sys.stderr, flush=True)


class DebugServerError(Exception):
    """Bad server configuration (e.g. a non-local URL)."""


class DebugProtocolError(Exception):
    """The server sent something the client cannot act on."""


class DebugCIDNotFoundError(DebugProtocolError):
    """call/start still reported missing CIDs after the resend."""


class SetupError(Exception):
    """The demo could not prepare itself (e.g. installing dill failed)."""


# ---------------------------------------------------------------------------
# Server URL (docs/protocol.md, §6)
# ---------------------------------------------------------------------------


# The port file named by --port-file, which wins over the environment (set in main).
PORT_FILE_OPTION: Optional[str] = None


def port_file_path() -> Path:
    explicit = PORT_FILE_OPTION or os.environ.get("CIDELDILL_PORT_FILE")
    if explicit:
        return Path(os.path.expanduser(explicit))
    home = os.environ.get("CIDELDILL_HOME")
    if home:
        return Path(os.path.expanduser(home)) / "port"
    return Path(os.path.expanduser("~/.cideldill/port"))


def read_port_file() -> Optional[int]:
    try:
        text = port_file_path().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not (text.isascii() and text.isdigit()):
        return None
    port = int(text)
    return port if 1 <= port <= 65535 else None


def validate_localhost(url: str) -> None:
    if urllib.parse.urlparse(url).hostname not in LOCAL_HOSTS:
        raise DebugServerError(f"Debug server URL must be localhost-only: {url}")


def resolve_server_url(cli_url: Optional[str]) -> str:
    if cli_url:
        validate_localhost(cli_url)
        return cli_url.rstrip("/")
    env_url = os.environ.get("CIDELDILL_SERVER_URL")
    if env_url:
        validate_localhost(env_url)
        return env_url.rstrip("/")
    port = read_port_file()
    if port:
        return f"http://localhost:{port}"
    return DEFAULT_SERVER_URL


# ---------------------------------------------------------------------------
# Placeholders for objects that cannot be pickled (docs/protocol.md, §4.4)
# ---------------------------------------------------------------------------


class Placeholder:
    """Local stand-in for cideldill_client's UnpicklablePlaceholder."""

    FIELDS = (
        "type_name", "module", "qualname", "object_name", "object_path", "object_id",
        "repr_text", "str_text", "attributes", "failed_attributes", "pickle_error",
        "pickle_attempts", "capture_timestamp", "depth",
    )

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    @classmethod
    def reconstruct(cls, info: Dict[str, Any]) -> "Placeholder":
        """What `_reconstruct_placeholder(info)` builds on the receiving side."""
        return cls(
            type_name=str(info.get("type_name", "Unknown")),
            module=info.get("module", "unknown"),
            qualname=info.get("qualname", "Unknown"),
            object_name=info.get("object_name"),
            object_path=info.get("object_path"),
            object_id=info.get("object_id", "unknown"),
            repr_text=info.get("repr_text", ""),
            str_text=info.get("str_text"),
            attributes=info.get("attributes", {}),
            failed_attributes=info.get("failed_attributes", {}),
            pickle_error=info.get("pickle_error", ""),
            pickle_attempts=info.get("pickle_attempts", []),
            capture_timestamp=info.get("capture_timestamp", 0.0),
            depth=info.get("depth", 0),
        )

    def to_dict(self) -> Dict[str, Any]:
        fields = {name: getattr(self, name) for name in self.FIELDS}
        fields["pickle_attempts"] = list(self.pickle_attempts)
        return fields

    def __repr__(self) -> str:
        return (
            f"<UnpicklablePlaceholder {self.module}.{self.qualname} "
            f"attrs={len(self.attributes)} failed={len(self.failed_attributes)} "
            f"error={self.pickle_error!r}>"
        )


def _encode_text(text: str, out: bytearray) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) < 256:
        out += b"\x8c" + bytes([len(raw)])  # SHORT_BINUNICODE
    else:
        out += b"X" + struct.pack("<I", len(raw))  # BINUNICODE
    out += raw


def _encode_value(value: Any, out: bytearray) -> None:
    """Pickle opcodes (protocol 4 subset, no memo, no frames) for a snapshot value."""
    if isinstance(value, Placeholder):
        _encode_text(PLACEHOLDER_MODULE, out)
        _encode_text(PLACEHOLDER_FUNCTION, out)
        out += b"\x93"  # STACK_GLOBAL
        _encode_value(value.to_dict(), out)
        out += b"\x85R"  # TUPLE1, REDUCE
    elif value is None:
        out += b"N"
    elif value is True:
        out += b"\x88"
    elif value is False:
        out += b"\x89"
    elif isinstance(value, int):
        if 0 <= value < 256:
            out += b"K" + bytes([value])  # BININT1
        elif 0 <= value < 65536:
            out += b"M" + struct.pack("<H", value)  # BININT2
        elif -(2 ** 31) <= value < 2 ** 31:
            out += b"J" + struct.pack("<i", value)  # BININT
        else:
            raw = pickle.encode_long(value)
            out += b"\x8a" + bytes([len(raw)]) + raw  # LONG1
    elif isinstance(value, float):
        out += b"G" + struct.pack(">d", value)  # BINFLOAT
    elif isinstance(value, str):
        _encode_text(value, out)
    elif isinstance(value, bytes):
        if len(value) < 256:
            out += b"C" + bytes([len(value)]) + value  # SHORT_BINBYTES
        else:
            out += b"B" + struct.pack("<I", len(value)) + value  # BINBYTES
    elif isinstance(value, list):
        out += b"]"  # EMPTY_LIST
        if value:
            out += b"("  # MARK
            for item in value:
                _encode_value(item, out)
            out += b"e"  # APPENDS
    elif isinstance(value, dict):
        out += b"}"  # EMPTY_DICT
        if value:
            out += b"("  # MARK
            for key, item in value.items():
                _encode_value(str(key), out)
                _encode_value(item, out)
            out += b"u"  # SETITEMS
    else:
        _encode_value(_safe_repr(value), out)


def placeholder_pickle(placeholder: Placeholder) -> bytes:
    """REDUCE of cideldill_client.custom_picklers._reconstruct_placeholder over its dict."""
    out = bytearray(b"\x80\x04")  # PROTO 4
    _encode_value(placeholder, out)
    out += b"."  # STOP
    return bytes(out)


class _PickleUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (PLACEHOLDER_MODULE, PLACEHOLDER_FUNCTION):
            return Placeholder.reconstruct
        return super().find_class(module, name)


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _safe_repr(obj: Any, limit: int = MAX_REPR_LENGTH) -> str:
    try:
        text = repr(obj)
    except Exception as exc:  # noqa: BLE001 - repr of arbitrary objects
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    return _truncate(text, limit)


def _safe_str(obj: Any, repr_text: str) -> Optional[str]:
    try:
        text = str(obj)
    except Exception as exc:  # noqa: BLE001
        text = f"<str failed: {type(exc).__name__}: {exc}>"
    text = _truncate(text, MAX_REPR_LENGTH)
    return None if text == repr_text else text


def _object_name(obj: Any) -> str:
    for attr in ("_cideldill_alias_name", "__name__", "name", "tool_name", "function_name"):
        try:
            value = getattr(obj, attr)
        except Exception:  # noqa: BLE001
            continue
        if isinstance(value, str) and value:
            return value
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(qualname, str) and qualname:
        return qualname
    return type(obj).__qualname__


def _type_path(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _iter_attributes(obj: Any):
    seen = set()
    if hasattr(obj, "__dict__"):
        for name, value in list(vars(obj).items()):
            if name.startswith("__") and name.endswith("__"):
                continue
            seen.add(name)
            yield name, value
    for klass in type(obj).__mro__:
        slots = getattr(klass, "__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        for slot in slots:
            if slot in ("__dict__", "__weakref__") or slot in seen:
                continue
            if slot.startswith("__") and slot.endswith("__"):
                continue
            try:
                value = getattr(obj, slot)
            except AttributeError:
                continue
            seen.add(slot)
            yield slot, value


# ---------------------------------------------------------------------------
# Serialization with CID deduplication (docs/protocol.md, §3)
# ---------------------------------------------------------------------------


def compute_cid(data: bytes) -> str:
    return hashlib.sha512(data).hexdigest()


class Serializer:
    """pickle (or dill) protocol 4, placeholders for failures, and the 'sent' set."""

    def __init__(self, dill_module: Any = None) -> None:
        self._dill = dill_module
        self.label = "dill.dumps" if dill_module is not None else "pickle.dumps"
        self._sent: "OrderedDict[str, bool]" = OrderedDict()
        self._lock = threading.RLock()
        self._reporting = threading.local()
        self.report_error: Optional[Callable[[Dict[str, Any]], None]] = None
        if dill_module is not None:
            base = dill_module.Unpickler

            class _DillUnpickler(base):  # type: ignore[misc, valid-type]
                def find_class(self, module: str, name: str) -> Any:
                    if (module, name) == (PLACEHOLDER_MODULE, PLACEHOLDER_FUNCTION):
                        return Placeholder.reconstruct
                    return super().find_class(module, name)

            self._unpickler = _DillUnpickler
        else:
            self._unpickler = _PickleUnpickler

    # -- raw pickling -----------------------------------------------------
    def _raw_dumps(self, obj: Any) -> bytes:
        if isinstance(obj, Placeholder):
            return placeholder_pickle(obj)
        if self._dill is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return self._dill.dumps(obj, protocol=PICKLE_PROTOCOL)
        return pickle.dumps(obj, protocol=PICKLE_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        return self._unpickler(io.BytesIO(data)).load()

    def loads_base64(self, text: str) -> Any:
        return self.loads(base64.b64decode(text))

    # -- graceful degradation ---------------------------------------------
    def dumps(self, obj: Any, *, depth: int = 0, visited: Optional[set] = None) -> bytes:
        if visited is None:
            visited = set()
        if id(obj) in visited:
            return placeholder_pickle(self._bare_placeholder(
                obj, "circular_reference", ["circular_reference"], depth))
        attempts: List[str] = []
        try:
            return self._raw_dumps(obj)
        except Exception as exc:  # noqa: BLE001 - any pickling failure degrades
            attempts.append(f"{self.label}: {type(exc).__name__}: {exc}")
            error = exc
        if depth >= MAX_SNAPSHOT_DEPTH:
            placeholder = self._bare_placeholder(
                obj, f"{type(error).__name__}: {error}", attempts, depth)
        else:
            placeholder = self._snapshot(obj, error, attempts, depth, visited)
        data = placeholder_pickle(placeholder)
        self._report(obj, error, attempts, data, placeholder)
        return data

    def _bare_placeholder(self, obj: Any, error_text: str, attempts: List[str],
                          depth: int) -> Placeholder:
        repr_text = _safe_repr(obj)
        return Placeholder(
            type_name=type(obj).__name__, module=type(obj).__module__,
            qualname=type(obj).__qualname__, object_name=_object_name(obj),
            object_path=_type_path(obj), object_id=hex(id(obj)), repr_text=repr_text,
            str_text=_safe_str(obj, repr_text), attributes={}, failed_attributes={},
            pickle_error=error_text, pickle_attempts=list(attempts),
            capture_timestamp=time.time(), depth=depth,
        )

    def _snapshot(self, obj: Any, error: Exception, attempts: List[str], depth: int,
                  visited: set) -> Placeholder:
        placeholder = self._bare_placeholder(
            obj, f"{type(error).__name__}: {error}", attempts, depth)
        visited.add(id(obj))
        items = list(_iter_attributes(obj))
        for index, (name, value) in enumerate(items):
            if index >= MAX_SNAPSHOT_ATTRIBUTES:
                placeholder.failed_attributes["__skipped__"] = (
                    f"{len(items) - MAX_SNAPSHOT_ATTRIBUTES} more attributes skipped")
                break
            try:
                nested = self.loads(self.dumps(value, depth=depth + 1, visited=visited))
                if isinstance(nested, Placeholder):
                    placeholder.attributes[name] = nested
                    placeholder.failed_attributes[name] = nested.pickle_error
                elif isinstance(nested, (str, int, float, bool, bytes, type(None))):
                    placeholder.attributes[name] = nested
                else:
                    placeholder.attributes[name] = _safe_repr(nested)
            except Exception as exc:  # noqa: BLE001 - snapshots are best effort
                placeholder.failed_attributes[name] = f"{type(exc).__name__}: {exc}"
        placeholder.capture_timestamp = time.time()
        return placeholder

    def _report(self, obj: Any, error: Exception, attempts: List[str], data: bytes,
                placeholder: Placeholder) -> None:
        reporter = self.report_error
        if reporter is None or getattr(self._reporting, "active", False):
            return
        self._reporting.active = True
        try:
            tb = error.__traceback__
            stack_trace = [
                {"filename": frame.filename, "lineno": frame.lineno, "function": frame.name,
                 "code_context": frame.line.strip() if frame.line else None}
                for frame in traceback.extract_tb(tb)
            ] if tb is not None else []
            formatted = "".join(traceback.format_exception(type(error), error, tb)) if tb else ""
            reporter({
                "event_type": "pickle_error",
                "timestamp": time.time(),
                "object_type": _type_path(obj),
                "object_name": _object_name(obj),
                "object_id": hex(id(obj)),
                "object_repr": _safe_repr(obj),
                "error": f"{type(error).__name__}: {error}",
                "attempts": list(attempts),
                "traceback": _truncate(formatted, 8000),
                "call_site": {"timestamp": time.time(), "stack_trace": stack_trace},
                "placeholder_cid": compute_cid(data),
                "placeholder_data": base64.b64encode(data).decode("ascii"),
                "placeholder_summary": placeholder.to_dict(),
            })
        finally:
            self._reporting.active = False

    # -- items ------------------------------------------------------------
    def serialize(self, obj: Any) -> Tuple[str, Optional[str]]:
        """(cid, base64 data), data None when this CID was already sent."""
        with self._lock:
            data = self.dumps(obj)
            cid = compute_cid(data)
            if cid in self._sent:
                self._sent.move_to_end(cid)
                return cid, None
            self._sent[cid] = True
            if len(self._sent) > CACHE_LIMIT:
                self._sent.popitem(last=False)
            return cid, base64.b64encode(data).decode("ascii")

    def force_serialize(self, obj: Any) -> Tuple[str, str]:
        """(cid, base64 data) without consulting the sent set."""
        with self._lock:
            data = self.dumps(obj)
            return compute_cid(data), base64.b64encode(data).decode("ascii")


def sanitize_for_json(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(key): sanitize_for_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [sanitize_for_json(item) for item in value]
    return repr(value)


def build_stack_trace(skip: int) -> List[Dict[str, Any]]:
    """Caller frames, innermost first, as the client's call_site.stack_trace."""
    trace = []
    for frame in inspect.stack()[skip + 1:]:
        trace.append({
            "filename": frame.filename,
            "lineno": frame.lineno,
            "function": frame.function,
            "code_context": frame.code_context[0].strip() if frame.code_context else None,
        })
    return trace


def exception_type_name(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


# ---------------------------------------------------------------------------
# REPL evaluation inside a paused call (docs/protocol.md, §2.7 and §2.8)
# ---------------------------------------------------------------------------


class _RoutingStream:
    """sys.stdout/sys.stderr wrapper that captures writes of REPL evaluation threads."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._local = threading.local()

    def capture(self, buffer: Optional[io.StringIO]) -> None:
        self._local.buffer = buffer

    def write(self, text: str) -> int:
        buffer = getattr(self._local, "buffer", None)
        return (buffer if buffer is not None else self._real).write(text)

    def flush(self) -> None:
        buffer = getattr(self._local, "buffer", None)
        if buffer is None:
            self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


_ROUTING_LOCK = threading.Lock()


def _routing_streams() -> Tuple[_RoutingStream, _RoutingStream]:
    with _ROUTING_LOCK:
        if not isinstance(sys.stdout, _RoutingStream):
            sys.stdout = _RoutingStream(sys.stdout)
        if not isinstance(sys.stderr, _RoutingStream):
            sys.stderr = _RoutingStream(sys.stderr)
    return sys.stdout, sys.stderr  # type: ignore[return-value]


def _is_incomplete(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return codeop.compile_command(source, "<cideldill-repl>", "exec") is None
    except (SyntaxError, ValueError, OverflowError):
        return False


def evaluate(expr: str, namespace: Dict[str, Any]) -> Tuple[bool, Any, str, Optional[str]]:
    """Eval first, exec as fallback. Returns (eval_mode, value, captured output, error)."""
    out, err = _routing_streams()
    buffer = io.StringIO()
    out.capture(buffer)
    err.capture(buffer)
    eval_mode, value, error = True, None, None
    try:
        try:
            code = compile(expr, "<cideldill-repl>", "eval")
        except SyntaxError:
            eval_mode = False
            try:
                code = compile(expr, "<cideldill-repl>", "exec")
            except SyntaxError as exc:
                code = None
                if _is_incomplete(expr):
                    error = "SyntaxError: incomplete input"
                else:
                    error = f"SyntaxError: {exc.msg}"
        if code is not None:
            try:
                if eval_mode:
                    value = eval(code, namespace)  # noqa: S307 - that is the feature
                else:
                    exec(code, namespace)  # noqa: S102
            except BaseException as exc:  # noqa: BLE001 - report everything, incl. SystemExit
                error = f"{type(exc).__name__}: {exc}"
    finally:
        out.capture(None)
        err.capture(None)
    return eval_mode, value, buffer.getvalue(), error


class PauseContext:
    """What a REPL evaluation at one pause can see, and how the pause is described."""

    def __init__(self, label: str, namespace: Dict[str, Any]) -> None:
        self.label = label
        self.namespace = namespace
        self.announced: set = set()
        self.inflight: Optional[threading.Thread] = None


# ---------------------------------------------------------------------------
# HTTP client (docs/protocol.md, §1.1 and §2)
# ---------------------------------------------------------------------------


class _Timeout(Exception):
    pass


class DebugClient:
    """Speaks the debug-client protocol of cideldill_client's DebugClient."""

    def __init__(self, server_url: str, serializer: Serializer, *, timeout_s: float = 30.0,
                 retry_timeout_s: float = 60.0, retry_sleep_s: float = 0.25) -> None:
        self.server_url = server_url.rstrip("/")
        self.serializer = serializer
        self.timeout_s = timeout_s
        self.retry_timeout_s = retry_timeout_s
        self.retry_sleep_s = retry_sleep_s
        self.process_pid = os.getpid()
        self.process_start_time = time.time()
        self.object_cache: "OrderedDict[str, Any]" = OrderedDict()
        self.functions: Dict[str, Callable[..., Any]] = {}
        self.repl_sessions: Dict[str, Dict[str, Any]] = {}
        self._ref_lock = threading.Lock()
        self._ref_counter = 0
        self._ref_by_obj: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
        self._ref_by_id: Dict[int, int] = {}
        self._ref_objects: "OrderedDict[int, Any]" = OrderedDict()
        self._last_suspended_log = 0.0
        interval = os.environ.get("CIDELDILL_SUSPENDED_BREAKPOINT_LOG_INTERVAL_S", "60")
        try:
            self._suspended_log_interval = float(interval)
        except ValueError:
            self._suspended_log_interval = 60.0
        serializer.report_error = self._report_serialization_error

    # -- transport --------------------------------------------------------
    def _send(self, method: str, path: str, payload: Optional[Dict[str, Any]],
              timeout: float) -> Tuple[int, str]:
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(self.server_url + path, data=body, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            try:
                text = exc.read().decode("utf-8", "replace")
            finally:
                exc.close()
            return exc.code, text
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise _Timeout(str(exc.reason)) from exc
            raise
        except (TimeoutError, socket.timeout) as exc:
            raise _Timeout(str(exc)) from exc

    def _request(self, method: str, path: str,
                 payload: Optional[Dict[str, Any]] = None) -> Tuple[int, str]:
        """Send once; only timeouts are retried (0.25 s apart, 60 s in all)."""
        deadline = time.time() + self.retry_timeout_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._send(method, path, payload, self.timeout_s)
            except _Timeout as exc:
                log(f"request timed out (attempt {attempt} {method} {path} "
                    f"timeout_s={self.timeout_s:.1f})")
                if time.time() + self.retry_sleep_s >= deadline:
                    self._fail("Debug server request failed", method, path, payload,
                               exception=exc)
                time.sleep(self.retry_sleep_s)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self._fail("Debug server request failed", method, path, payload, exception=exc)

    def _fail(self, summary: str, method: str, path: str,
              payload: Optional[Dict[str, Any]], *, status: Optional[int] = None,
              text: Optional[str] = None, exception: Optional[BaseException] = None) -> None:
        self.report_com_error(summary, method, path, payload, status_code=status,
                              response_text=text, exception=exception)
        if status is not None:
            summary = f"Debug server error: {status} {text}"
        exit_with_server_failure(summary, self.server_url, exception)

    def _parse(self, method: str, path: str, payload: Optional[Dict[str, Any]], status: int,
               text: str) -> Dict[str, Any]:
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.report_com_error("Malformed JSON response", method, path, payload,
                                  status_code=status, response_text=text, exception=exc)
            raise DebugProtocolError(f"Malformed JSON response from {method} {path}") from exc
        if not isinstance(data, dict):
            raise DebugProtocolError(f"Expected a JSON object from {method} {path}: {text[:200]}")
        return data

    def post_json(self, path: str, payload: Dict[str, Any]) -> Dict[str, Any]:
        status, text = self._request("POST", path, payload)
        if status >= 400:
            self._fail("Debug server error", "POST", path, payload, status=status, text=text)
        return self._parse("POST", path, payload, status, text)

    def get_json(self, path: str) -> Dict[str, Any]:
        status, text = self._request("GET", path)
        if status >= 400:
            self._fail("Debug server error", "GET", path, None, status=status, text=text)
        return self._parse("GET", path, None, status, text)

    def post_json_allowing_cid_errors(self, path: str, payload: Dict[str, Any]) -> Dict[str, Any]:
        status, text = self._request("POST", path, payload)
        data = self._parse("POST", path, payload, status, text)
        if status >= 400 and data.get("error") != "cid_not_found":
            self._fail("Debug server error", "POST", path, payload, status=status, text=text)
        return data

    def report_com_error(self, summary: str, method: str, path: str,
                         payload: Optional[Dict[str, Any]] = None, *,
                         status_code: Optional[int] = None, response_text: Optional[str] = None,
                         exception: Optional[BaseException] = None) -> None:
        """POST /api/report-com-error, best effort with a 5 s timeout."""
        body: Dict[str, Any] = {
            "summary": summary,
            "timestamp": time.time(),
            "method": method,
            "path": path,
            "server_url": self.server_url,
            "process_pid": self.process_pid,
            "process_start_time": self.process_start_time,
        }
        if payload is not None:
            body["payload"] = sanitize_for_json(payload)
        if status_code is not None:
            body["status_code"] = status_code
        if response_text is not None:
            body["response_text"] = (response_text if len(response_text) <= 4000
                                     else response_text[:4000] + "...")
        if exception is not None:
            body["exception_type"] = type(exception).__name__
            body["exception_message"] = str(exception)
            tb = "".join(traceback.format_exception(type(exception), exception,
                                                    exception.__traceback__))
            body["traceback"] = tb if len(tb) <= 4000 else tb[:4000] + "..."
        try:
            self._send("POST", "/api/report-com-error", body, min(5.0, self.timeout_s))
        except Exception:  # noqa: BLE001 - best effort
            pass

    def _require_ok(self, response: Dict[str, Any], summary: str) -> None:
        if response.get("status") != "ok":
            exit_with_server_failure(summary, self.server_url)

    # -- identities -------------------------------------------------------
    def client_ref(self, obj: Any) -> int:
        """A stable number per live object (weakref when possible, else id)."""
        with self._ref_lock:
            try:
                existing = self._ref_by_obj.get(obj)
            except TypeError:
                existing = None
            if existing is not None:
                return existing
            existing = self._ref_by_id.get(id(obj))
            if existing is not None:
                self._ref_objects.move_to_end(id(obj))
                return existing
            self._ref_counter += 1
            ref = self._ref_counter
            try:
                self._ref_by_obj[obj] = ref
            except TypeError:
                self._ref_by_id[id(obj)] = ref
                self._ref_objects[id(obj)] = obj  # keeps id() stable
                if len(self._ref_objects) > CACHE_LIMIT:
                    old_id, _ = self._ref_objects.popitem(last=False)
                    self._ref_by_id.pop(old_id, None)
            return ref

    def remember(self, cid: str, obj: Any) -> None:
        if cid in self.object_cache:
            self.object_cache.move_to_end(cid)
            return
        self.object_cache[cid] = obj
        if len(self.object_cache) > CACHE_LIMIT:
            self.object_cache.popitem(last=False)

    def item(self, obj: Any, cid_to_obj: Dict[str, Any]) -> Dict[str, Any]:
        cid, data = self.serializer.serialize(obj)
        entry: Dict[str, Any] = {"cid": cid, "client_ref": self.client_ref(obj)}
        if data is not None:
            entry["data"] = data
        cid_to_obj[cid] = obj
        self.remember(cid, obj)
        return entry

    def decode_item(self, item: Any) -> Any:
        if not isinstance(item, dict):
            raise DebugProtocolError(f"Malformed serialized item: {item!r}")
        if "data" in item:
            return self.serializer.loads_base64(item["data"])
        if "cid" in item:
            cached = self.object_cache.get(item["cid"])
            if cached is None:
                raise DebugProtocolError("Missing data for CID in response")
            return cached
        raise DebugProtocolError("Malformed serialized item")

    # -- endpoints ----------------------------------------------------------
    def check_connection(self) -> None:
        status, text = self._request("GET", "/api/breakpoints")
        if status >= 400:
            self._fail("Debug server error", "GET", "/api/breakpoints", None, status=status,
                       text=text)

    def register_function(self, name: str, signature: Optional[str], target: Any) -> None:
        payload: Dict[str, Any] = {"function_name": name, "timestamp": time.time()}
        if signature is not None:
            payload["signature"] = signature
        self._require_ok(self.post_json("/api/breakpoints", payload),
                         "Debug server failed to register breakpoint")
        payload = {"function_name": name}
        if signature is not None:
            payload["signature"] = signature
        payload["function_client_ref"] = self.client_ref(target)
        cid, data = self.serializer.force_serialize(target)
        try:
            value = self.serializer.loads_base64(data)
        except Exception:  # noqa: BLE001
            value = None
        if isinstance(value, Placeholder):
            payload["function_cid"] = cid
            payload["function_data"] = data
        self._require_ok(self.post_json("/api/functions", payload),
                         "Debug server failed to register function")
        self.functions[name] = target

    def record_event(self, *, method_name: str, status: str, call_site: Dict[str, Any],
                     pretty_args: Optional[list] = None, pretty_kwargs: Optional[dict] = None,
                     signature: Optional[str] = None, result: Any = None, exception: Any = None,
                     exception_cid: Optional[str] = None,
                     exception_data: Optional[str] = None) -> None:
        payload: Dict[str, Any] = {
            "method_name": method_name,
            "status": status,
            "timestamp": time.time(),
            "call_site": call_site,
            "process_pid": self.process_pid,
            "process_start_time": self.process_start_time,
            "pretty_args": pretty_args or [],
            "pretty_kwargs": pretty_kwargs or {},
        }
        if signature is not None:
            payload["signature"] = signature
        if result is not None:
            payload["pretty_result"] = sanitize_for_json(result)
        if exception is not None:
            payload["exception"] = sanitize_for_json(exception)
        if exception_cid is not None and exception_data is not None:
            payload["exception_cid"] = exception_cid
            payload["exception_data"] = exception_data
        self._require_ok(self.post_json("/api/call/event", payload),
                         "Debug server failed to record debug event")

    def _report_serialization_error(self, report: Dict[str, Any]) -> None:
        info = dict(report)
        placeholder_cid = info.pop("placeholder_cid", None)
        placeholder_data = info.pop("placeholder_data", None)
        call_site = info.pop("call_site", None) or {"timestamp": time.time(), "stack_trace": []}
        log(f"cannot pickle {info.get('object_type')} ({info.get('error')}); "
            f"sending a placeholder and a pickle_error event")
        self.record_event(
            method_name="pickle_error",
            status="serialization_error",
            call_site=call_site,
            pretty_kwargs={"object_type": info.get("object_type"),
                           "object_id": info.get("object_id")},
            exception=info,
            exception_cid=placeholder_cid,
            exception_data=placeholder_data,
        )

    def record_call_start(self, method_name: str, target: Any, target_cid: str,
                          args: tuple, kwargs: dict, call_site: Dict[str, Any],
                          signature: Optional[str], call_type: str = "proxy") -> Dict[str, Any]:
        cid_to_obj: Dict[str, Any] = {}
        payload: Dict[str, Any] = {
            "method_name": method_name,
            "target_cid": target_cid,
            "target": self.item(target, cid_to_obj),
            "args": [self.item(arg, cid_to_obj) for arg in args],
            "kwargs": {key: self.item(value, cid_to_obj) for key, value in kwargs.items()},
            "call_site": call_site,
            "call_type": call_type,
            "process_pid": self.process_pid,
            "process_start_time": self.process_start_time,
        }
        if signature is not None:
            payload["signature"] = signature
        response = self.post_json_allowing_cid_errors("/api/call/start", payload)
        if response.get("error") == "cid_not_found":
            missing = response.get("missing_cids") or []
            if not missing:
                raise DebugCIDNotFoundError("cid_not_found without missing_cids")
            log(f"server lost {len(missing)} object(s); resending them with data")
            self._attach_missing_data(payload, cid_to_obj, missing)
            response = self.post_json_allowing_cid_errors("/api/call/start", payload)
            if response.get("error") == "cid_not_found":
                raise DebugCIDNotFoundError(f"CID still missing after resend: {missing[0]}")
        if "action" not in response:
            raise DebugProtocolError("Missing action in response")
        return response

    def _attach_missing_data(self, payload: Dict[str, Any], cid_to_obj: Dict[str, Any],
                             missing: List[str]) -> None:
        wanted = set(missing)

        def ensure(entry: Any) -> None:
            if not isinstance(entry, dict):
                return
            cid = entry.get("cid")
            if cid in wanted and "data" not in entry:
                if cid not in cid_to_obj:
                    raise DebugCIDNotFoundError(cid)
                _, data = self.serializer.force_serialize(cid_to_obj[cid])
                entry["data"] = data

        ensure(payload.get("target"))
        for entry in payload.get("args", []):
            ensure(entry)
        for entry in payload.get("kwargs", {}).values():
            ensure(entry)

    def record_call_complete(self, call_id: str, status: str, *, result: Any = None,
                             exception: Optional[BaseException] = None
                             ) -> Optional[Dict[str, Any]]:
        payload: Dict[str, Any] = {
            "call_id": call_id,
            "timestamp": time.time(),
            "status": status,
            "process_pid": self.process_pid,
            "process_start_time": self.process_start_time,
        }
        if status == "success":
            cid, data = self.serializer.serialize(result)
            payload["result_cid"] = cid
            payload["result_client_ref"] = self.client_ref(result)
            if data is not None:
                payload["result_data"] = data
        elif status == "exception" and exception is not None:
            payload["exception_type"] = exception_type_name(exception)
            payload["exception_message"] = str(exception)
            payload["exception_traceback"] = "".join(traceback.format_exception(
                type(exception), exception, exception.__traceback__))
            cid, data = self.serializer.serialize(exception)
            payload["exception_cid"] = cid
            payload["exception_client_ref"] = self.client_ref(exception)
            if data is not None:
                payload["exception_data"] = data
        else:
            raise DebugProtocolError("Invalid call completion payload")
        response = self.post_json("/api/call/complete", payload)
        if response.get("action"):
            return response
        self._require_ok(response, "Debug server failed to acknowledge completion")
        return None

    # -- pauses -------------------------------------------------------------
    def poll(self, action: Dict[str, Any], context: PauseContext) -> Dict[str, Any]:
        """One round of GET poll_url until ready or timeout_ms (then the caller re-polls)."""
        poll_url = action.get("poll_url")
        if not poll_url:
            raise DebugProtocolError("Missing poll_url for poll action")
        interval_ms = action.get("poll_interval_ms", 100)
        timeout_ms = action.get("timeout_ms", 60_000)
        pause_id = poll_url.rstrip("/").rsplit("/", 1)[-1] if "/api/poll/" in poll_url else None
        self._announce(pause_id, context)
        deadline = time.time() + timeout_ms / 1000.0
        while time.time() < deadline:
            # poll_url is root-relative: joined by concatenation, as the real client does.
            response = self.get_json(poll_url)
            status = response.get("status")
            if status == "waiting":
                if pause_id:
                    self._repl_tick(pause_id, context)
                self._maybe_log_suspended()
                time.sleep(interval_ms / 1000.0)
                continue
            if status == "ready":
                resumed = response.get("action", {})
                log(f"resumed {context.label}: {describe_action(resumed)}")
                return resumed if resumed is not None else {}
            raise DebugProtocolError(f"Malformed poll response: {json.dumps(response)[:300]}")
        log(f"poll timed out after {timeout_ms}ms (poll_url={poll_url}); continuing to wait")
        return action

    def _announce(self, pause_id: Optional[str], context: PauseContext) -> None:
        if pause_id in context.announced:
            return
        context.announced.add(pause_id)
        shown = pause_id or "<unknown pause id>"
        log(f"paused {context.label}: waiting for /api/paused/{shown}/continue ...")
        log(f"  curl -s -X POST {self.server_url}/api/paused/{shown}/continue "
            f"-H 'Content-Type: application/json' -d '{{\"action\":\"continue\"}}'")

    def _maybe_log_suspended(self) -> None:
        if self._suspended_log_interval <= 0:
            return
        now = time.time()
        if self._last_suspended_log == 0.0:
            self._last_suspended_log = now
            return
        if now - self._last_suspended_log < self._suspended_log_interval:
            return
        self._last_suspended_log = now
        try:
            status, text = self._send("GET", "/api/paused", None, self.timeout_s)
            paused = json.loads(text).get("paused", []) if status < 400 else []
        except Exception as exc:  # noqa: BLE001 - this request is non-fatal
            log(f"could not list suspended breakpoints: {exc}")
            return
        for entry in paused:
            call_data = entry.get("call_data") or {}
            name = call_data.get("method_name") or call_data.get("function_name")
            age = now - float(entry.get("paused_at") or now)
            log(f"still suspended: {name} (pause {entry.get('id')}, {age:.0f}s)")

    def _repl_tick(self, pause_id: str, context: PauseContext) -> None:
        if context.inflight is not None and context.inflight.is_alive():
            return  # one evaluation at a time; skip the REPL poll meanwhile
        request = self.get_json(f"/api/poll-repl/{pause_id}")
        eval_id = request.get("eval_id")
        if not eval_id:
            return
        worker = threading.Thread(
            target=self._run_eval, name=f"repl-{eval_id}", daemon=True,
            args=(eval_id, request.get("session_id"), request.get("pause_id") or pause_id,
                  str(request.get("expr") or ""), context))
        context.inflight = worker
        worker.start()

    def _run_eval(self, eval_id: str, session_id: Any, pause_id: str, expr: str,
                  context: PauseContext) -> None:
        session = self.repl_sessions.setdefault(str(session_id), {})
        namespace: Dict[str, Any] = dict(context.namespace)
        namespace.update(session)
        outcome: Dict[str, Any] = {}

        def run() -> None:
            outcome["value"] = evaluate(expr, namespace)

        runner = threading.Thread(target=run, name=f"repl-eval-{eval_id}", daemon=True)
        runner.start()
        runner.join(REPL_EVAL_TIMEOUT_S)
        if "value" not in outcome:
            eval_mode, value, stdout, error = False, None, "", "TimeoutError: evaluation timed out"
        else:
            eval_mode, value, stdout, error = outcome["value"]
            for key, item in namespace.items():
                if key == "__builtins__":
                    continue
                if key not in context.namespace or item is not context.namespace[key]:
                    session[key] = item
        result_text, result_cid, result_data = "", None, None
        if error is None and eval_mode:
            result_text = _safe_repr(value, 100_000)
            if value is not None:
                try:
                    result_cid, result_data = self.serializer.serialize(value)
                except Exception as exc:  # noqa: BLE001
                    log(f"REPL result not serializable: {exc}")
        log(f"REPL eval at pause {pause_id}: {expr!r} -> "
            f"{error if error is not None else (result_text or '(no value)')}")
        body = {
            "eval_id": eval_id,
            "pause_id": pause_id,
            "session_id": session_id,
            "result": result_text,
            "stdout": stdout,
            "error": error,
            "result_cid": result_cid,
            "result_data": result_data,
        }
        try:
            status, text = self._send("POST", "/api/call/repl-result", body, self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - repl-result is non-fatal
            log(f"warning: POST /api/call/repl-result failed: {exc}")
            return
        if status == 409:
            return  # session closed meanwhile: ignored, as in the real client
        if status >= 400:
            log(f"warning: POST /api/call/repl-result answered {status}: {text[:300]}")


def describe_action(action: Any) -> str:
    """A short description of a resume action for the progress log."""
    if not isinstance(action, dict):
        return repr(action)
    details = []
    for key, value in action.items():
        if key == "action":
            continue
        if isinstance(value, dict) and "cid" in value:
            value = "<item>"
        elif isinstance(value, list):
            value = [("<item>" if isinstance(v, dict) and "cid" in v else v) for v in value]
        elif isinstance(value, dict):
            value = {k: ("<item>" if isinstance(v, dict) and "cid" in v else v)
                     for k, v in value.items()}
        elif isinstance(value, str) and len(value) > 40:
            value = value[:37] + "..."
        details.append(f"{key}={value}")
    text = str(action.get("action"))
    return f"{text} ({', '.join(details)})" if details else text


def exit_with_server_failure(summary: str, server_url: Optional[str],
                             error: Optional[BaseException] = None) -> None:
    lines = [
        "CID el Dill: Failed to contact breakpoint server.",
        "",
        "Details:",
        f"- Summary: {summary}",
    ]
    if server_url:
        lines.append(f"- Server URL: {server_url}")
    if not os.environ.get("CIDELDILL_SERVER_URL"):
        port = read_port_file()
        found = f"names port {port}" if port else "not there, or holds no port"
        lines.append(f"- Port file: {port_file_path()} ({found})")
    if error is not None:
        lines.append(f"- Exception: {type(error).__name__}: {error}")
    lines += [
        "",
        "Most likely causes:",
        "1. The breakpoint server is not running.",
        "2. The server is running on a different port or URL.",
        "3. The server is not reachable from this environment (container/remote).",
        "",
        "Potential fixes:",
        "1. Start the breakpoint server and retry.",
        "2. Pass --server URL (the server's banner prints it), or --port-file PATH for a",
        "   server started with --port-file PATH, or set CIDELDILL_SERVER_URL.",
        "3. Ensure the port is exposed and firewall rules allow access.",
        "",
        "Exiting now.",
    ]
    print("\n".join(lines), file=sys.stderr, flush=True)
    raise SystemExit(EXIT_SERVER_FAILURE)


# ---------------------------------------------------------------------------
# The proxy: what `with_debug(fn)` returns (docs/protocol.md, §0 and §2.11)
# ---------------------------------------------------------------------------


def compute_signature(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return ""


def format_call(name: str, args: tuple, kwargs: dict) -> str:
    parts = [repr(arg) for arg in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
    return f"{name}({', '.join(parts)})"


class Outcome:
    """How the last call through a proxy actually ran (for the demo's output)."""

    def __init__(self, args: tuple, kwargs: dict) -> None:
        self.args = args
        self.kwargs = kwargs
        self.how = "continue"
        self.note = ""
        self.client_error = False


class DebugProxy:
    def __init__(self, client: DebugClient, target: Callable[..., Any], name: str, *,
                 inline: bool = False) -> None:
        self._client = client
        self._target = target
        self._name = name
        # debug_call's one-shot call: no alias lookup event, call_type "inline".
        self._inline = inline
        self._signature = compute_signature(target)
        self._cid = compute_cid(client.serializer.dumps(target))
        self.last: Optional[Outcome] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        client = self._client
        self.last = None
        # The real proxy looks up `_cideldill_alias_name` on itself first; the failed
        # lookup is reported as an event on every call (docs/protocol.md, §0, step 3).
        attribute = "_cideldill_alias_name"
        if not self._inline:
            client.record_event(
                method_name=f"__getattr__({attribute!r})",
                status="exception",
                call_site={"timestamp": time.time(), "target_cid": self._cid,
                           "stack_trace": build_stack_trace(skip=1)},
                exception={
                    "type": "AttributeError",
                    "message": f"'{type(self._target).__name__}' object has no attribute "
                               f"'{attribute}'",
                    "target_type": _type_path(self._target),
                    "requested_attribute": attribute,
                },
            )
        call_site = {"timestamp": time.time(), "target_cid": self._cid,
                     "stack_trace": build_stack_trace(skip=1)}
        action = client.record_call_start(self._name, self._target, self._cid, args, kwargs,
                                          call_site, self._signature,
                                          "inline" if self._inline else "proxy")
        call_id = action.get("call_id")
        if not call_id:
            raise DebugProtocolError("Missing call_id in response")
        outcome = Outcome(args, kwargs)
        self.last = outcome
        label = format_call(self._name, args, kwargs)
        try:
            result = self._execute(action, args, kwargs, outcome, call_id, call_site, label)
        except Exception as exc:
            post = client.record_call_complete(call_id, "exception", exception=exc)
            if post:
                namespace = self._namespace(action, outcome.args, outcome.kwargs, call_id,
                                            call_site)
                namespace["exception"] = exc
                shown = format_call(self._name, outcome.args, outcome.kwargs)
                context = PauseContext(
                    f"after {shown} raised {type(exc).__name__}", namespace)
                try:
                    self._wait_post_completion(post, context)
                except DebugProtocolError as protocol_error:
                    outcome.client_error = True
                    raise protocol_error from exc
            raise
        post = client.record_call_complete(call_id, "success", result=result)
        if post:
            namespace = self._namespace(action, outcome.args, outcome.kwargs, call_id,
                                        call_site)
            namespace["result"] = result
            shown = format_call(self._name, outcome.args, outcome.kwargs)
            context = PauseContext(f"after {shown} -> {_safe_repr(result, 80)}", namespace)
            try:
                self._wait_post_completion(post, context)
            except DebugProtocolError:
                outcome.client_error = True
                raise
        return result

    def _namespace(self, action: Dict[str, Any], args: tuple, kwargs: dict, call_id: str,
                   call_site: Dict[str, Any]) -> Dict[str, Any]:
        """Names the real client's REPL sees: those of its proxy wrapper frame."""
        return {
            "action": action, "args": args, "call_id": call_id, "call_site": call_site,
            "frame": inspect.currentframe(), "kwargs": kwargs, "method": self._target,
            "name": self._name, "self": self,
        }

    def _execute(self, action: Dict[str, Any], args: tuple, kwargs: dict, outcome: Outcome,
                 call_id: str, call_site: Dict[str, Any], label: str) -> Any:
        client = self._client
        context = PauseContext(f"before {label}",
                               self._namespace(action, args, kwargs, call_id, call_site))
        try:
            while isinstance(action, dict) and action.get("action") == "poll":
                action = client.poll(action, context)
            if not isinstance(action, dict):
                raise DebugProtocolError(f"Malformed action: {action!r}")
            kind = action.get("action")
            if kind == "continue":
                call = lambda: self._target(*args, **kwargs)  # noqa: E731
            elif kind == "replace":
                function_name = action.get("function_name")
                if not function_name:
                    raise DebugProtocolError("Missing function_name for replace action")
                replacement = client.functions.get(function_name)
                if replacement is None:
                    raise DebugProtocolError(f"Unknown replacement function: {function_name}")
                outcome.how, outcome.note = "replace", f"replaced by {function_name}"
                call = lambda: replacement(*args, **kwargs)  # noqa: E731
            elif kind == "modify":
                modified_args = action.get("modified_args", [])
                modified_kwargs = action.get("modified_kwargs", {})
                if not isinstance(modified_args, list) or not isinstance(modified_kwargs, dict):
                    raise DebugProtocolError("modify needs a list modified_args and an "
                                             "object modified_kwargs")
                new_args = tuple(client.decode_item(entry) for entry in modified_args)
                new_kwargs = {key: client.decode_item(entry)
                              for key, entry in modified_kwargs.items()}
                outcome.args, outcome.kwargs = new_args, new_kwargs
                outcome.how = "modify"
                outcome.note = f"arguments modified by the server; original call: {label}"
                call = lambda: self._target(*new_args, **new_kwargs)  # noqa: E731
            elif kind == "skip":
                if "fake_result_data" in action:
                    fake = client.decode_item({"data": action["fake_result_data"]})
                elif "fake_result" in action:
                    fake = action["fake_result"]
                elif "fake_result_cid" in action:
                    fake = client.decode_item({"cid": action["fake_result_cid"]})
                else:
                    fake = None
                outcome.how, outcome.note = "skip", "skipped: fake result from the server"
                call = lambda: fake  # noqa: E731
            elif kind == "raise":
                exc_class = getattr(builtins, action.get("exception_type", "Exception"),
                                    Exception)
                exc = exc_class(action.get("exception_message", ""))
                outcome.how, outcome.note = "raise", "raised on request of the server"

                def call() -> Any:
                    raise exc
            else:
                raise DebugProtocolError(f"Unknown action: {kind}")
        except Exception:
            outcome.client_error = True
            raise
        return call()

    def _wait_post_completion(self, action: Dict[str, Any], context: PauseContext) -> None:
        while isinstance(action, dict) and action.get("action") == "poll":
            action = self._client.poll(action, context)
        kind = action.get("action") if isinstance(action, dict) else action
        if kind not in (None, "continue"):
            raise DebugProtocolError(f"Unsupported post-completion action: {kind}")


def _register(client: DebugClient, target: Callable[..., Any], name: str) -> None:
    """What with_debug and debug_call do on a callable's first encounter: the server's
    breakpoint and function, the local function registry, a `with_debug.register` event."""
    signature = compute_signature(target)
    client.register_function(name, signature, target)
    with _registry_lock:
        _registered_functions[name] = target
    client.record_event(
        method_name="with_debug.register",
        status="registered",
        call_site={"timestamp": time.time(), "stack_trace": build_stack_trace(skip=2)},
        pretty_args=[{"__cideldill_placeholder__": True, "summary": name,
                      "client_ref": client.client_ref(target)}],
        result={
            "event": "with_debug_registration",
            "function_name": name,
            "signature": signature,
            "alias": None,
            "target_type": _type_path(target),
        },
    )


def with_debug(client: DebugClient, target: Callable[..., Any]) -> DebugProxy:
    """Register a callable like cideldill_client.with_debug(target) does."""
    global _active_client
    _active_client = client
    name = getattr(target, "__name__", None) or f"{type(target).__qualname__}.__call__"
    _register(client, target, name)
    return DebugProxy(client, target, name)


# ---------------------------------------------------------------------------
# The client's importable names: `cideldill_client.debug_call` and the function registry
# `cideldill_client.function_registry` (where with_debug registers each wrapped callable by
# name). A REPL evaluation can import them: the server's replay from a pause of another
# function does. The demo puts its stand-ins under those module names.
# ---------------------------------------------------------------------------

_registry_lock = threading.Lock()
_registered_functions: Dict[str, Callable[..., Any]] = {}
_debug_call_registered: set = set()
_active_client: Optional[DebugClient] = None


def get_function(name: str) -> Optional[Callable[..., Any]]:
    """cideldill_client.function_registry.get_function: the callable registered as `name`."""
    with _registry_lock:
        return _registered_functions.get(name)


def debug_call(name_or_func: Any, *args: Any, **kwargs: Any) -> Any:
    """cideldill_client.debug_call: one call of a callable, reported like a wrapped call
    (`debug_call("alias", fn, *args)` names it `alias`)."""
    if isinstance(name_or_func, str):
        if not args or not callable(args[0]):
            raise TypeError("debug_call with alias requires a callable as second argument")
        alias, func, call_args = name_or_func, args[0], args[1:]
    elif callable(name_or_func):
        alias, func, call_args = None, name_or_func, args
    else:
        raise TypeError("debug_call expects a callable or (alias_str, callable, ...)")
    if isinstance(func, DebugProxy):
        func = func._target
    client = _active_client
    if client is None:
        return func(*call_args, **kwargs)
    name = alias or getattr(func, "__name__", None) or f"{type(func).__qualname__}.__call__"
    key = (name, id(func))
    if key not in _debug_call_registered:
        _register(client, func, name)
        _debug_call_registered.add(key)
    return DebugProxy(client, func, name, inline=True)(*call_args, **kwargs)


def install_client_modules() -> None:
    """Makes `import cideldill_client` and `cideldill_client.function_registry` find the
    demo's stand-ins (in place of an installed client, whose registry would be empty)."""
    package = types.ModuleType("cideldill_client")
    registry = types.ModuleType("cideldill_client.function_registry")
    registry.get_function = get_function  # type: ignore[attr-defined]
    package.debug_call = debug_call  # type: ignore[attr-defined]
    package.function_registry = registry  # type: ignore[attr-defined]
    package.__path__ = []  # type: ignore[attr-defined]  # a package: submodules import
    sys.modules["cideldill_client"] = package
    sys.modules["cideldill_client.function_registry"] = registry


# ---------------------------------------------------------------------------
# The demo application
# ---------------------------------------------------------------------------


def add(x, y=1):
    return x + y


def multiply(x, y=1):
    return x * y


def greet(name):
    return f"Hello, {name}!"


def resize(x, label, scale=2):
    return x * scale


@dataclasses.dataclass
class Point:
    x: int
    y: int
    label: str


class Box:
    """A plain class: the server renders its instances from their attributes."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height

    def __repr__(self) -> str:
        return f"Box(width={self.width}, height={self.height})"


def summarize(data, point, box, when, tags):
    return (f"{len(data)} keys; point {point.label} at ({point.x}, {point.y}); "
            f"box area {box.width * box.height}; {when:%Y-%m-%d %H:%M}; tags {sorted(tags)}")


def divide(a, b):
    return a / b


class Channel:
    """Holds a socket, which neither pickle nor dill can serialize."""

    def __init__(self, name: str, sock: socket.socket) -> None:
        self.name = name
        self.sock = sock
        self.tags = ["demo", "unpicklable"]

    def __repr__(self) -> str:
        return f"Channel({self.name!r})"


def describe(channel):
    kind = "TCP" if channel.sock.type == socket.SOCK_STREAM else "other"
    return f"channel {channel.name!r} over an unconnected {kind} socket, tags={channel.tags}"


def ensure_dill() -> Any:
    """Import dill, installing the pinned version into the demo's cache if needed."""
    try:
        import dill  # type: ignore[import-not-found]
        return dill
    except ImportError:
        pass
    default_cache = Path(__file__).resolve().parent.parent / ".cache" / "python"
    cache = Path(os.environ.get("CIDELDILL_DEMO_CACHE") or default_cache)
    if str(cache) not in sys.path:
        sys.path.insert(0, str(cache))
    importlib.invalidate_caches()
    try:
        import dill  # type: ignore[import-not-found]
        return dill
    except ImportError:
        pass
    log(f"installing dill=={DILL_VERSION} into {cache} ...")
    cache.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PIP_ROOT_USER_ACTION="ignore", PIP_DISABLE_PIP_VERSION_CHECK="1")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(cache),
               f"dill=={DILL_VERSION}"]
    completed = subprocess.run(command, env=env, stdout=sys.stderr, check=False)
    if completed.returncode != 0:
        raise SetupError(f"'{' '.join(command)}' failed with exit code {completed.returncode}")
    importlib.invalidate_caches()
    try:
        import dill  # type: ignore[import-not-found]
    except ImportError as exc:
        raise SetupError(f"dill is still not importable from {cache}: {exc}") from exc
    return dill


def configure_dill(dill: Any) -> None:
    dill.settings["recurse"] = True
    dill.settings["byref"] = False  # by value, as the real client does


def print_guide(server_url: str) -> None:
    lines = [
        f"talking to {server_url}",
        "every wrapped call pauses before it runs and after it returns (server defaults).",
        "resume a pause with the curl command printed for it; other bodies to try:",
        '  {"action":"modify","modified_args":[10],"modified_kwargs":{"y":20}}  (for add(x, y=1))',
        '  {"action":"skip","fake_result":99}  (or {"a":[1,2.5,null]} for summarize)',
        '  {"action":"raise","exception_type":"ValueError","exception_message":"boom"}',
        '  {"action":"continue","replacement_function":"multiply"}',
        "an after-pause accepts only continue. A raising call pauses after it only when",
        "the server's behavior is stop_exception (or exception):",
        f"  curl -s -X POST {server_url}/api/behavior -H 'Content-Type: application/json'"
        " -d '{\"behavior\":\"stop_exception\"}'",
        "REPL while paused:",
        f"  curl -s -X POST {server_url}/api/repl/start -H 'Content-Type: application/json'"
        " -d '{\"pause_id\":\"<id>\"}'",
        f"  curl -s -X POST {server_url}/api/repl/<session_id>/eval "
        "-H 'Content-Type: application/json' -d '{\"expr\":\"args\"}'",
    ]
    for line in lines:
        log(line)


def run_call(proxy: DebugProxy, name: str, args: tuple, kwargs: dict) -> bool:
    """Call through the proxy and print what happened. False on a client-side error."""
    log(f"calling {format_call(name, args, kwargs)}")
    try:
        result = proxy(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - shown to the user
        outcome = proxy.last
        shown = format_call(name, outcome.args, outcome.kwargs) if outcome else \
            format_call(name, args, kwargs)
        note = f"   [{outcome.note}]" if outcome and outcome.note else ""
        if outcome is None or outcome.client_error:
            print(f"{shown} failed in the client: {exception_type_name(exc)}: {exc}", flush=True)
            return False
        print(f"{shown} raised {exception_type_name(exc)}: {exc}{note}", flush=True)
        return True
    outcome = proxy.last
    assert outcome is not None
    note = f"   [{outcome.note}]" if outcome.note else ""
    print(f"{format_call(name, outcome.args, outcome.kwargs)} -> {result!r}{note}", flush=True)
    return True


def self_test(serializer: Serializer) -> int:
    """Offline checks of what the demo puts on the wire."""
    failures = 0
    total = 0

    def check(label: str, ok: bool) -> None:
        nonlocal failures, total
        total += 1
        failures += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {label}", flush=True)

    check("int 10 pickles to base64 gARLCi4=",
          base64.b64encode(pickle.dumps(10, protocol=4)).decode() == "gARLCi4=")
    reports: List[Dict[str, Any]] = []
    serializer.report_error = reports.append
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        data = serializer.dumps(Channel("selftest", sock))
    finally:
        sock.close()
    listing = io.StringIO()
    try:
        pickletools.dis(data, out=listing)
        well_formed = True
    except Exception as exc:  # noqa: BLE001
        listing.write(f"{exc}\n")
        well_formed = False
    check("placeholder pickle is well-formed (pickletools.dis)", well_formed)
    check(f"placeholder pickle references {PLACEHOLDER_MODULE}.{PLACEHOLDER_FUNCTION}",
          "STACK_GLOBAL" in listing.getvalue() and PLACEHOLDER_FUNCTION in listing.getvalue())
    value = serializer.loads(data)
    check("placeholder round-trips", isinstance(value, Placeholder)
          and value.object_name == "selftest" and value.qualname == "Channel")
    check("the socket attribute is a nested placeholder",
          isinstance(value.attributes.get("sock"), Placeholder)
          and "sock" in value.failed_attributes)
    check("two pickle_error reports (socket first, then the channel)",
          [r["object_type"].rsplit(".", 1)[-1] for r in reports] == ["socket", "Channel"])
    cid = compute_cid(data)
    check("CID is 128 lowercase hex characters",
          len(cid) == 128 and all(c in "0123456789abcdef" for c in cid))
    check("report CID is SHA-512 of the placeholder bytes",
          reports[-1]["placeholder_cid"] == cid)
    if failures:
        print(listing.getvalue(), file=sys.stderr)
    print(f"{total - failures} passed, {failures} failed", flush=True)
    return 0 if failures == 0 else 1


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="A demo app instrumented like cideldill_client: its calls pause on "
                    "the breakpoint server until you resume them.")
    parser.add_argument("--server", metavar="URL", help="breakpoint server URL (localhost only)")
    parser.add_argument("--port-file", metavar="PATH",
                        help="the port file of a server started with --port-file PATH")
    parser.add_argument("--loop", metavar="N", type=int, default=1,
                        help="run the sequence of calls N times (default 1)")
    parser.add_argument("--dill", action="store_true",
                        help=f"serialize with dill=={DILL_VERSION} (installed on demand)")
    parser.add_argument("--items", metavar="N", type=int, default=0,
                        help="call resize N times instead of the usual sequence")
    parser.add_argument("--self-test", action="store_true",
                        help="check the pickle/CID building offline and exit")
    options = parser.parse_args(argv)
    global PORT_FILE_OPTION
    PORT_FILE_OPTION = options.port_file
    if options.loop < 1:
        parser.error("--loop must be at least 1")
    if options.items < 0:
        parser.error("--items must be 0 or more")

    dill = None
    if options.dill:
        try:
            dill = ensure_dill()
        except SetupError as exc:
            log(f"error: {exc}")
            return EXIT_USAGE
        configure_dill(dill)
    serializer = Serializer(dill)
    if options.self_test:
        return self_test(serializer)

    try:
        server_url = resolve_server_url(options.server)
    except DebugServerError as exc:
        log(f"error: {exc}")
        return EXIT_USAGE
    client = DebugClient(server_url, serializer)
    install_client_modules()
    log(f"serializer: {'dill ' + dill.__version__ if dill else 'pickle'} (protocol 4)")
    client.check_connection()  # with_debug("ON")

    wrapped = (resize,) if options.items else (add, greet, summarize, describe, divide)
    proxies = {fn.__name__: with_debug(client, fn) for fn in wrapped}
    if not options.items:
        with_debug(client, multiply)  # registered as a replacement target for add
    print_guide(server_url)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    channel = Channel("metrics", sock)
    calls = [
        ("add", (2,), {"y": 3}),
        ("greet", ("world",), {}),
        ("summarize", ({"k": [1, 2], "name": "x"}, Point(1, 2, "p"), Box(2, 3),
                       datetime.datetime(2024, 1, 2, 3, 4, 5), {3, 1}), {}),
        ("describe", (channel,), {}),
        ("divide", (1, 0), {}),
    ]
    if options.items:
        calls = [("resize", (i,), {"label": f"item-{i:03d}", "scale": 2})
                 for i in range(options.items)]
    all_ok = True
    try:
        for iteration in range(options.loop):
            if options.loop > 1:
                log(f"iteration {iteration + 1} of {options.loop}")
            for name, args, kwargs in calls:
                all_ok = run_call(proxies[name], name, args, kwargs) and all_ok
    finally:
        sock.close()
    if not all_ok:
        log("some calls ended in a client-side protocol error (see above)")
        return EXIT_PROTOCOL
    log("all calls finished")
    return EXIT_OK


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
