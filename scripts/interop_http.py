#!/usr/bin/env python3
"""Interop check of `cideldill-server --mcp-sse` with the official MCP Python SDK over HTTP.

What it does
    For each of the SDK's two HTTP client transports it starts its own
    `<binary> --mcp-sse --memory --port 0` (CIDELDILL_HOME and CIDELDILL_PORT_FILE in a fresh
    temporary directory, so ~/.cideldill is never touched), reads the port from the port file
    and connects:
        sse              legacy HTTP+SSE at /mcp/sse (mcp.client.sse.sse_client; the first
                         event `endpoint` names /mcp/messages?session_id=<id>)
        streamable-http  Streamable HTTP at /mcp (mcp 1.x: streamable_http_client, the
                         non-deprecated name of streamablehttp_client; mcp 2.x: mcp.Client(url))
        streamable-http-legacy  (mcp 2.x only) Streamable HTTP at /mcp with mcp.Client(url,
                         mode="legacy"): initialize and a session, so both eras stay covered;
                         this client declares no capability (a standard client)
    mcp 1.x drives a ClientSession over the transport's streams; mcp 2.x uses mcp.Client with
    its default mode="auto" (a server/discover probe, then the initialize fallback): over
    Streamable HTTP the server answers the probe, so that connection speaks the stateless
    revision 2026-07-28 (no session, no ping, no resources/subscribe: a subscriptions/listen
    stream carries the notifications instead); over legacy SSE the probe is refused and it
    falls back to initialize.
    Each connection: initialize, tools/list (the 15 `breakpoint_*` and 5 `external_*` tools), ping,
    logging/setLevel info, resources/subscribe breakpoint://status, breakpoint://paused and
    breakpoint://call-history (modern: a listen stream with those, logLevel info in its _meta) +
    breakpoint_add -> notifications/resources/updated, breakpoint_list_breakpoints,
    breakpoint_wait_for_pause (timeout_s 0.5 -> paused false), resources/read breakpoint://status,
    progress notifications during a blocking tool call, then a call paused through the server's
    REST API (POST /api/call/start, as the debugged program does) -> resources/updated
    breakpoint://paused, notifications/message, notifications/resources/list_changed and
    notifications/breakpoint/execution_paused only for a client that declared the capability
    (mcp 2.x's ClientExtension; mcp 1.x and the plain mcp 2.x client get none),
    breakpoint_wait_for_pause (paused true), status again, breakpoint_continue, the program
    completes the call; no SDK warning in the whole session; after the client closes, whether
    the server ended the session (Streamable HTTP: the SDK's DELETE, then the old Mcp-Session-Id
    must get 404).

What it needs
    Python 3.10+ with the `mcp` package (tested: 1.30.0 and 2.3.0), a built binary, and
    scripts/interop_client.py next to this file (shared helpers).

How to call it
    <venv>/bin/python scripts/interop_http.py [--binary target/debug/cideldill-server]

Output
    One line per check, `PASS <name>` or `FAIL <name>: <why>` (and `SKIP`/`INFO` lines), then
    `interop_http [mcp X]: N passed, N failed`; exit status 1 if any check failed, else 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # no scripts/__pycache__ from the import below
sys.path.insert(0, str(Path(__file__).resolve().parent))
import interop_client as ic  # noqa: E402  (shared helpers; importing it has no side effects)

import anyio  # noqa: E402

from interop_client import CheckFailed, need, short  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
KINDS = ("sse", "streamable-http", "streamable-http-legacy")
# The resources every connection watches: what a pause, a resume and a completion update.
WATCHED = ["breakpoint://status", "breakpoint://paused", "breakpoint://call-history"]
CONNECTION_BUDGET_S = 30  # per connection; a hang is reported, not waited out


# ------------------------------------------------------------------------------------------
# The server, one per connection


class Server:
    def __init__(self, binary: Path, home: Path) -> None:
        self.binary, self.home = binary, home
        self.port_file = home / "port"
        self.log = home / "server.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> ic.Http:
        self.home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, CIDELDILL_HOME=str(self.home), CIDELDILL_PORT_FILE=str(self.port_file),
                   RUST_LOG=os.environ.get("INTEROP_RUST_LOG", "warn"))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(self.binary), "--mcp-sse", "--memory", "--port", "0"],
                                         env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        http = ic.Http(self.port_file)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise CheckFailed(f"server exited with status {self.proc.returncode}: {self.tail()}")
            try:
                http.wait_port(timeout=0.2)
                return http
            except CheckFailed:
                pass
        raise CheckFailed(f"no port file {self.port_file} after 15 s: {self.tail()}")

    def tail(self, n: int = 5) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> str | None:
        """Stops the server; returns a complaint if it did not stop on SIGTERM within 5 s."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(5)
            return None
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return "did not exit within 5 s of SIGTERM (killed)"


# ------------------------------------------------------------------------------------------
# What the SDK logged: session ids, termination failures, dropped notifications


class SdkLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str, str]] = []  # (logger, level, message)

    def emit(self, record: logging.LogRecord) -> None:
        if not (record.name.startswith("mcp") or record.name == "root"):  # mcp 1.x logs some via root
            return
        try:
            self.records.append((record.name, record.levelname, record.getMessage()))
        except Exception:  # noqa: BLE001
            pass

    def session_id(self, kind: str) -> str | None:
        pat = r"endpoint URL: \S*[?&]session_id=([^&\s]+)" if kind == "sse" else r"Received session ID: (\S+)"
        for _, _, msg in self.records:
            m = re.search(pat, msg)
            if m:
                return m.group(1)
        return None

    def warnings(self) -> list[str]:
        return [f"{name}: {msg.splitlines()[0]}" for name, level, msg in self.records
                if level in ("WARNING", "ERROR", "CRITICAL")]


def raw_post(url: str, body: dict, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


# ------------------------------------------------------------------------------------------
# One connection


class Steps(ic.Runner):
    """interop_client's Runner, remembering the step in progress (named when a step hangs)."""

    current = "connect + initialize"

    async def step(self, name: str, fn: Any) -> Any:
        self.current = name
        result = await super().step(name, fn)  # a cancellation (hang) leaves `current` as is
        self.current = f"after {name}"
        return result


async def open_conn(kind: str, url: str, seen: ic.Seen, stack: AsyncExitStack, tg: Any) -> tuple[ic.Conn, str]:
    if ic.HAS_CLIENT:
        if kind == "sse":
            from mcp.client.sse import sse_client
            return await ic.v2_connect(sse_client(url), seen, stack, mode="auto"), \
                "mcp.Client(sse_client(url)), mode=auto"
        if kind == "streamable-http-legacy":
            return await ic.v2_connect(url, seen, stack, mode="legacy", custom=False), \
                "mcp.Client(url), mode=legacy, no extension"
        return await ic.v2_connect(url, seen, stack, mode="auto"), "mcp.Client(url), mode=auto"
    if kind == "sse":
        from mcp.client.sse import sse_client
        read, write = await stack.enter_async_context(sse_client(url))
        how = "sse_client + ClientSession"
    else:
        from mcp.client.streamable_http import streamable_http_client
        read, write, _ = await stack.enter_async_context(streamable_http_client(url))
        how = "streamable_http_client + ClientSession"
    return await ic.v1_session(read, write, seen, stack, tg), how


def declares_custom(kind: str) -> bool:
    """Whether the connection declares the capability of the custom notifications: mcp 2.x's
    ClientExtension, except on the plain legacy client; mcp 1.x cannot."""
    return ic.HAS_CLIENT and kind != "streamable-http-legacy"


def expected_era(kind: str) -> str:
    """The era a connection must end up in: mcp 2.x's mode=auto goes modern on Streamable HTTP."""
    return "modern" if ic.HAS_CLIENT and kind == "streamable-http" else "legacy"


async def checks(run: Steps, kind: str, how: str) -> None:
    rep, conn, seen, http = run.rep, run.conn, run.seen, run.http
    step, tool = run.step, run.tool
    modern = expected_era(kind) == "modern"

    async def init_check() -> str:
        info = conn.init.get("serverInfo") or {}
        caps = conn.init.get("capabilities") or {}
        need(info.get("name") == "cideldill-breakpoint-server", f"serverInfo {info}")
        if modern:
            need(conn.version == ic.MODERN_VERSION and conn.session.initialize_result is None,
                 f"expected the stateless revision through server/discover, got {conn.version}")
        else:
            need(conn.version in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"),
                 f"protocolVersion {conn.version}")
        need((caps.get("resources") or {}).get("subscribe") is True and "tools" in caps, f"capabilities {caps}")
        return f"{how}, {'server/discover: ' if modern else 'negotiated '}{conn.version}"
    await step("server/discover (modern)" if modern else "initialize", init_check)

    async def list_tools() -> str:
        names = [t["name"] for t in ic.dump(await conn.api.list_tools())["tools"]]
        need(set(names) == ic.EXPECTED_TOOLS and len(names) == len(ic.EXPECTED_TOOLS),
             f"missing {ic.EXPECTED_TOOLS - set(names)}, extra {set(names) - ic.EXPECTED_TOOLS}")
        return f"{len(names)} tools"
    await step("tools/list", list_tools)

    if modern:
        async def ping_removed() -> str:
            try:
                with anyio.fail_after(10):
                    await conn.ping()
            except TimeoutError:
                raise
            except Exception as e:  # noqa: BLE001
                code = getattr(getattr(e, "error", None), "code", None)
                need(code == -32601, f"{type(e).__name__} code {code}: {e}")
                return "JSON-RPC error -32601 (HTTP 404)"
            raise CheckFailed("ping answered in the stateless revision")
        await step("ping is removed (modern)", ping_removed)

        async def listen() -> str:
            with anyio.fail_after(10):
                sub = await run.stack.enter_async_context(conn.api.listen(
                    resources_list_changed=True, resource_subscriptions=WATCHED))
            honored = ic.dump(sub.honored)
            need(sorted(honored.get("resourceSubscriptions") or []) == sorted(WATCHED)
                 and honored.get("resourcesListChanged") is True, f"honored {honored}")
            return f"a POST whose stream stays open; acknowledged, subscription {sub.subscription_id}"
        await step("subscriptions/listen breakpoint://status, paused, call-history (logLevel info)", listen)
    else:
        async def ping() -> None:
            with anyio.fail_after(10):
                await conn.ping()
        await step("ping", ping)

        async def set_level() -> None:
            with anyio.fail_after(10):
                await conn.session.set_logging_level("info")
        await step("logging/setLevel info", set_level)

        async def subscribe() -> None:
            with anyio.fail_after(10):
                for uri in WATCHED:
                    await conn.session.subscribe_resource(uri)
        await step("resources/subscribe breakpoint://status, paused, call-history", subscribe)

    t0 = time.monotonic()
    await tool("breakpoint_add", {"function_name": "add", "condition": "args[0] > 1"},
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
    await step("notifications/resources/updated after breakpoint_add", updated)

    await tool("breakpoint_list_breakpoints",
               check=lambda d: need(d["breakpoints"] == ["add"], f"expected ['add']: {short(d)}"))
    await tool("breakpoint_wait_for_pause", {"timeout_s": 0.5},
               check=lambda d: need(d.get("paused") is False and d.get("pause") is None, short(d)),
               label="breakpoint_wait_for_pause (timeout_s 0.5)")

    async def read_status(want: dict) -> str:
        rr = ic.dump(await conn.api.read_resource("breakpoint://status"))
        c = rr["contents"]
        need(len(c) == 1 and c[0].get("uri") == "breakpoint://status" and "text" in c[0], f"contents {short(c)}")
        need(c[0].get("mimeType") == "application/json", f"mimeType {c[0].get('mimeType')}")
        body = json.loads(c[0]["text"])
        need(body == want, f"{body} (expected {want})")
        return c[0]["text"]
    await step("resources/read breakpoint://status",
               lambda: read_status({"breakpoints": 1, "paused": 0, "total_calls": 0, "pausing": True}))

    # A tool call with a progress token: over Streamable HTTP the server answers on an SSE
    # response stream (progress events, then the result); over legacy SSE on the session stream.
    async def progress() -> str:
        got: list[float] = []

        async def cb(p: float, total: float | None, message: str | None = None) -> None:
            got.append(p)
        res = await conn.call("breakpoint_wait_for_pause", {"timeout_s": 1.5}, progress_callback=cb)
        data = ic.tool_json(conn, res)
        need(data.get("paused") is False, short(data))
        need(len(got) >= 1, f"no progress notification in 1.5 s: {got}")
        need(all(b > a for a, b in zip(got, got[1:])), f"progress did not increase: {got}")
        return f"{len(got)} notifications: {got}"
    await step("progress notifications (breakpoint_wait_for_pause 1.5 s)", progress)

    # --- the debugged program pauses in add(2, y=3)
    t_pause = time.monotonic()
    try:
        start = await anyio.to_thread.run_sync(
            lambda: http.request("POST", "/api/call/start", ic.call_start_body("add", [2], {"y": 3})))
    except Exception as e:  # noqa: BLE001
        rep.fail("pause via POST /api/call/start", ic.describe(e))
        return
    if start.get("action") != "poll":
        rep.fail("pause via POST /api/call/start", f"answer {start}")
        return
    pause_id = start["poll_url"].rsplit("/", 1)[-1]
    rep.ok("pause via POST /api/call/start", f"pause {pause_id[:8]}…")

    async def paused_updated() -> str:
        p = await seen.wait("notifications/resources/updated",
                            lambda p: p.get("uri") == "breakpoint://paused", since=t_pause)
        need(p is not None, "no notifications/resources/updated for breakpoint://paused within 5 s"
             f" (seen: {[m for m, _, _ in seen.items]})")
        return "through message_handler"
    await step("notifications/resources/updated breakpoint://paused after a pause", paused_updated)

    async def log_msg() -> str:
        p = await seen.wait("notifications/message", lambda p: pause_id in json.dumps(p), since=t_pause)
        need(p is not None and p.get("level") == "info",
             f"no notifications/message (info) for the pause within 5 s: {p}")
        return short(p.get("data"), 60)
    await step("notifications/message after a pause", log_msg)

    async def list_changed() -> str:
        p = await seen.wait("notifications/resources/list_changed", since=t_pause)
        need(p is not None, "no notifications/resources/list_changed reached message_handler within 5 s"
             f" (seen: {[m for m, _, _ in seen.items]})")
        return "through message_handler"
    await step("notifications/resources/list_changed after a pause", list_changed)

    async def custom() -> str:
        if declares_custom(kind):
            p = await seen.wait(ic.PAUSED_NOTIFICATION, since=t_pause)
            need(p is not None, "no notifications/breakpoint/execution_paused reached the"
                 f" NotificationBinding within 5 s (seen: {[m for m, _, _ in seen.items]})")
            need(p.get("pause_id") == pause_id, f"params {short(p)}")
            return f"declared {ic.CUSTOM_CAPABILITY} (ClientExtension); through its NotificationBinding"
        # A pause's notifications are sent in one go, the custom one first: list_changed came.
        got = [m for m, _, _ in seen.raw + seen.items if m.startswith("notifications/breakpoint/")]
        need(not got, f"sent to a client that did not declare {ic.CUSTOM_CAPABILITY}: {got}")
        return "none: the client did not declare " + ic.CUSTOM_CAPABILITY
    await step("notifications/breakpoint/execution_paused" if declares_custom(kind)
               else "no notifications/breakpoint/* without the capability", custom)

    await tool("breakpoint_wait_for_pause", {"function_name": "add", "timeout_s": 5},
               check=lambda d: need(d.get("paused") is True and d["pause"]["id"] == pause_id, short(d)),
               label="breakpoint_wait_for_pause (paused)")
    await step("resources/read breakpoint://status (paused)",
               lambda: read_status({"breakpoints": 1, "paused": 1, "total_calls": 0, "pausing": True}))
    t_cont = time.monotonic()
    await tool("breakpoint_continue", {"pause_id": pause_id, "action": "continue"},
               check=lambda d: need(d.get("status") == "ok" and d.get("pause_id") == pause_id, short(d)))

    # The server answers tools/call first and then sends execution_resumed, list_changed and
    # resources/updated. If one arrives while mcp 2.3.0 closes the session, its legacy SSE
    # reader raises BrokenResourceError out of the client's close (its `except Exception`
    # forwards the error into the read stream that just closed) and its Streamable HTTP GET
    # reader logs "Error parsing SSE message". An SDK race, not a server fault: wait for the
    # last notification before closing.
    async def resumed() -> str:
        if declares_custom(kind):
            p = await seen.wait("notifications/breakpoint/execution_resumed", since=t_cont)
            need(p is not None and p.get("pause_id") == pause_id,
                 f"no notifications/breakpoint/execution_resumed for the pause within 5 s: {p}")
        m = await seen.wait("notifications/message", lambda p: "resumed" in json.dumps(p), since=t_cont)
        need(m is not None and pause_id in json.dumps(m),
             f"no notifications/message for the resume within 5 s: {m}")
        u = await seen.wait("notifications/resources/updated",
                            lambda p: p.get("uri") == "breakpoint://paused", since=t_cont)
        need(u is not None, "no notifications/resources/updated for breakpoint://paused within 5 s")
        return ("execution_resumed, " if declares_custom(kind) else "") + "a log line, resources/updated"
    await step("notifications after breakpoint_continue", resumed)

    # The program gets its action and completes the call. Every notification it causes is
    # awaited before closing: resources/updated of breakpoint://call-history, then of
    # breakpoint://status (the server sends them in that order, and nothing after them at info).
    async def completed() -> str:
        # No second pause once the call returns (the global default would stop there).
        ic.tool_json(conn, await conn.call("breakpoint_set_after_behavior",
                                           {"function_name": "add", "behavior": "go"}))
        t_done = time.monotonic()

        def go() -> Any:
            poll = http.request("GET", f"/api/poll/{pause_id}")
            need(poll.get("status") == "ready", short(poll))
            r = ic.item(5, 9)
            return http.request("POST", "/api/call/complete", {
                "call_id": start["call_id"], "timestamp": time.time(), "status": "success",
                "process_pid": ic.PID, "process_start_time": ic.START_TIME,
                "result_cid": r["cid"], "result_client_ref": 9, "result_data": r["data"]})
        done = await anyio.to_thread.run_sync(go)
        need(done.get("status") == "ok", f"call/complete answered {short(done)}")
        u = await seen.wait("notifications/resources/updated",
                            lambda p: p.get("uri") == "breakpoint://call-history", since=t_done)
        need(u is not None, "no notifications/resources/updated for breakpoint://call-history within 5 s")
        t_history = next(t for m, p, t in seen.items if m == "notifications/resources/updated"
                         and p.get("uri") == "breakpoint://call-history" and t >= t_done)
        u = await seen.wait("notifications/resources/updated",
                            lambda p: p.get("uri") == "breakpoint://status", since=t_history)
        need(u is not None, "no notifications/resources/updated for breakpoint://status after the completion")
        return "call completed; resources/updated call-history and status awaited before closing"
    await step("program completes the call", completed)


async def run_connection(rep: ic.Report, binary: Path, tmp: Path, kind: str) -> None:
    server = Server(binary, tmp / f"home-{kind}")
    sdk_log = SdkLog()
    root = logging.getLogger()
    root.addHandler(sdk_log)
    root.setLevel(logging.DEBUG)
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "asyncio", "anyio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    seen = ic.Seen()
    closed_in: float | None = None
    run: Steps | None = None
    try:
        try:
            http = await anyio.to_thread.run_sync(server.start)
        except CheckFailed as e:
            rep.fail("server start (--mcp-sse --memory --port 0)", str(e))
            return
        url = http.base + ("/mcp/sse" if kind == "sse" else "/mcp")
        rep.info(f"server at {http.base}, client transport URL {url}")
        try:
            with anyio.fail_after(CONNECTION_BUDGET_S):
                async with anyio.create_task_group() as tg:
                    async with AsyncExitStack() as stack:
                        conn, how = await open_conn(kind, url, seen, stack, tg)
                        run = Steps(rep, conn, seen, http, stack)
                        await checks(run, kind, how)
                        t_close = time.monotonic()
                        run.current = "client close"
                    closed_in = time.monotonic() - t_close
                    tg.cancel_scope.cancel()
        except TimeoutError:
            where = run.current if run else Steps.current
            rep.fail("connection", f"did not finish within {CONNECTION_BUDGET_S} s: hung in {where}"
                     f"; server log: {server.tail()}")
        except Exception as e:  # noqa: BLE001 - an SDK complaint about the server is a finding
            rep.fail("connection", f"{ic.describe(e)}; server log: {server.tail()}")
            traceback.print_exc()

        if closed_in is not None:
            async def session_closed() -> str:
                sid = sdk_log.session_id(kind)
                if expected_era(kind) == "modern":
                    need(sid is None, f"a session id was handed out in the stateless revision: {sid}")
                    return f"stateless: no session id was handed out; closed in {closed_in:.2f} s"
                need(sid is not None, "the SDK logged no session id to check")
                if kind == "sse":
                    # Legacy SSE has no explicit close: the client drops the stream. The server
                    # notices only when a write to it fails, so probe a few times (each ping
                    # makes the server write a response to the stream).
                    target = f"{http.base}/mcp/messages?session_id={sid}"
                    ping = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
                    codes: list[int] = []
                    while len(codes) < 5 and 404 not in codes:
                        codes.append((await anyio.to_thread.run_sync(lambda: raw_post(target, ping, {})))[0])
                        await anyio.sleep(0.1)
                    rep.info(f"legacy SSE: POST {{ping}} to the closed session's endpoint after the client"
                             f" dropped its stream, every 0.1 s: HTTP {codes}")
                    need(all(c in (202, 404) for c in codes) and codes[-1] == 404,
                         f"POST {{ping}} to the dropped session every 0.1 s got HTTP {codes}"
                         " (expected 202s and then 404 once the server noticed the closed stream)")
                    return f"404 after {len(codes) - 1} more POSTs; closed in {closed_in:.2f} s"
                term = [w for w in sdk_log.warnings() if "termination" in w.lower()]
                need(not term, f"the SDK's DELETE was not accepted: {term}")
                status, body = await anyio.to_thread.run_sync(lambda: raw_post(
                    url, {"jsonrpc": "2.0", "id": 99, "method": "tools/list"},
                    {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid,
                     "MCP-Protocol-Version": "2025-11-25"}))
                need(status == 404, f"POST /mcp with the ended Mcp-Session-Id got HTTP {status}: {short(body, 200)}")
                return f"DELETE accepted, old session id then 404; closed in {closed_in:.2f} s"
            try:
                detail = await session_closed()
                rep.ok("client close ends the session", detail)
            except CheckFailed as e:
                rep.fail("client close ends the session", str(e))

        # A call paused, resumed and completed: a standard SDK must have logged no warning (mcp
        # 1.x logs "Failed to validate notification" for every method outside MCP).
        warned = sdk_log.warnings()
        rep.check("the SDK logged no warning during the session (pause, resume, completion)",
                  not warned, f"{len(warned)} warning(s): {short('; '.join(warned[:3]), 500)}")
        if not declares_custom(kind):
            # mcp 2.x drops an unknown method with a debug record: there must be none either.
            sent = re.compile(r"""method=['"]notifications/breakpoint/|['"]method['"]: ?['"]notifications/breakpoint/"""
                              r"""|dropped ['"]?notifications/breakpoint/|validate notification""")
            dropped = [m for _, _, m in sdk_log.records if sent.search(m)]
            rep.check("the SDK saw no notifications/breakpoint/* (not even a dropped one)", not dropped,
                      f"{len(dropped)} record(s): {short(dropped[0] if dropped else '', 300)}")
    finally:
        root.removeHandler(sdk_log)
        complaint = await anyio.to_thread.run_sync(server.stop)
        if complaint:
            rep.fail("server stop", complaint)


async def main_async(binary: Path, kinds: list[str]) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="cideldill-interop-http-"))
    total = [0, 0]
    try:
        for kind in kinds:
            rep = ic.Report(f"[mcp {ic.SDK_VERSION} {kind}] ")
            await run_connection(rep, binary, tmp, kind)
            total[0] += rep.passed
            total[1] += rep.failed
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"interop_http [mcp {ic.SDK_VERSION}]: {total[0]} passed, {total[1]} failed", flush=True)
    return 1 if total[1] else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(REPO / "target/debug/cideldill-server"))
    ap.add_argument("--transport", choices=KINDS, action="append",
                    help="only this client transport (repeatable; default both)")
    a = ap.parse_args()
    binary = Path(a.binary).resolve()
    if not binary.is_file():
        print(f"FAIL setup: no binary at {binary} (run cargo build)", flush=True)
        return 1
    default = list(KINDS) if ic.HAS_CLIENT else [k for k in KINDS if k != "streamable-http-legacy"]
    return anyio.run(main_async, binary, a.transport or default)


if __name__ == "__main__":
    sys.exit(main())
