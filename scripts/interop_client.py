#!/usr/bin/env python3
"""Interop check of `cideldill-server --mcp` with the official MCP Python SDK over stdio.

What it does
    Spawns `<binary> --mcp --memory --port 0` through the SDK's stdio client (with
    CIDELDILL_HOME and CIDELDILL_PORT_FILE in a fresh temporary directory, so ~/.cideldill is
    never touched), then drives every MCP feature the server offers: initialize, tools/list
    (the 15 `breakpoint_*` tools and the 5 `external_*` tools), a call of every
    `breakpoint_*` tool with valid arguments, a call of every `external_*` tool (with no
    external server connected: empty listings, `isError` server_not_found), an `isError`
    result, an unknown tool, every resource and template, both prompts, completion,
    resources/subscribe with `notifications/resources/updated`, logging, ping and the custom
    `notifications/breakpoint/execution_paused`. The state the tools need is created through
    the server's HTTP API, exactly as the debugged Python program would: a paused call via
    POST /api/call/start, a REPL answer via GET /api/poll-repl + POST /api/call/repl-result.

    It runs unchanged under mcp 1.x (ClientSession + stdio_client) and mcp 2.x (mcp.Client
    with StdioServerParameters, mode="legacy"), chosen by feature detection. Under mcp 2.x
    two more connections speak the stateless revision 2026-07-28: one with mode="auto" (the
    SDK probes with server/discover, and the server answers it, so the connection goes modern)
    and one with the revision pinned (mode="2026-07-28"), which runs the whole suite except
    what that revision removed (ping, logging/setLevel, resources/subscribe, log messages);
    resource updates come through a subscriptions/listen stream instead. Then all of it again the way an MCP host meets a server
    the user already runs: `<binary> --memory --port 0` first, then the SDK spawns plain
    `<binary> --mcp` with the same port file, which joins that server's session through its
    stdio <-> Streamable HTTP bridge; afterwards the running server must still serve and its
    port file be intact. Under mcp 2.x the joined suite runs twice: with mode="legacy", and with
    mode="auto", which goes modern through the bridge (its server/discover probe and every
    modern request are posted stateless; the listen stream is relayed line by line).

What it needs
    Python 3.10+ with the `mcp` package (tested: 1.30.0 and 2.3.0) and a built binary.

How to call it
    <venv>/bin/python scripts/interop_client.py [--binary target/debug/cideldill-server]

Output
    One line per check, `PASS <name>` or `FAIL <name>: <why>` (and `SKIP`/`INFO` lines for
    observations); exit status 1 if any check failed, else 0.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any, Callable

import warnings

import anyio
import mcp
import mcp.types as types
from mcp import StdioServerParameters

if hasattr(mcp, "MCPDeprecationWarning"):  # 2.x warns about 2025-era methods we test on purpose
    warnings.filterwarnings("ignore", category=mcp.MCPDeprecationWarning)

REPO = Path(__file__).resolve().parent.parent
SDK_VERSION = importlib.metadata.version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])
HAS_CLIENT = hasattr(mcp, "Client")  # mcp 2.x

BREAKPOINT_TOOLS = {
    "breakpoint_list_breakpoints", "breakpoint_add", "breakpoint_remove",
    "breakpoint_set_behavior", "breakpoint_set_after_behavior", "breakpoint_set_replacement",
    "breakpoint_get_default_behavior", "breakpoint_set_default_behavior",
    "breakpoint_list_paused", "breakpoint_continue", "breakpoint_list_functions",
    "breakpoint_get_call_records", "breakpoint_repl_eval", "breakpoint_inspect_object",
    "breakpoint_wait_for_pause", "breakpoint_continue_all", "breakpoint_compare_runs",
    "breakpoint_set_enabled", "breakpoint_set_pausing", "breakpoint_list_runs",
    "breakpoint_label_run", "breakpoint_replay_call", "breakpoint_replay_run",
}
# The MCP-client proxy tools; scripts/interop_upstream.py exercises them against real servers.
EXTERNAL_TOOLS = {
    "external_list_servers", "external_list_tools", "external_call_tool",
    "external_list_resources", "external_read_resource",
}
EXPECTED_TOOLS = BREAKPOINT_TOOLS | EXTERNAL_TOOLS
FIXED_RESOURCES = {
    "breakpoint://status", "breakpoint://breakpoints", "breakpoint://paused",
    "breakpoint://call-history", "breakpoint://functions",
}
TEMPLATES = {"breakpoint://paused/{pause_id}", "breakpoint://call/{call_id}", "breakpoint://object/{cid}"}
PAUSED_NOTIFICATION = "notifications/breakpoint/execution_paused"
# The capability that opts a client into the custom notifications/breakpoint/*: mcp 2.x declares
# it as a ClientExtension (capabilities.extensions); mcp 1.x's ClientSession cannot declare one,
# so it gets none of them (and so logs no "Failed to validate notification").
CUSTOM_CAPABILITY = "io.github.curtcox.cideldill/notifications"
MODERN_VERSION = "2026-07-28"  # the stateless revision (mcp 2.x only)
PID, START_TIME = 16759, 1795311683.7211661

# ------------------------------------------------------------------------------------------
# Reporting


class Report:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.passed = 0
        self.failed = 0

    def ok(self, name: str, detail: str = "") -> None:
        self.passed += 1
        print(f"PASS {self.prefix}{name}" + (f" ({detail})" if detail else ""), flush=True)

    def fail(self, name: str, why: str) -> None:
        self.failed += 1
        print(f"FAIL {self.prefix}{name}: {why}", flush=True)

    def skip(self, name: str, why: str) -> None:
        print(f"SKIP {self.prefix}{name}: {why}", flush=True)

    def info(self, text: str) -> None:
        print(f"INFO {self.prefix}{text}", flush=True)

    def check(self, name: str, cond: bool, why: str, detail: str = "") -> bool:
        if cond:
            self.ok(name, detail)
        else:
            self.fail(name, why)
        return cond


class CheckFailed(Exception):
    pass


def need(cond: bool, why: str) -> None:
    if not cond:
        raise CheckFailed(why)


def describe(e: BaseException) -> str:
    """One line naming an exception and, for an ExceptionGroup (anyio task groups), its
    leaves, so a FAIL line says what actually went wrong."""
    leaves: list[BaseException] = []

    def walk(x: BaseException) -> None:
        subs = getattr(x, "exceptions", None)
        if subs:
            for sub in subs:
                walk(sub)
        else:
            leaves.append(x)
    walk(e)
    text = f"{type(e).__name__}: {e}"
    if leaves != [e]:
        text += " [" + "; ".join(f"{type(x).__name__}: {x}" for x in leaves[:3]) + "]"
    return text.replace("\n", " ")


def short(v: Any, n: int = 300) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[:n] + "..."


# ------------------------------------------------------------------------------------------
# The debugged program's side: the server's HTTP API (stdlib only)


def item(value: Any, client_ref: int) -> dict:
    data = pickle.dumps(value, protocol=4)
    return {"cid": hashlib.sha512(data).hexdigest(), "client_ref": client_ref,
            "data": base64.b64encode(data).decode()}


def call_start_body(method: str, args: list, kwargs: dict, signature: str = "(x, y=1)") -> dict:
    target = item(f"<function {method}>", 1)
    return {
        "method_name": method, "target_cid": target["cid"], "target": target,
        "args": [item(a, 2 + i) for i, a in enumerate(args)],
        "kwargs": {k: item(v, 10 + i) for i, (k, v) in enumerate(kwargs.items())},
        "call_site": {"timestamp": time.time(), "target_cid": target["cid"],
                      "stack_trace": [{"filename": "/tmp/interop.py", "lineno": 1,
                                       "function": "<module>", "code_context": f"{method}(...)"}]},
        "call_type": "proxy", "process_pid": PID, "process_start_time": START_TIME,
        "signature": signature,
    }


class Http:
    def __init__(self, port_file: Path) -> None:
        self.port_file = port_file
        self.base: str | None = None

    def wait_port(self, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                text = self.port_file.read_text().strip()
                if text:
                    self.base = f"http://127.0.0.1:{int(text)}"
                    return self.base
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise CheckFailed(f"no port file {self.port_file} after {timeout} s")

    def request(self, method: str, path: str, body: Any = None) -> Any:
        assert self.base
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"null")


class ReplResponder(threading.Thread):
    """Answers REPL evals queued for one pause, like the paused program's poll loop."""

    def __init__(self, http: Http, pause_id: str, answer: Callable[[str], str]) -> None:
        super().__init__(daemon=True)
        self.http, self.pause_id, self.answer = http, pause_id, answer
        self.stop = threading.Event()
        self.handled: list[dict] = []
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                req = self.http.request("GET", f"/api/poll-repl/{self.pause_id}")
                if req and req.get("eval_id"):
                    self.handled.append(req)
                    self.http.request("POST", "/api/call/repl-result", {
                        "eval_id": req["eval_id"], "pause_id": self.pause_id,
                        "session_id": req["session_id"], "result": self.answer(req["expr"]),
                        "stdout": "", "error": None, "result_cid": None, "result_data": None,
                    })
                    continue
            except Exception as e:  # noqa: BLE001 - reported by the caller
                self.errors.append(repr(e))
            self.stop.wait(0.05)


# ------------------------------------------------------------------------------------------
# Notifications seen by the SDK


class Seen:
    """Server notifications as the SDK surfaced them: (method, params dict, monotonic time)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict, float]] = []
        self.raw: list[tuple[str, dict, float]] = []  # v1 only: the transport tee

    def add(self, method: str, params: Any) -> None:
        self.items.append((method, params or {}, time.monotonic()))

    def matching(self, method: str, pred: Callable[[dict], bool] = lambda p: True,
                 since: float = 0.0, raw: bool = False) -> list[dict]:
        src = self.raw if raw else self.items
        return [p for m, p, t in src if m == method and t >= since and pred(p)]

    async def wait(self, method: str, pred: Callable[[dict], bool] = lambda p: True,
                   since: float = 0.0, timeout: float = 5.0, raw: bool = False) -> dict | None:
        with anyio.move_on_after(timeout):
            while True:
                found = self.matching(method, pred, since, raw)
                if found:
                    return found[0]
                await anyio.sleep(0.02)
        return None


def dump(model: Any) -> Any:
    if model is None:
        return None
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return model


def make_message_handler(seen: Seen):
    async def handler(message: Any) -> None:
        if isinstance(message, Exception):
            seen.add("<exception>", {"error": repr(message)})
            return
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method is None:  # a server request (v1 RequestResponder): not expected here
            return
        seen.add(method, dump(getattr(root, "params", None)))
    return handler


class SdkWarnings(logging.Handler):
    """Collects what the SDK logged on the root logger: records that mention a notification
    (validation failures, drops), and every WARNING or worse (`warnings`): a session with a
    standard SDK must log none."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []
        self.warnings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001
            return
        if record.levelno >= logging.WARNING or "failed to validate" in msg.lower():
            self.warnings.append(f"{record.name} {record.levelname}: {msg.splitlines()[0] if msg else ''}")
        if "notification" in msg.lower() or "dropped" in msg.lower():
            self.records.append(f"{record.levelname}: {msg}")


# ------------------------------------------------------------------------------------------
# One connection through whichever SDK is installed


class Conn:
    """The few session operations the checks use, identical across SDK versions."""

    def __init__(self, api: Any, session: Any, init: dict) -> None:
        self.api = api          # v1: ClientSession; v2: mcp.Client
        self.session = session  # the ClientSession underneath
        self.init = init        # initialize result as wire JSON

    @property
    def version(self) -> str:
        return self.init.get("protocolVersion", "")

    @property
    def structured(self) -> bool:
        return self.version >= "2025-06-18"

    async def call(self, name: str, args: dict | None = None, timeout: float = 60,
                   progress_callback: Any = None) -> dict:
        with anyio.fail_after(timeout):
            if progress_callback is None:
                return dump(await self.api.call_tool(name, args or {}))
            return dump(await self.api.call_tool(name, args or {}, progress_callback=progress_callback))

    async def ping(self) -> None:
        await self.session.send_ping()


async def v1_connect(params: StdioServerParameters, seen: Seen, stack: Any, tg: Any) -> Conn:
    """mcp 1.x: stdio_client + ClientSession (see v1_session)."""
    from mcp.client.stdio import stdio_client
    read, write = await stack.enter_async_context(stdio_client(params))
    return await v1_session(read, write, seen, stack, tg)


async def v1_session(read: Any, write: Any, seen: Seen, stack: Any, tg: Any) -> Conn:
    """mcp 1.x: a ClientSession over a transport's streams, initialized. The read stream is
    teed so custom notifications (which the 1.x session rejects as unknown) can still be
    observed. Also used by interop_http.py for the SSE and Streamable HTTP transports."""
    tee_send, tee_recv = anyio.create_memory_object_stream(10_000)

    async def pump() -> None:
        async with tee_send:
            try:
                async for msg in read:
                    root = getattr(getattr(msg, "message", None), "root", None)
                    if root is not None and hasattr(root, "method") and not hasattr(root, "id"):
                        seen.raw.append((root.method, root.params or {}, time.monotonic()))
                    await tee_send.send(msg)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                # The session closed while the server was still sending (notifications that
                # follow the last tool result), or the transport closed the stream this tee
                # reads while a message was on its way (a server that exits at once when its
                # stdin closes, as the joining bridge does): the tee's problem, not the server's.
                return

    tg.start_soon(pump)
    session = await stack.enter_async_context(
        mcp.ClientSession(tee_recv, write, message_handler=make_message_handler(seen)))
    with anyio.fail_after(20):
        init = await session.initialize()
    return Conn(session, session, dump(init))


def v2_extension(seen: Seen):
    """mcp 2.x: custom server notifications reach code only through a ClientExtension's
    NotificationBinding (the generic message_handler never sees methods outside the spec). Its
    identifier is the capability that opts into them: the client declares it in
    capabilities.extensions (in initialize, and in every modern request's envelope)."""
    from pydantic import BaseModel, ConfigDict
    from mcp.client.extension import ClientExtension, NotificationBinding

    class AnyParams(BaseModel):
        model_config = ConfigDict(extra="allow")

    class BreakpointEvents(ClientExtension):
        identifier = CUSTOM_CAPABILITY

        def notifications(self):
            out = []
            for ev in ("execution_paused", "execution_resumed", "call_completed", "log"):
                method = f"notifications/breakpoint/{ev}"

                def bind(m: str):
                    async def handler(p: AnyParams) -> None:
                        seen.add(m, p.model_dump(mode="json"))
                    return handler
                out.append(NotificationBinding(method=method, params_type=AnyParams, handler=bind(method)))
            return out

    return BreakpointEvents()


async def v2_connect(params: Any, seen: Seen, stack: Any, mode: str = "legacy",
                     custom: bool = True) -> Conn:
    """mcp 2.x: mcp.Client over StdioServerParameters, a URL (Streamable HTTP) or a transport
    (e.g. sse_client(url)), entered on `stack`; with the extension that opts into the custom
    notifications unless `custom` is false. In the stateless revision every request asks for
    log messages from info up (`log_level`: the listen stream's carry the pause lines)."""
    client = mcp.Client(params, mode=mode, message_handler=make_message_handler(seen),
                        extensions=[v2_extension(seen)] if custom else None,
                        log_level="info", read_timeout_seconds=90)
    # No fail_after around this: the client opens task groups that outlive the scope
    # (read_timeout_seconds bounds the handshake instead).
    await stack.enter_async_context(client)
    s = client.session
    init = getattr(s, "initialize_result", None)
    init_d = dump(init) if init is not None else {
        "protocolVersion": client.protocol_version,
        "serverInfo": dump(client.server_info),
        "capabilities": dump(client.server_capabilities),
    }
    return Conn(client, s, init_d)


# ------------------------------------------------------------------------------------------
# The checks


def tool_json(conn: Conn, res: dict, expect_error: bool = False) -> Any:
    content = res.get("content") or []
    need(len(content) == 1 and content[0].get("type") == "text",
         f"expected one text item, got {short(content)}")
    try:
        data = json.loads(content[0]["text"])
    except json.JSONDecodeError as e:
        raise CheckFailed(f"text is not JSON ({e}): {short(content[0]['text'])}")
    need(bool(res.get("isError", False)) == expect_error,
         f"isError={res.get('isError')} (expected {expect_error}): {short(data)}")
    if conn.structured and not expect_error:
        need(res.get("structuredContent") == data,
             f"structuredContent differs from the text JSON: {short(res.get('structuredContent'))}")
    if not conn.structured:
        need("structuredContent" not in res, f"structuredContent sent on {conn.version}")
    return data


class Runner:
    def __init__(self, rep: Report, conn: Conn, seen: Seen, http: Http, stack: Any = None) -> None:
        self.rep, self.conn, self.seen, self.http = rep, conn, seen, http
        self.stack = stack  # for the listen stream of a modern connection
        self.called: set[str] = set()
        self.modern = conn.version == MODERN_VERSION

    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            detail = await fn()
            self.rep.ok(name, detail if isinstance(detail, str) else "")
            return detail
        except CheckFailed as e:
            self.rep.fail(name, str(e))
        except Exception as e:  # noqa: BLE001 - any SDK complaint is a finding
            self.rep.fail(name, describe(e))
        return None

    async def tool(self, name: str, args: dict | None = None, check: Callable[[Any], Any] | None = None,
                   label: str | None = None) -> Any:
        out: dict[str, Any] = {}

        async def run() -> str:
            res = await self.conn.call(name, args)
            data = tool_json(self.conn, res)
            out["data"] = data
            if check:
                check(data)
            self.called.add(name)
            return short(data, 120)
        await self.step(f"tool {label or name}", run)
        return out.get("data")

    async def run_all(self) -> None:
        rep, conn, seen, http = self.rep, self.conn, self.seen, self.http
        await anyio.to_thread.run_sync(http.wait_port)
        rep.info(f"server HTTP at {http.base}, negotiated {conn.version}")

        # --- initialize and tools/list
        async def init_check() -> str:
            info = conn.init.get("serverInfo") or {}
            caps = conn.init.get("capabilities") or {}
            if self.modern:
                # Pinned to the revision, the SDK sent no probe: ask ourselves (raw result).
                d = await conn.session.send_discover(MODERN_VERSION)
                need(d.get("resultType") == "complete" and d.get("supportedVersions", [None])[0] == MODERN_VERSION
                     and isinstance(d.get("ttlMs"), int) and d.get("cacheScope") in ("public", "private"),
                     f"discover {short(d)}")
                info = (d.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
                caps = d.get("capabilities") or {}
            need(info.get("name") == "cideldill-breakpoint-server", f"serverInfo {info}")
            need(conn.version in (MODERN_VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"),
                 f"protocolVersion {conn.version}")
            need((caps.get("resources") or {}).get("subscribe") is True, f"capabilities {caps}")
            need("tools" in caps and "prompts" in caps, f"capabilities {caps}")
            return f"{conn.version}, server {info.get('version')}"
        await self.step("server/discover (modern)" if self.modern else "initialize", init_check)

        async def list_tools() -> str:
            res = dump(await conn.api.list_tools())
            tools = res["tools"]
            names = [t["name"] for t in tools]
            need(set(names) == EXPECTED_TOOLS and len(names) == len(EXPECTED_TOOLS),
                 f"missing {EXPECTED_TOOLS - set(names)}, extra {set(names) - EXPECTED_TOOLS}")
            for t in tools:
                need(t["inputSchema"].get("type") == "object", f"{t['name']} inputSchema {t['inputSchema']}")
                if conn.structured:
                    need("outputSchema" in t, f"{t['name']} has no outputSchema on {conn.version}")
            return f"{len(names)} tools"
        await self.step("tools/list", list_tools)

        if self.modern:
            # 2026-07-28 removed ping, logging/setLevel and resources/subscribe: the server
            # answers them -32601, and resource updates come through a listen stream.
            async def ping_removed() -> str:
                try:
                    await conn.ping()
                except Exception as e:  # noqa: BLE001
                    code = getattr(getattr(e, "error", None), "code", None)
                    need(code == -32601, f"{type(e).__name__} code {code}: {e}")
                    return "JSON-RPC error -32601"
                raise CheckFailed("ping answered on a modern connection")
            await self.step("ping is removed (modern)", ping_removed)

            async def listen() -> str:
                sub = await self.stack.enter_async_context(conn.api.listen(
                    resources_list_changed=True,
                    resource_subscriptions=["breakpoint://status", "breakpoint://paused"]))
                honored = dump(sub.honored)
                need(sorted(honored.get("resourceSubscriptions") or []) == ["breakpoint://paused", "breakpoint://status"]
                     and honored.get("resourcesListChanged") is True, f"honored {honored}")
                return f"acknowledged, subscription {sub.subscription_id}"
            await self.step("subscriptions/listen breakpoint://status + breakpoint://paused (logLevel info)", listen)
        else:
            async def ping() -> None:
                await conn.ping()
            await self.step("ping", ping)

            async def set_level() -> None:
                await conn.session.set_logging_level("info")
            await self.step("logging/setLevel info", set_level)

            # --- subscribe, then breakpoint_add must update breakpoint://status; pauses update
            # breakpoint://paused (what the server's instructions tell an agent to subscribe to)
            async def subscribe() -> None:
                await conn.session.subscribe_resource("breakpoint://status")
                await conn.session.subscribe_resource("breakpoint://paused")
            await self.step("resources/subscribe breakpoint://status + breakpoint://paused", subscribe)

            async def told() -> str:
                text = conn.init.get("instructions") or ""
                need("resources/subscribe to breakpoint://paused" in text and CUSTOM_CAPABILITY in text,
                     f"instructions {short(text, 200)}")
                return "resources/subscribe breakpoint://paused, logging/setLevel, the capability"
            await self.step("instructions say how to hear of pauses", told)

        await self.tool("breakpoint_list_breakpoints",
                        check=lambda d: need(d["breakpoints"] == [], f"expected no breakpoints: {d}"),
                        label="breakpoint_list_breakpoints (empty)")
        t0 = time.monotonic()
        await self.tool("breakpoint_add", {"function_name": "add", "condition": "args[0] > 1"},
                        check=lambda d: need(d == {"status": "ok", "function_name": "add",
                                                   "condition": "args[0] > 1", "hit_condition": None,
                                                   "log_message": None, "one_shot": False,
                                                   "hit_count": 0}, str(d)))

        async def updated() -> str:
            p = await seen.wait("notifications/resources/updated",
                                lambda p: p.get("uri") == "breakpoint://status", since=t0)
            need(p is not None, "no notifications/resources/updated for breakpoint://status within 5 s"
                 f" (seen: {[m for m, _, _ in seen.items]})")
            return f"after {(time.monotonic() - t0) * 1e3:.0f} ms"
        await self.step("notifications/resources/updated after breakpoint_add", updated)

        # --- the program registers functions (so replacements and list_functions have content)
        def register() -> None:
            for fn in ("add", "multiply"):
                http.request("POST", "/api/functions", {"function_name": fn, "signature": "(x, y=1)"})
        await anyio.to_thread.run_sync(register)

        await self.tool("breakpoint_list_breakpoints",
                        check=lambda d: need("add" in d["breakpoints"], f"add missing: {d}"))
        await self.tool("breakpoint_set_behavior", {"function_name": "add", "behavior": "stop"},
                        check=lambda d: need(d.get("behavior") == "stop", str(d)))
        await self.tool("breakpoint_set_after_behavior", {"function_name": "add", "behavior": "exception"},
                        check=lambda d: need(d.get("behavior") == "exception", str(d)))
        await self.tool("breakpoint_set_replacement", {"function_name": "add", "replacement_function": "multiply"},
                        check=lambda d: need(d.get("replacement_function") == "multiply", str(d)))
        await self.tool("breakpoint_set_replacement", {"function_name": "add", "replacement_function": ""},
                        label="breakpoint_set_replacement (clear)")
        await self.tool("breakpoint_set_enabled", {"function_name": "add", "enabled": False},
                        check=lambda d: need(d.get("enabled") is False, str(d)))
        await self.tool("breakpoint_set_enabled", {"function_name": "add", "enabled": True},
                        check=lambda d: need(d.get("enabled") is True, str(d)),
                        label="breakpoint_set_enabled (on again)")
        await self.tool("breakpoint_set_pausing", {"pausing": False},
                        check=lambda d: need(d.get("pausing") is False, str(d)))
        await self.tool("breakpoint_set_pausing", {"pausing": True},
                        check=lambda d: need(d.get("pausing") is True, str(d)),
                        label="breakpoint_set_pausing (on again)")
        await self.tool("breakpoint_get_default_behavior",
                        check=lambda d: need(d.get("behavior") == "stop", str(d)))
        await self.tool("breakpoint_set_default_behavior", {"behavior": "stop"},
                        check=lambda d: need(d.get("status") == "ok", str(d)))
        await self.tool("breakpoint_list_functions",
                        check=lambda d: need({"add", "multiply"} <= set(d["functions"]), str(d)))
        await self.tool("breakpoint_wait_for_pause", {"timeout_s": 0.2},
                        check=lambda d: need(d.get("paused") is False, str(d)),
                        label="breakpoint_wait_for_pause (timeout)")

        # --- progress while a tool blocks: MCP says `progress` MUST increase with each
        # notification. An unrelated state change (a breakpoint added over HTTP) happens
        # mid-wait, and the timeout is not a whole number of seconds.
        async def progress() -> str:
            got: list[tuple[float, float | None]] = []

            async def cb(p: float, total: float | None, message: str | None = None) -> None:
                got.append((p, total))

            async def poke() -> None:
                await anyio.sleep(1.5)
                await anyio.to_thread.run_sync(
                    lambda: http.request("POST", "/api/breakpoints", {"function_name": "progress_probe"}))
            async with anyio.create_task_group() as tg:
                tg.start_soon(poke)
                res = await conn.call("breakpoint_wait_for_pause", {"timeout_s": 3.5}, progress_callback=cb)
            tool_json(conn, res)
            values = [p for p, _ in got]
            need(len(values) >= 2, f"only {len(values)} progress notifications in 3.5 s: {got}")
            need(all(b > a for a, b in zip(values, values[1:])),
                 f"progress did not increase: (progress, total) = {got}")
            return f"{len(values)} notifications: {values}"
        await self.step("progress notifications increase (breakpoint_wait_for_pause 3.5 s)", progress)

        # --- a call of add(2, y=3) pauses
        t_pause = time.monotonic()
        start = await anyio.to_thread.run_sync(
            lambda: http.request("POST", "/api/call/start", call_start_body("add", [2], {"y": 3})))
        if start.get("action") != "poll":
            rep.fail("pause via POST /api/call/start", f"answer {start}")
            return
        pause_id = start["poll_url"].rsplit("/", 1)[-1]
        call_id = start["call_id"]
        rep.ok("pause via POST /api/call/start", f"pause {pause_id[:8]}…")

        async def paused_updated() -> str:
            p = await seen.wait("notifications/resources/updated",
                                lambda p: p.get("uri") == "breakpoint://paused", since=t_pause)
            need(p is not None, "no notifications/resources/updated for breakpoint://paused within 5 s"
                 f" (seen: {[m for m, _, _ in seen.items]})")
            return "through message_handler" + (" (listen stream)" if self.modern else "")
        await self.step("notifications/resources/updated breakpoint://paused after a pause", paused_updated)

        async def log_msg() -> str:
            p = await seen.wait("notifications/message", lambda p: pause_id in json.dumps(p), since=t_pause)
            need(p is not None, "no notifications/message for the pause after "
                 + ("logLevel info in the listen request's _meta" if self.modern else "logging/setLevel info"))
            need(p.get("level") == "info", f"level {p.get('level')}")
            return short(p.get("data"), 80)
        await self.step("notifications/message after a pause"
                        + (" (listen stream, logLevel info)" if self.modern else ""), log_msg)

        async def list_changed() -> str:
            p = await seen.wait("notifications/resources/list_changed", since=t_pause)
            need(p is not None, "no notifications/resources/list_changed after the pause")
            return ""
        await self.step("notifications/resources/list_changed after a pause", list_changed)

        async def custom() -> str:
            if HAS_CLIENT:
                p = await seen.wait(PAUSED_NOTIFICATION, since=t_pause)
                need(p is not None, "no notifications/breakpoint/execution_paused reached the"
                     " NotificationBinding within 5 s")
                need(p.get("pause_id") == pause_id, f"params {p}")
                return f"declared {CUSTOM_CAPABILITY} (ClientExtension); through its NotificationBinding"
            # mcp 1.x cannot declare the capability: nothing custom may reach it. The server sends
            # a pause's notifications in one go, custom first: list_changed has come, so it would have.
            raw = [m for m, _, _ in seen.raw if m.startswith("notifications/breakpoint/")]
            need(not raw, f"sent to a client that did not declare {CUSTOM_CAPABILITY}: {raw}")
            return f"none on the wire: ClientSession cannot declare {CUSTOM_CAPABILITY}"
        await self.step("notifications/breakpoint/execution_paused" if HAS_CLIENT
                        else "no notifications/breakpoint/* without the capability", custom)

        pause = await self.tool("breakpoint_wait_for_pause", {"function_name": "add", "timeout_s": 5},
                                check=lambda d: need(d.get("paused") is True and d["pause"]["id"] == pause_id, short(d)))
        await self.tool("breakpoint_list_paused",
                        check=lambda d: need([p["id"] for p in d["paused"]] == [pause_id], short(d)))
        arg_cid = None
        if pause:
            try:
                arg_cid = pause["pause"]["call_data"]["args"][0]["cid"]
                need("data" not in pause["pause"]["call_data"]["args"][0], "tool result carries base64 data")
            except (KeyError, IndexError, CheckFailed) as e:
                rep.fail("pause call_data args[0].cid", repr(e))
        if arg_cid:
            await self.tool("breakpoint_inspect_object", {"cid": arg_cid},
                            check=lambda d: need(d.get("repr") == "2", f"repr {d.get('repr')!r}: {short(d)}"))

        # --- REPL: the "program" answers from a thread
        responder = ReplResponder(http, pause_id, lambda expr: "3" if expr == "args[0] + 1" else "None")
        responder.start()
        try:
            await self.tool("breakpoint_repl_eval", {"pause_id": pause_id, "expression": "args[0] + 1", "timeout_s": 10},
                            check=lambda d: need(d.get("output") == "3" and d.get("is_error") is False, short(d)))
        finally:
            responder.stop.set()
            await anyio.to_thread.run_sync(responder.join, 5)
        if responder.errors:
            rep.info(f"REPL responder errors: {responder.errors[:3]}")

        # --- resources, templates, prompts, completion while paused
        async def resources() -> str:
            res = dump(await conn.api.list_resources())
            uris = {r["uri"] for r in res["resources"]}
            want = FIXED_RESOURCES | {f"breakpoint://paused/{pause_id}"}
            need(want <= uris, f"missing {want - uris}")
            for uri in sorted(uris):
                rr = dump(await conn.api.read_resource(uri))
                c = rr["contents"]
                need(len(c) == 1 and "text" in c[0], f"{uri}: contents {short(c)}")
                need(c[0].get("mimeType") == "application/json", f"{uri}: mimeType {c[0].get('mimeType')}")
                need(c[0]["uri"].rstrip("/") == uri, f"{uri}: content uri {c[0]['uri']}")
                body = json.loads(c[0]["text"])
                if uri == "breakpoint://status":
                    need(body.get("paused") in (1, [pause_id]) or pause_id in json.dumps(body), f"status {short(body)}")
                if uri.startswith("breakpoint://paused/"):
                    need(body.get("id") == pause_id, f"{uri}: {short(body)}")
            return f"{len(uris)} listed and read"
        await self.step("resources/list + resources/read (all)", resources)

        async def read_templates() -> str:
            res = dump(await conn.api.list_resource_templates())
            got = {t["uriTemplate"] for t in res["resourceTemplates"]}
            need(got == TEMPLATES, f"templates {got}")
            if arg_cid:
                rr = dump(await conn.api.read_resource(f"breakpoint://object/{arg_cid}"))
                body = json.loads(rr["contents"][0]["text"])
                need(body.get("repr") == "2", f"object template read: {short(body)}")
            return f"{len(got)} templates; breakpoint://object/<cid> read"
        await self.step("resources/templates/list", read_templates)

        async def not_found() -> str:
            try:
                await conn.api.read_resource("breakpoint://paused/nope")
            except Exception as e:  # noqa: BLE001
                code = getattr(getattr(e, "error", None), "code", None)
                need(code in (-32002, -32602), f"{type(e).__name__} code {code}: {e}")
                return f"JSON-RPC error {code}"
            raise CheckFailed("reading an unknown pause resource succeeded")
        await self.step("resources/read unknown uri", not_found)

        async def prompts() -> str:
            res = dump(await conn.api.list_prompts())
            names = {p["name"] for p in res["prompts"]}
            need(names == {"debug-session-start", "inspect-paused-call"}, f"prompts {names}")
            g1 = dump(await conn.api.get_prompt("debug-session-start", {}))
            t1 = g1["messages"][0]["content"]["text"]
            need("breakpoint_wait_for_pause" in t1 and pause_id in t1, f"debug-session-start text {short(t1)}")
            g2 = dump(await conn.api.get_prompt("inspect-paused-call", {"pause_id": pause_id}))
            t2 = g2["messages"][0]["content"]["text"]
            need(pause_id in t2 and "add" in t2, f"inspect-paused-call text {short(t2)}")
            return "both prompts rendered"
        await self.step("prompts/list + prompts/get", prompts)

        async def complete() -> str:
            ref = types.PromptReference(type="ref/prompt", name="inspect-paused-call")
            res = dump(await conn.api.complete(ref, {"name": "pause_id", "value": pause_id[:4]}))
            values = res["completion"]["values"]
            need(values == [pause_id], f"values {values}")
            return f"{len(values)} value"
        await self.step("completion/complete inspect-paused-call pause_id", complete)

        # --- errors
        async def not_found() -> str:
            # As the original server answers it: a result (isError false) naming the error, whose
            # structuredContent the SDK validated against the tool's outputSchema.
            res = await conn.call("breakpoint_continue", {"pause_id": "no-such-pause"})
            data = tool_json(conn, res, expect_error=False)
            need(data.get("error") == "pause_not_found" and data.get("pause_id") == "no-such-pause", short(data))
            need(all(isinstance(data[k], str) and data[k] for k in ("error", "message", "hint")), short(data))
            return data["error"]
        await self.step("not-found result (breakpoint_continue unknown pause)", not_found)

        async def cid_not_found() -> str:
            res = await conn.call("breakpoint_inspect_object", {"cid": "0" * 128})
            data = tool_json(conn, res, expect_error=False)
            need(data.get("error") == "cid_not_found" and data.get("cid") == "0" * 128, short(data))
            return data["error"]
        await self.step("not-found result (breakpoint_inspect_object unknown CID)", cid_not_found)

        async def bad_args() -> str:
            res = await conn.call("breakpoint_add", {})
            data = tool_json(conn, res, expect_error=True)
            need("function_name" in json.dumps(data), f"does not name the parameter: {short(data)}")
            return data["error"]
        await self.step("isError result (breakpoint_add without function_name)", bad_args)

        # --- the external_* tools of a server with no external MCP server connected (its client
        # manager idles until one is): empty listings, and a named server is not found, with a hint
        for name, args, check in (
                ("external_list_servers", {}, lambda d: need(d == {"servers": {}}, short(d))),
                ("external_list_tools", {}, lambda d: need(d == {"tools": []}, short(d))),
                ("external_list_resources", {},
                 lambda d: need(d == {"resources": [], "errors": {}}, short(d)))):
            await self.tool(name, args, check=check, label=f"{name} without external servers")
        for name, args in (("external_call_tool", {"tool": "everything/echo", "arguments": {"message": "x"}}),
                           ("external_read_resource", {"server": "everything", "uri": "demo://x"})):
            async def not_found(name: str = name, args: dict = args) -> str:
                data = tool_json(conn, await conn.call(name, args), expect_error=True)
                need(data.get("error") == "server_not_found" and data.get("hint"), short(data))
                self.called.add(name)
                return data["error"]
            await self.step(f"tool {name} without external servers (isError)", not_found)

        async def unknown_tool() -> str:
            try:
                res = await conn.call("no_such_tool", {})
            except Exception as e:  # noqa: BLE001
                code = getattr(getattr(e, "error", None), "code", None)
                need(code == -32602, f"{type(e).__name__} code {code}: {e}")
                return "JSON-RPC error -32602"
            raise CheckFailed(f"no error: {short(res)}")
        await self.step("unknown tool", unknown_tool)

        # --- resume, complete the call, records
        await self.tool("breakpoint_continue", {"pause_id": pause_id, "action": "continue"},
                        check=lambda d: need(d.get("status") == "ok" and d.get("pause_id") == pause_id, str(d)))

        async def program_resumes() -> str:
            def go() -> Any:
                poll = http.request("GET", f"/api/poll/{pause_id}")
                need(poll.get("status") == "ready" and poll["action"].get("action") == "continue", short(poll))
                r = item(5, 9)
                return http.request("POST", "/api/call/complete", {
                    "call_id": call_id, "timestamp": time.time(), "status": "success",
                    "process_pid": PID, "process_start_time": START_TIME,
                    "result_cid": r["cid"], "result_client_ref": 9, "result_data": r["data"]})
            done = await anyio.to_thread.run_sync(go)
            need(done.get("status") == "ok", f"call/complete answered {done}")
            return "poll ready, call completed"
        await self.step("program resumes and completes (HTTP)", program_resumes)
        await self.tool("breakpoint_continue_all", {},
                        check=lambda d: need(d.get("status") == "ok" and isinstance(d.get("resumed"), list), str(d)))

        await self.tool("breakpoint_get_call_records", {"function_name": "add", "limit": 10},
                        check=lambda d: need(d["total_count"] >= 1 and d["calls"][0]["method_name"] == "add", short(d)))

        # --- runs: this program's run listed, labelled, compared with itself
        run_id = f"{START_TIME:.6f}+{PID}"
        await self.tool("breakpoint_list_runs", {},
                        check=lambda d: need(any(r["run_id"] == run_id for r in d["runs"]), short(d)))
        await self.tool("breakpoint_label_run", {"run_id": run_id, "label": "interop", "notes": "from the SDK"},
                        check=lambda d: need(d.get("label") == "interop" and d.get("notes") == "from the SDK", short(d)))
        await self.tool("breakpoint_compare_runs", {"a": run_id, "b": run_id},
                        check=lambda d: need(d["total_pairs"] >= 1 and d["counts"]["same"] == d["total_pairs"]
                                             and d["first_divergence"] is None, short(d)))

        # --- replay: the completed add(2, y=3) again, through a new pause of add that the
        # "program" answers by making the call (which the server lets run) and reporting it
        again = await anyio.to_thread.run_sync(
            lambda: http.request("POST", "/api/call/start", call_start_body("add", [2], {"y": 3})))
        if again.get("action") != "poll":
            rep.fail("a second add pauses (for the replay)", f"answer {again}")
        else:
            replay_pause = again["poll_url"].rsplit("/", 1)[-1]

            def replay_program() -> None:
                until = time.time() + 20
                while time.time() < until:
                    req = http.request("GET", f"/api/poll-repl/{replay_pause}")
                    if req and req.get("eval_id"):
                        started = http.request("POST", "/api/call/start", call_start_body("add", [2], {"y": 3}))
                        r = item(5, 9)
                        http.request("POST", "/api/call/complete", {
                            "call_id": started["call_id"], "timestamp": time.time(), "status": "success",
                            "process_pid": PID, "process_start_time": START_TIME,
                            "result_cid": r["cid"], "result_client_ref": 9, "result_data": r["data"]})
                        http.request("POST", "/api/call/repl-result", {
                            "eval_id": req["eval_id"], "pause_id": replay_pause, "session_id": req["session_id"],
                            "result": "5", "stdout": "", "error": None, "result_cid": None, "result_data": None})
                        return
                    time.sleep(0.05)
            program = threading.Thread(target=replay_program, daemon=True)
            program.start()
            await self.tool("breakpoint_replay_call", {"call_id": call_id, "timeout_s": 15},
                            check=lambda d: need(d.get("same") is True and d.get("record_id"), short(d)))
            await anyio.to_thread.run_sync(program.join, 5)
            await self.tool("breakpoint_continue", {"pause_id": replay_pause, "action": "continue"},
                            check=lambda d: need(d.get("status") == "ok", str(d)),
                            label="breakpoint_continue (the replay's pause)")
            # No call of the program is paused now: the sequence stops at its first call.
            await self.tool("breakpoint_replay_run",
                            {"run_id": f"{START_TIME}+{PID}", "call_ids": [call_id], "timeout_s": 5},
                            check=lambda d: need((d.get("stopped") or {}).get("error") == "no_live_program"
                                                 and d.get("completed") is False, short(d)))
        await self.tool("breakpoint_remove", {"function_name": "add"},
                        check=lambda d: need(d.get("status") == "ok", str(d)))

        missing = EXPECTED_TOOLS - self.called
        rep.check("every tool called successfully", not missing, f"not (successfully) called: {sorted(missing)}",
                  f"{len(self.called)}/{len(EXPECTED_TOOLS)}")


# ------------------------------------------------------------------------------------------


async def run_connection(rep: Report, binary: Path, tmp: Path, mode: str | None) -> None:
    home = tmp / ("home-" + (mode or "main"))
    home.mkdir(parents=True, exist_ok=True)
    port_file = home / "port"
    env = {"CIDELDILL_HOME": str(home), "CIDELDILL_PORT_FILE": str(port_file),
           "RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn")}
    running = None
    if mode in ("joined", "joined-modern"):
        # A server already runs (as `cargo run --release` would); the host starts
        # `cideldill-server --mcp`, which joins it through its stdio <-> /mcp bridge.
        running = subprocess.Popen([str(binary), "--memory", "--port", "0"],
                                   env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=open(home / "running.log", "w"))
        Http(port_file).wait_port()
        args = ["--mcp"]
    else:
        args = ["--mcp", "--memory", "--port", "0"]
    params = StdioServerParameters(command=str(binary), args=args, env=env)
    seen = Seen()
    sdk_log = SdkWarnings()
    logging.getLogger().addHandler(sdk_log)
    logging.getLogger().setLevel(logging.DEBUG)
    for noisy in ("httpx", "httpcore", "asyncio", "anyio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    t_close = None
    try:
        from contextlib import AsyncExitStack
        async with anyio.create_task_group() as tg:
            async with AsyncExitStack() as stack:
                if HAS_CLIENT:
                    conn = await v2_connect(params, seen, stack,
                                            "legacy" if mode in (None, "joined")
                                            else MODERN_VERSION if mode == "modern"
                                            else "auto" if mode == "joined-modern" else mode)
                else:
                    conn = await v1_connect(params, seen, stack, tg)
                if mode == "auto":
                    async def auto() -> str:
                        res = dump(await conn.api.list_tools())
                        need(len(res["tools"]) == len(EXPECTED_TOOLS), f"{len(res['tools'])} tools")
                        r = await conn.call("breakpoint_get_default_behavior")
                        tool_json(conn, r)
                        # The server answers the server/discover probe: the connection is modern.
                        need(conn.version == MODERN_VERSION and conn.session.initialize_result is None,
                             f"fell back to initialize, negotiated {conn.version}")
                        return f"went modern through server/discover, {conn.version}"
                    await Runner(rep, conn, seen, Http(port_file)).step("mode=auto connect + tools", auto)
                else:
                    if mode == "joined-modern":
                        rep.check("mode=auto goes modern through the bridge",
                                  conn.version == MODERN_VERSION and conn.session.initialize_result is None,
                                  f"fell back to initialize, negotiated {conn.version}",
                                  f"server/discover answered, {conn.version}")
                    with anyio.fail_after(150):
                        await Runner(rep, conn, seen, Http(port_file), stack).run_all()
                t_close = time.monotonic()
            tg.cancel_scope.cancel()
    except Exception as e:  # noqa: BLE001
        rep.fail(f"connection ({mode or 'legacy'})", f"{describe(e)}\n{traceback.format_exc()}")
    finally:
        logging.getLogger().removeHandler(sdk_log)
        if running is not None:
            alive = running.poll() is None
            text = port_file.read_text().strip() if port_file.exists() else ""
            port = Http(port_file).wait_port(1) if text else ""
            rep.check("joined: the running server outlives the agent's process, port file intact",
                      alive and text.isdigit(), f"running={alive} port file={text!r}",
                      f"still serving at {port}")
            running.terminate()
            try:
                running.wait(timeout=10)
            except subprocess.TimeoutExpired:
                running.kill()
    if t_close is not None and mode in ("joined", "joined-modern"):
        rep.info(f"SDK close of the joining process took {time.monotonic() - t_close:.1f} s "
                 "(the bridge exits when stdin closes)")
    elif t_close is not None:
        rep.info(f"SDK close of the stdio server took {time.monotonic() - t_close:.1f} s "
                 "(the server keeps serving HTTP after stdin closes unless --exit-on-stdin-close, so the SDK "
                 "waits for its exit timeout and then terminates it)")
    if mode != "auto":
        # A call paused, resumed and completed in this session: the SDK must have logged no
        # warning (mcp 1.x logs "Failed to validate notification" for every method outside MCP).
        rep.check("the SDK logged no warning during the session (pause, resume, completion)",
                  not sdk_log.warnings, f"{len(sdk_log.warnings)} warning(s): {short('; '.join(sdk_log.warnings[:3]), 500)}",
                  f"{len(sdk_log.records)} notification-related debug records"
                  + (f", first: {short(sdk_log.records[0].splitlines()[0], 160)}" if sdk_log.records else ""))


async def main_async(binary: Path) -> int:
    rep = Report(f"[mcp {SDK_VERSION}] ")
    tmp = Path(tempfile.mkdtemp(prefix="cideldill-interop-py-"))
    try:
        rep.info(f"client: {'mcp.Client(StdioServerParameters, mode=legacy)' if HAS_CLIENT else 'stdio_client + ClientSession'}")
        await run_connection(rep, binary, tmp, None)
        if HAS_CLIENT:
            await run_connection(rep, binary, tmp, "auto")
            rep.info(f"again, in the stateless revision {MODERN_VERSION} (mode={MODERN_VERSION!r})")
            prefix = rep.prefix
            rep.prefix = prefix + "[modern] "
            await run_connection(rep, binary, tmp, "modern")
            rep.prefix = prefix
        rep.info("again, with `--mcp` joining a running server (the stdio <-> /mcp bridge)")
        rep.prefix = rep.prefix + "[joined] "
        await run_connection(rep, binary, tmp, "joined")
        if HAS_CLIENT:
            rep.info("again, joined, with mode=auto (the stateless revision through the bridge)")
            rep.prefix = rep.prefix + "[modern] "
            await run_connection(rep, binary, tmp, "joined-modern")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"interop_client [mcp {SDK_VERSION}]: {rep.passed} passed, {rep.failed} failed", flush=True)
    return 1 if rep.failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(REPO / "target/debug/cideldill-server"))
    a = ap.parse_args()
    binary = Path(a.binary).resolve()
    if not binary.is_file():
        print(f"FAIL setup: no binary at {binary} (run cargo build)", flush=True)
        return 1
    return anyio.run(main_async, binary)


if __name__ == "__main__":
    sys.exit(main())
