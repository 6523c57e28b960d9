#!/usr/bin/env python3
"""Interop check of cideldill-server as an MCP *client* against real MCP servers.

What it does
    Drives `cideldill-server` connected to the reference MCP servers from npm
    (server-everything, server-filesystem, server-memory) and PyPI (mcp-server-time):
    a. An agent session (the official Python SDK's stdio client) with
       `<binary> --mcp --memory --port 0 --exit-on-stdin-close --mcp-clients-config <file>`
       listing five stdio servers: everything, fs, mem, time and everything_short (everything
       again with timeout_s 2). Checks external_list_servers (all connected),
       external_list_tools (one tool of each server; the tools server-everything registers after
       `initialized` and announces with notifications/tools/list_changed, found by listing it
       directly before and after `initialized`), external_call_tool on each server (echo with
       non-ASCII text, fs read_text_file / write_file, mem create_entities + read_graph, time
       get_current_time), a long-running operation past timeout_s -> call_timeout after about
       2 s and the server still usable, the REST API (POST /api/mcp-tools/call, call records
       with source mcp_client), breakpoint_inspect_object on a result_cid, and
       external_list_resources / external_read_resource.
    b. Process hygiene: the pids of the children (from GET /api/mcp-clients and from every
       process whose environment holds this session's CIDELDILL_HOME) must all be gone, none a
       zombie, within 10 s of the SDK closing the session.
    c. Kill and recover: `--mcp-client "everything:node $EV stdio" --mcp-backoff-base-s 0.2`
       (REST only); SIGKILL the child; the status must pass through `disconnected` back to
       `connected` with a new pid, and a call work after.
    d. HTTP transports: server-everything started with `sse` and with `streamableHttp` on free
       ports; POST /api/mcp-clients/connect as ev_sse (transport sse), ev_http (type http) and
       ev_auto (no transport, an /sse URL: Streamable HTTP is refused, so it must fall back to
       and report `sse`). Each: tools listed, echo, the late tools, a long-running operation
       past timeout_s -> 504 call_timeout, then echo again.
    f. Protocol eras: the era our client chose for every peer is reported (`protocol_era` in
       GET /api/mcp-clients): mcp-server-time (dual-era, answers `server/discover`) must be
       `modern`, the npm peers (TS SDK, -32601 or an HTTP error to `server/discover`) `legacy`.
       Then a Python SDK fixture server (written to the temporary directory) that refuses
       `initialize` with -32022, so it speaks only revision 2026-07-28, over stdio and over
       Streamable HTTP (POST /api/mcp-clients/connect as py_modern_stdio, py_modern_http):
       connected as `modern`, echo with non-ASCII text, a resource read, a call past timeout_s
       -> call_timeout then echo again, and a tool that asks for elicitation fails cleanly
       (an error, never a hang) with the server still usable; a tool answering
       `resultType: "input_required"` gives our `input_required` error and runs only once; a tool
       added while connected (`grow`, announced on our `subscriptions/listen` request) is listed
       and callable within 10 s.
    e. Latency (INFO lines only): 200 `everything/echo` calls through external_call_tool versus
       200 `echo` calls straight to `node $EV stdio`, same SDK: p50, p99, added latency, ratio.
    Every server gets CIDELDILL_HOME and CIDELDILL_PORT_FILE inside a fresh temporary directory
    (under $TMPDIR, which scripts/interop.sh points at its own sweepable directory), so
    ~/.cideldill is never touched; every process started here is stopped in `finally`.

What it needs
    Python 3.10+ with mcp 2.x (tested: 2.3.0), node, a built binary and the peers:
    server-everything / server-filesystem / server-memory 2026.8.31 (their dist/index.js) and
    mcp-server-time 2026.10.19 (its console script). scripts/interop.sh installs them all into
    .cache/interop and passes their paths.

How to call it
    <venv>/bin/python scripts/interop_upstream.py --binary target/debug/cideldill-server \\
        --everything EV.js --filesystem FS.js --memory MEM.js --time-bin .../mcp-server-time

Output
    One line per check, `PASS <name>` or `FAIL <name>: <why>` (and `INFO` lines for
    measurements); exit status 1 if any check failed, else 0.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import warnings
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Callable

import anyio
import mcp
from mcp import StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
import interop_client as ic  # noqa: E402 - shared helpers (Report, need, dump, ...)
from interop_client import CheckFailed, describe, need, short  # noqa: E402

if hasattr(mcp, "MCPDeprecationWarning"):
    warnings.filterwarnings("ignore", category=mcp.MCPDeprecationWarning)

REPO = Path(__file__).resolve().parent.parent
SDK_VERSION = importlib.metadata.version("mcp")
LATENCY_CALLS = 200
LONG_OP = "trigger-long-running-operation"
SHORT_TIMEOUT_S = 2

rep = ic.Report("[upstream] ")


# ------------------------------------------------------------------------------------------
# Small helpers: HTTP (stdlib), processes, ports


class Rest:
    """Our server's REST API at a port read from its port file."""

    def __init__(self, port_file: Path) -> None:
        self.port_file = port_file
        self.base = ""

    def wait_port(self, proc: subprocess.Popen | None = None, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                text = self.port_file.read_text().strip()
                if text:
                    self.base = f"http://127.0.0.1:{int(text)}"
                    return self.base
            except (OSError, ValueError):
                pass
            if proc is not None and proc.poll() is not None:
                raise CheckFailed(f"server exited with status {proc.returncode} before writing its port")
            time.sleep(0.05)
        raise CheckFailed(f"no port file {self.port_file} after {timeout} s")

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        """(HTTP status, JSON body); HTTP errors are answers too, not exceptions."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw or b"null")
            except json.JSONDecodeError:
                return e.code, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        status, data = self.request(method, path, body, timeout)
        need(status == 200, f"{method} {path} -> HTTP {status}: {short(data)}")
        return data

    def clients(self) -> dict:
        return self.ok("GET", "/api/mcp-clients")["clients"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CheckFailed(f"peer exited with status {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise CheckFailed(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def stop(proc: subprocess.Popen | None, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaps."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def proc_state(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a live or zombie process, None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:].split()
    return rest[0], int(rest[19])


def procs_with_env(entry: str) -> list[int]:
    """Pids whose environment holds exactly `entry` (e.g. CIDELDILL_HOME=/tmp/x)."""
    want = entry.encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if want in env.split(b"\0"):
            out.append(int(d.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def percentile(samples: list[float], q: float) -> float:
    s = sorted(samples)
    k = max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))
    return s[k]


async def timed(n: int, fn: Callable[[], Any]) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def step(name: str, fn: Callable[[], Any]) -> Any:
    """Runs a synchronous check: PASS with its detail string, or FAIL with the reason."""
    try:
        detail = fn()
        rep.ok(name, detail if isinstance(detail, str) else "")
        return detail
    except CheckFailed as e:
        rep.fail(name, str(e))
    except Exception as e:  # noqa: BLE001
        rep.fail(name, describe(e))
    return None


async def astep(name: str, fn: Callable[[], Any]) -> Any:
    try:
        detail = await fn()
        rep.ok(name, detail if isinstance(detail, str) else "")
        return detail
    except CheckFailed as e:
        rep.fail(name, str(e))
    except Exception as e:  # noqa: BLE001
        rep.fail(name, describe(e))
    return None


def text_of(content: list) -> str:
    return "".join(c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text")


# ------------------------------------------------------------------------------------------
# server-everything seen directly


def late_tools_of_everything(node: str, ev: str, env: dict, timeout: float = 10.0) -> tuple[set, set, bool]:
    """Lists server-everything's tools over raw stdio JSON-RPC as a client that declares no
    capabilities, once before `notifications/initialized` and once after: returns (tools
    before, tools after, whether notifications/tools/list_changed arrived in between)."""
    proc = subprocess.Popen([node, ev, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    buf = b""
    deadline = time.monotonic() + timeout

    def send(msg: dict) -> None:
        assert proc.stdin
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()

    def recv() -> dict:
        nonlocal buf
        assert proc.stdout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            need(left > 0, f"no answer from node {ev} stdio within {timeout} s")
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                need(bool(chunk), "server-everything closed stdout")
                buf += chunk
        line, buf = buf.split(b"\n", 1)
        return json.loads(line)

    def answer(id_: int, seen: list[str]) -> dict:
        while True:
            m = recv()
            if m.get("id") == id_:
                need("result" in m, f"request {id_}: {short(m)}")
                return m["result"]
            if "method" in m:
                seen.append(m["method"])

    try:
        notes: list[str] = []
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "interop-upstream-probe", "version": "0"}}})
        answer(1, notes)
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        before = {t["name"] for t in answer(2, notes)["tools"]}
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        time.sleep(0.5)
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        after = {t["name"] for t in answer(3, notes)["tools"]}
        return before, after, "notifications/tools/list_changed" in notes
    finally:
        stop(proc, 2)


async def direct_everything(node: str, ev: str, env: dict) -> tuple[set[str], list[float]]:
    """The plain SDK client (no capabilities) straight to `node $EV stdio`: its tool list and
    LATENCY_CALLS timed echo calls."""
    params = StdioServerParameters(command=node, args=[ev, "stdio"], env=env)
    async with AsyncExitStack() as stack:
        # No fail_after around entering: the client's task groups outlive such a scope;
        # read_timeout_seconds bounds the handshake instead.
        client = mcp.Client(params, mode="legacy", read_timeout_seconds=30)
        await stack.enter_async_context(client)
        with anyio.fail_after(10):
            names = {t.name for t in (await client.list_tools()).tools}
        with anyio.fail_after(30):
            for _ in range(20):  # warm-up
                await client.call_tool("echo", {"message": "warm"})
        with anyio.fail_after(60):
            ms = await timed(LATENCY_CALLS, lambda: client.call_tool("echo", {"message": "latency"}))
        return names, ms


# ------------------------------------------------------------------------------------------
# a, b, e: the agent session


class Agent:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def tool(self, name: str, args: dict | None = None, timeout: float = 30,
                   expect_error: bool = False) -> Any:
        with anyio.fail_after(timeout):
            res = ic.dump(await self.client.call_tool(name, args or {}))
        content = res.get("content") or []
        need(len(content) == 1 and content[0].get("type") == "text", f"{name}: content {short(content)}")
        data = json.loads(content[0]["text"])
        need(bool(res.get("isError")) == expect_error,
             f"{name}: isError={res.get('isError')} (expected {expect_error}): {short(data, 500)}")
        return data

    async def external(self, tool: str, arguments: dict, timeout: float = 30) -> dict:
        """external_call_tool that must succeed with is_error false."""
        d = await self.tool("external_call_tool", {"tool": tool, "arguments": arguments}, timeout)
        need(d.get("is_error") is False, f"{tool}: is_error {d.get('is_error')}: {short(d, 400)}")
        need(isinstance(d.get("result_cid"), str) and d["result_cid"], f"{tool}: no result_cid: {short(d)}")
        return d


async def agent_session(a: argparse.Namespace, tmp: Path, late: set[str], direct_names: set[str],
                        direct_ms: list[float] | None) -> None:
    home = tmp / "home-agent"
    home.mkdir()
    fsdir = Path(os.path.realpath(tmp / "fs"))
    fsdir.mkdir()
    port_file = home / "port"
    node = a.node
    config = {"mcpServers": {
        "everything": {"command": node, "args": [a.everything, "stdio"]},
        "fs": {"command": node, "args": [a.filesystem, str(fsdir)]},
        "mem": {"command": node, "args": [a.memory], "env": {"MEMORY_FILE_PATH": str(tmp / "m.jsonl")}},
        "time": {"command": a.time_bin, "args": ["--local-timezone=UTC"]},
        "everything_short": {"command": node, "args": [a.everything, "stdio"], "timeout_s": SHORT_TIMEOUT_S},
    }}
    cfg = tmp / "clients.json"
    cfg.write_text(json.dumps(config, indent=1))
    params = StdioServerParameters(
        command=str(a.binary),
        args=["--mcp", "--memory", "--port", "0", "--exit-on-stdin-close", "--mcp-clients-config", str(cfg)],
        env={"CIDELDILL_HOME": str(home), "CIDELDILL_PORT_FILE": str(port_file),
             "RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn"), "PATH": os.environ.get("PATH", "")})
    rest = Rest(port_file)
    tracked: dict[int, tuple[int, str]] = {}  # pid -> (start time, command line)
    t_close = None
    try:
        async with AsyncExitStack() as stack:
            client = mcp.Client(params, mode="legacy", read_timeout_seconds=60)
            await stack.enter_async_context(client)  # bounded by read_timeout_seconds
            ag = Agent(client)
            await anyio.to_thread.run_sync(rest.wait_port)
            await checks_a(ag, rest, fsdir, late, direct_names)
            await latency(ag, direct_ms)
            tracked = await anyio.to_thread.run_sync(children_of, rest, home)
            ours = [pid for pid in tracked if ppid(pid) == os.getpid()]
            watcher = ExitWatch(ours[0]) if len(ours) == 1 else None
            t_close = time.monotonic()
        # b: the session is closed; the SDK has reaped our server.
        closed_in = time.monotonic() - t_close
        if watcher:
            watcher.join(1)
            if watcher.exited_at is None:
                rep.info("b. our server's exit was not observed")
            else:
                after = watcher.exited_at - t_close
                grace = getattr(sys.modules.get("mcp.client.stdio"), "PROCESS_TERMINATION_TIMEOUT", 2.0)
                rep.info(f"b. our server exited {after:.2f} s after the SDK began closing"
                         + ("" if after < grace else
                            f" (not within the SDK's {grace:g} s grace: the SDK then terminates its process "
                            "group; an upstream child still busy, e.g. server-everything with a long-running "
                            "operation pending, gets the server's own 2 s grace before SIGTERM)"))
        await anyio.to_thread.run_sync(lambda: step("b. no child left and no zombie within 10 s of closing the session",
                                                    lambda: no_survivors(tracked, closed_in)))
    except Exception as e:  # noqa: BLE001
        rep.fail("a. agent session", describe(e))
    finally:
        # Whatever happened: nothing of this session may outlive it.
        for pid in procs_with_env(f"CIDELDILL_HOME={home}"):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


async def checks_a(ag: Agent, rest: Rest, fsdir: Path, late: set[str], direct_names: set[str]) -> None:
    names = ("everything", "fs", "mem", "time", "everything_short")

    async def servers() -> str:
        d = await ag.tool("external_list_servers", timeout=40)
        s = d["servers"]
        bad = {n: (s.get(n) or {}).get("status") for n in names if (s.get(n) or {}).get("status") != "connected"}
        need(not bad, f"not connected: {bad}; errors: { {n: (s.get(n) or {}).get('error') for n in bad} }")
        return ", ".join(f"{n} {s[n]['tool_count']} tools" for n in names)
    await astep("a. external_list_servers: all five connected", servers)

    async def eras() -> str:
        s = (await ag.tool("external_list_servers"))["servers"]
        got = {n: f"{(s.get(n) or {}).get('protocol_era')} {(s.get(n) or {}).get('protocol_version')}" for n in names}
        want = {"everything": "legacy", "fs": "legacy", "mem": "legacy", "time": "modern", "everything_short": "legacy"}
        bad = {n: got[n] for n in names if (s.get(n) or {}).get("protocol_era") != want[n]}
        need(not bad, f"unexpected era: {bad} (expected {want})")
        return "; ".join(f"{n} {got[n]}" for n in names)
    await astep("f. era chosen per stdio peer (time modern via server/discover, the TS peers legacy)", eras)

    catalog: dict[str, dict] = {}

    async def tools() -> str:
        d = await ag.tool("external_list_tools")
        catalog.update({t["name"]: t for t in d["tools"]})
        want = {"everything/echo", "fs/read_text_file", "mem/create_entities", "time/get_current_time"}
        need(want <= set(catalog), f"missing {sorted(want - set(catalog))}")
        for t in d["tools"]:
            need(t["name"] == f"{t['server']}/{t['original_name']}", f"catalog entry {short(t)}")
        return f"{len(catalog)} tools"
    await astep("a. external_list_tools has everything/echo, fs/read_text_file, mem/create_entities, time/get_current_time", tools)

    async def late_tools() -> str:
        need(bool(late), "the direct probe found no tool registered after initialized")
        deadline = time.monotonic() + 10
        while True:
            d = await ag.tool("external_list_tools", {"server": "everything"})
            ours = {t["original_name"] for t in d["tools"]}
            if late <= ours or time.monotonic() > deadline:
                break
            await anyio.sleep(0.2)
        need(late <= ours, f"missing {sorted(late - ours)} after 10 s")
        need(ours == direct_names, f"differs from a plain SDK client's list: only ours {sorted(ours - direct_names)}, "
                                   f"only direct {sorted(direct_names - ours)}")
        return f"{sorted(late)} listed; same {len(ours)} tools as a plain SDK client"
    await astep("a. tools announced by notifications/tools/list_changed are listed", late_tools)

    echo: dict = {}

    async def echo_call() -> str:
        d = await ag.external("everything/echo", {"message": "héllo"})
        text = text_of(d["content"])
        need("héllo" in text, f"text {text!r}")
        need(d.get("server") == "everything" and d.get("truncated") is False, short(d))
        echo.update(d)
        return text
    await astep("a. external_call_tool everything/echo (non-ASCII)", echo_call)

    async def fs_read() -> str:
        path = fsdir / "notes.txt"
        body = "first line\nsecond line, ünïcode\n"
        path.write_text(body, encoding="utf-8")
        d = await ag.external("fs/read_text_file", {"path": str(path)})
        text = text_of(d["content"])
        need(text == body, f"read {text!r}, file holds {body!r}")
        return f"{len(text)} chars"
    await astep("a. fs/read_text_file returns the file's text", fs_read)

    async def fs_write() -> str:
        path = fsdir / "written.txt"
        body = "written through cideldill-server\n"
        await ag.external("fs/write_file", {"path": str(path), "content": body})
        need(path.read_text(encoding="utf-8") == body, f"file holds {path.read_text()!r}")
        d = await ag.external("fs/read_text_file", {"path": str(path)})
        need(text_of(d["content"]) == body, f"read back {text_of(d['content'])!r}")
        return "on disk and read back"
    await astep("a. fs/write_file then read back", fs_write)

    async def mem() -> str:
        entity = {"name": "cideldill_interop", "entityType": "project", "observations": ["breakpoint server"]}
        await ag.external("mem/create_entities", {"entities": [entity]})
        d = await ag.external("mem/read_graph", {})
        graph = d.get("structured_content") or json.loads(text_of(d["content"]))
        names = [e.get("name") for e in graph.get("entities", [])]
        need("cideldill_interop" in names, f"graph {short(graph)}")
        return f"{len(names)} entities"
    await astep("a. mem/create_entities then mem/read_graph contains it", mem)

    async def get_time() -> str:
        d = await ag.external("time/get_current_time", {"timezone": "UTC"})
        found = d.get("structured_content")
        if not isinstance(found, dict) or "timezone" not in found:
            found = json.loads(text_of(d["content"]))
        need(found.get("timezone") == "UTC", f"{short(d)}")
        return f"{found.get('datetime')} ({'structured_content' if d.get('structured_content') else 'text'})"
    await astep("a. time/get_current_time {timezone: UTC}", get_time)

    async def long_op() -> str:
        schema = (catalog.get(f"everything_short/{LONG_OP}") or {}).get("input_schema") or {}
        props = set((schema.get("properties") or {}))
        need({"duration", "steps"} <= props, f"{LONG_OP} input_schema has {sorted(props)}")
        t0 = time.monotonic()
        d = await ag.tool("external_call_tool", {"tool": f"everything_short/{LONG_OP}",
                                                 "arguments": {"duration": 10, "steps": 5}},
                          timeout=20, expect_error=True)
        took = time.monotonic() - t0
        need(d.get("error") == "call_timeout", f"error {short(d)}")
        need(SHORT_TIMEOUT_S - 0.3 <= took <= SHORT_TIMEOUT_S + 3, f"took {took:.1f} s (timeout_s {SHORT_TIMEOUT_S})")
        after = await ag.external("everything_short/echo", {"message": "still there"})
        need("still there" in text_of(after["content"]), short(after))
        return f"call_timeout after {took:.2f} s; everything_short/echo works after"
    await astep(f"a. everything_short/{LONG_OP} past timeout_s {SHORT_TIMEOUT_S} -> call_timeout, then echo", long_op)

    def rest_checks() -> str:
        d = rest.ok("POST", "/api/mcp-tools/call", {"tool": "everything/echo", "arguments": {"message": "over REST"}})
        need("over REST" in text_of(d["result"].get("content", [])), short(d))
        need(d.get("server") == "everything" and d.get("result_cid"), short(d))
        recs = rest.ok("GET", "/api/call-records?function=everything/echo")
        rows = next((v for v in recs.values() if isinstance(v, list)), []) if isinstance(recs, dict) else recs
        need(rows, f"no records: {short(recs)}")
        need(all(r.get("source") == "mcp_client" for r in rows), f"sources {[r.get('source') for r in rows]}")
        need(any(r.get("call_id") == d["call_id"] for r in rows), f"call {d['call_id']} not among {len(rows)} records")
        return f"{len(rows)} records, source mcp_client"
    await anyio.to_thread.run_sync(lambda: step(
        "a. REST POST /api/mcp-tools/call everything/echo + /api/call-records source mcp_client", rest_checks))

    async def inspect() -> str:
        need(bool(echo.get("result_cid")), "no result_cid from the echo call")
        d = await ag.tool("breakpoint_inspect_object", {"cid": echo["result_cid"]})
        need("héllo" in json.dumps(d, ensure_ascii=False), f"{short(d, 400)}")
        return f"type {d.get('type')}"
    await astep("a. breakpoint_inspect_object on the echo result_cid", inspect)

    async def resources() -> str:
        d = await ag.tool("external_list_resources", {"server": "everything"})
        res = d["resources"]
        need(res, f"no resources: {short(d)}")
        uri = res[0]["uri"]
        r = await ag.tool("external_read_resource", {"server": "everything", "uri": uri})
        need(r.get("content"), f"no content for {uri}: {short(r)}")
        return f"{len(res)} resources; read {uri} ({len(str(r['content']))} chars)"
    await astep("a. external_list_resources everything + external_read_resource", resources)


async def latency(ag: Agent, direct_ms: list[float] | None) -> None:
    try:
        for _ in range(20):  # warm-up
            await ag.external("everything/echo", {"message": "warm"})
        with anyio.fail_after(120):
            ours = await timed(LATENCY_CALLS, lambda: ag.external("everything/echo", {"message": "latency"}))
    except Exception as e:  # noqa: BLE001
        rep.fail("e. latency through external_call_tool", describe(e))
        return
    o50, o99 = percentile(ours, 50), percentile(ours, 99)
    rep.info(f"e. latency, {LATENCY_CALLS} calls over stdio with mcp {SDK_VERSION}: through cideldill "
             f"(external_call_tool everything/echo) p50 {o50:.2f} ms p99 {o99:.2f} ms")
    if not direct_ms:
        rep.info("e. latency: no direct measurement to compare with (see the FAIL above)")
        return
    d50, d99 = percentile(direct_ms, 50), percentile(direct_ms, 99)
    rep.info(f"e. latency, direct (echo to node server-everything stdio): p50 {d50:.2f} ms p99 {d99:.2f} ms")
    rep.info(f"e. latency added by cideldill: p50 +{o50 - d50:.2f} ms, p99 +{o99 - d99:.2f} ms; "
             f"ratio p50 {o50 / d50:.1f}x, p99 {o99 / d99:.1f}x")


def ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2:].split()[1])


class ExitWatch(threading.Thread):
    """Notes when a process becomes a zombie or disappears (polls every 5 ms, at most 15 s)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.start_time = (proc_state(pid) or ("", 0))[1]
        self.exited_at: float | None = None
        self.start()

    def run(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            st = proc_state(self.pid)
            if st is None or st[0] == "Z" or st[1] != self.start_time:
                self.exited_at = time.monotonic()
                return
            time.sleep(0.005)


def children_of(rest: Rest, home: Path) -> dict[int, tuple[int, str]]:
    """Before closing: every process of the session except our server's parent, the SDK:
    the stdio children named by /api/mcp-clients plus whatever carries our CIDELDILL_HOME."""
    pids: set[int] = set()
    try:
        for c in rest.clients().values():
            if isinstance(c.get("pid"), int):
                pids.add(c["pid"])
    except Exception as e:  # noqa: BLE001
        rep.info(f"b. GET /api/mcp-clients failed before closing: {describe(e)}")
    from_api = len(pids)
    pids.update(procs_with_env(f"CIDELDILL_HOME={home}"))
    out = {}
    for pid in pids:
        st = proc_state(pid)
        if st:
            out[pid] = (st[1], cmdline(pid))
    rep.info(f"b. before closing: {from_api} child pids from /api/mcp-clients, {len(out)} processes in all "
             "(with our server)")
    return out


def no_survivors(tracked: dict[int, tuple[int, str]], closed_in: float) -> str:
    need(len(tracked) >= 2, f"expected our server and its children, tracked {len(tracked)}: "
                            f"{[c for _, c in tracked.values()]}")
    deadline = time.monotonic() + 10
    while True:
        left = {}
        for pid, (start, cmd) in tracked.items():
            st = proc_state(pid)
            if st and st[1] == start:
                left[pid] = (st[0], cmd)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if left:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    zombies = {p: c for p, (s, c) in left.items() if s == "Z"}
    need(not zombies, f"zombies: {zombies}")
    need(not left, f"still running 10 s after closing: {left}")
    return f"{len(tracked)} processes gone; the SDK's close took {closed_in:.1f} s"


# ------------------------------------------------------------------------------------------
# c: kill and recover


def kill_and_recover(a: argparse.Namespace, tmp: Path) -> None:
    home = tmp / "home-kill"
    home.mkdir()
    env = {**os.environ, "CIDELDILL_HOME": str(home), "CIDELDILL_PORT_FILE": str(home / "port"),
           "RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn")}
    log = open(home / "server.log", "w")
    server = subprocess.Popen([str(a.binary), "--memory", "--port", "0", "--mcp-backoff-base-s", "0.2",
                               "--mcp-client", f"everything:{a.node} {a.everything} stdio"],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    rest = Rest(home / "port")
    try:
        def run() -> str:
            rest.wait_port(server)
            deadline = time.monotonic() + 20
            while True:
                c = rest.clients().get("everything") or {}
                if c.get("status") == "connected" and isinstance(c.get("pid"), int):
                    break
                need(time.monotonic() < deadline, f"not connected after 20 s: {short(c)}")
                time.sleep(0.05)
            old = c["pid"]
            old_start = (proc_state(old) or ("", 0))[1]
            os.kill(old, signal.SIGKILL)
            t0 = time.monotonic()
            seen: list[str] = []
            deadline = t0 + 20
            while True:
                c = rest.clients().get("everything") or {}
                st = c.get("status")
                if not seen or seen[-1] != st:
                    seen.append(st)
                if st == "connected" and "disconnected" in seen and c.get("pid") not in (None, old):
                    break
                need(time.monotonic() < deadline, f"statuses {seen} in 20 s; last {short(c)}")
                time.sleep(0.02)
            took = time.monotonic() - t0
            new = c["pid"]
            d = rest.ok("POST", "/api/mcp-tools/call", {"tool": "everything/echo", "arguments": {"message": "again"}})
            need("again" in text_of(d["result"].get("content", [])), short(d))
            st = proc_state(old)
            need(not (st and st[1] == old_start), f"killed child {old} still in the process table ({st and st[0]})")
            return f"statuses {' -> '.join(map(str, seen))} in {took:.2f} s; pid {old} -> {new}; echo works; old pid reaped"
        if step("c. SIGKILL of the stdio child: disconnected, reconnected with a new pid, call works", run) is None:
            return

        def sigterm() -> str:
            child = rest.clients()["everything"]["pid"]
            start = (proc_state(child) or ("", 0))[1]
            t0 = time.monotonic()
            server.terminate()
            try:
                rc = server.wait(10)
            except subprocess.TimeoutExpired:
                raise CheckFailed("our server still running 10 s after SIGTERM")
            took = time.monotonic() - t0
            st = proc_state(child)
            need(not (st and st[1] == start), f"child {child} survived our server ({st and st[0]})")
            return f"server exited with status {rc} in {took:.2f} s; child {child} gone"
        step("c. SIGTERM to our server stops its stdio child", sigterm)
    finally:
        stop(server)
        log.close()


# ------------------------------------------------------------------------------------------
# d: HTTP transports


def http_transports(a: argparse.Namespace, tmp: Path, late: set[str]) -> None:
    home = tmp / "home-http"
    home.mkdir()
    peers_home = tmp / "home-http-peers"  # only so scripts/interop.sh's sweep would find them
    peers_home.mkdir()
    env = {**os.environ, "CIDELDILL_HOME": str(home), "CIDELDILL_PORT_FILE": str(home / "port"),
           "RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn")}
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        log = open(home / "server.log", "w")
        logs.append(log)
        # --mcp-clients with no mcp_clients.json in CIDELDILL_HOME: a manager with no servers.
        server = subprocess.Popen([str(a.binary), "--memory", "--port", "0", "--mcp-clients"],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        procs.append(server)
        ports = {}
        for mode in ("sse", "streamableHttp"):
            port = free_port()
            plog = open(tmp / f"everything-{mode}.log", "w")
            logs.append(plog)
            p = subprocess.Popen([a.node, a.everything, mode], stdin=subprocess.DEVNULL, stdout=plog, stderr=plog,
                                 env={**os.environ, "PORT": str(port), "CIDELDILL_HOME": str(peers_home)})
            procs.append(p)
            ports[mode] = (port, p)
        rest = Rest(home / "port")

        def start() -> str:
            rest.wait_port(server)
            for mode, (port, p) in ports.items():
                wait_listening(port, p)
            return f"sse on {ports['sse'][0]}, streamableHttp on {ports['streamableHttp'][0]}"
        if step("d. server-everything sse + streamableHttp listening, our server up", start) is None:
            return
        sse_url = f"http://127.0.0.1:{ports['sse'][0]}/sse"
        http_url = f"http://127.0.0.1:{ports['streamableHttp'][0]}/mcp"
        for name, body, want in (
            ("ev_sse", {"url": sse_url, "transport": "sse"}, "sse"),
            ("ev_http", {"url": http_url, "type": "http"}, None),
            ("ev_auto", {"url": sse_url}, "sse"),
        ):
            http_checks(rest, name, {"name": name, "timeout_s": SHORT_TIMEOUT_S, **body}, want, late)
        def legacy_eras() -> str:
            c = rest.clients()
            got = {n: (c.get(n) or {}).get("protocol_era") for n in ("ev_sse", "ev_http", "ev_auto")}
            need(all(e == "legacy" for e in got.values()), f"eras {got}")
            return ", ".join(f"{n} {e}" for n, e in got.items())
        step("f. era chosen per HTTP peer (server-everything: legacy)", legacy_eras)
        for name in ("ev_sse", "ev_http", "ev_auto"):
            rest.request("POST", f"/api/mcp-clients/{name}/disconnect", {})
    except Exception as e:  # noqa: BLE001
        rep.fail("d. HTTP transports", describe(e))
    finally:
        for p in procs:
            stop(p)
        for f in logs:
            f.close()
        if rep.failed:
            for f in [home / "server.log", tmp / "everything-sse.log", tmp / "everything-streamableHttp.log"]:
                try:
                    tail = f.read_text(errors="replace").splitlines()[-8:]
                    print(f"---- {f.name} (last lines) ----\n" + "\n".join(tail), file=sys.stderr, flush=True)
                except OSError:
                    pass


def http_checks(rest: Rest, name: str, body: dict, want_transport: str | None, late: set[str]) -> None:
    shown = {k: v for k, v in body.items() if k != "timeout_s"}

    def connect() -> str:
        status, d = rest.request("POST", "/api/mcp-clients/connect", body, timeout=60)
        need(status == 200 and isinstance(d, dict) and d.get("status") == "ok", f"HTTP {status}: {short(d, 500)}")
        c = rest.clients().get(name) or {}
        need(c.get("status") == "connected", f"status {short(c)}")
        if want_transport:
            need(c.get("transport") == want_transport, f"transport {c.get('transport')!r}, expected {want_transport!r}")
        else:
            need(c.get("transport") not in (None, "sse", "stdio"), f"transport {c.get('transport')!r}")
        tools = [t if isinstance(t, str) else t.get("name") for t in d.get("tools", [])]
        need(any(str(t).endswith("echo") for t in tools), f"tools {tools}")
        return (f"transport {c.get('transport')}, {len(tools)} tools, protocol {c.get('protocol_version')}, "
                f"era {c.get('protocol_era')}")
    if step(f"d. {name}: connect {json.dumps(shown)}", connect) is None:
        return

    def echo() -> str:
        d = rest.ok("POST", "/api/mcp-tools/call", {"tool": f"{name}/echo", "arguments": {"message": f"via {name}"}})
        need(f"via {name}" in text_of(d["result"].get("content", [])), short(d))
        return text_of(d["result"]["content"])
    step(f"d. {name}: echo", echo)

    def late_tools() -> str:
        need(bool(late), "the direct probe found no tool registered after initialized")
        deadline = time.monotonic() + 10
        while True:
            ours = {t["original_name"] for t in rest.ok("GET", f"/api/mcp-tools?server={name}")["tools"]}
            if late <= ours or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        need(late <= ours, f"missing {sorted(late - ours)} after 10 s (listed {sorted(ours)})")
        return f"{sorted(late)} listed"
    step(f"d. {name}: tools announced by notifications/tools/list_changed are listed", late_tools)

    def long_op() -> str:
        t0 = time.monotonic()
        status, d = rest.request("POST", "/api/mcp-tools/call",
                                 {"tool": f"{name}/{LONG_OP}", "arguments": {"duration": 10, "steps": 5}}, timeout=20)
        took = time.monotonic() - t0
        need(status == 504 and isinstance(d, dict) and d.get("error") == "call_timeout", f"HTTP {status}: {short(d)}")
        need(took <= SHORT_TIMEOUT_S + 3, f"took {took:.1f} s")
        d = rest.ok("POST", "/api/mcp-tools/call", {"tool": f"{name}/echo", "arguments": {"message": "after"}})
        need("after" in text_of(d["result"].get("content", [])), short(d))
        c = rest.clients().get(name) or {}
        need(c.get("status") == "connected", f"status after: {short(c)}")
        return f"504 call_timeout after {took:.2f} s; echo works after"
    step(f"d. {name}: {LONG_OP} past timeout_s {SHORT_TIMEOUT_S} -> call_timeout, then echo", long_op)


# ------------------------------------------------------------------------------------------
# f: a modern-only Python SDK server

MODERN_FIXTURE = r'''
"""A Python SDK 2.x server that refuses initialize: it speaks only revision 2026-07-28."""
import sys
import time

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from pydantic import BaseModel

CALLS = {}


async def refuse_initialize(ctx, call_next):
    if ctx.method == "initialize":
        raise MCPError(code=-32022, message="this server speaks only 2026-07-28",
                       data={"supported": ["2026-07-28"], "requested": (ctx.params or {}).get("protocolVersion")})
    return await call_next(ctx)


server = MCPServer("py-modern", instructions="modern only", middleware=[refuse_initialize])


@server.tool()
def echo(text: str) -> str:
    """Returns its text."""
    return f"echo: {text}"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    import anyio
    await anyio.sleep(seconds)
    return "slept"


class Name(BaseModel):
    name: str


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks the client for a name (elicitation)."""
    r = await ctx.elicit("your name?", Name)
    return f"got {r}"


@server.tool()
def ask_mrtr() -> InputRequiredResult:
    """Answers resultType input_required (asks for elicitation) on every call; counts its calls."""
    CALLS["ask_mrtr"] = CALLS.get("ask_mrtr", 0) + 1
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    return InputRequiredResult(
        input_requests={"name": ElicitRequest(params=ElicitRequestFormParams(message="your name?",
                                                                             requested_schema=schema))},
        request_state="st-1")


@server.tool()
def calls() -> str:
    """How often ask_mrtr ran."""
    return str(CALLS.get("ask_mrtr", 0))


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and announces it on the subscriptions/listen streams."""
    def grown() -> str:
        """Added by grow."""
        return "grown ok"
    server.add_tool(grown)
    await ctx.notify_tools_changed()
    return "grew"


@server.resource("fixture://hello")
def hello() -> str:
    return "hello from py-modern"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
'''


def modern_peers(a: argparse.Namespace, tmp: Path) -> None:
    home = tmp / "home-modern"
    home.mkdir()
    script = tmp / "py_modern.py"
    script.write_text(MODERN_FIXTURE)
    env = {**os.environ, "CIDELDILL_HOME": str(home), "CIDELDILL_PORT_FILE": str(home / "port"),
           "RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn")}
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        log = open(home / "server.log", "w")
        logs.append(log)
        server = subprocess.Popen([str(a.binary), "--memory", "--port", "0", "--mcp-clients"],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        procs.append(server)
        port = free_port()
        plog = open(tmp / "py-modern-http.log", "w")
        logs.append(plog)
        peer = subprocess.Popen([sys.executable, str(script), "http", str(port)], stdin=subprocess.DEVNULL,
                                stdout=plog, stderr=plog, env={**os.environ, "CIDELDILL_HOME": str(home)})
        procs.append(peer)
        rest = Rest(home / "port")

        def start() -> str:
            rest.wait_port(server)
            wait_listening(port, peer)
            return f"py_modern streamable-http on {port}"
        if step("f. Python SDK modern-only fixture listening, our server up", start) is None:
            return
        for name, body in (
            ("py_modern_stdio", {"command": sys.executable, "args": [str(script), "stdio"]}),
            ("py_modern_http", {"url": f"http://127.0.0.1:{port}/mcp", "type": "http"}),
        ):
            modern_checks(rest, name, {"name": name, "timeout_s": SHORT_TIMEOUT_S, **body})
    except Exception as e:  # noqa: BLE001
        rep.fail("f. modern-only peers", describe(e))
    finally:
        for p in procs:
            stop(p)
        for f in logs:
            f.close()
        if rep.failed:
            for f in [home / "server.log", tmp / "py-modern-http.log"]:
                try:
                    tail = f.read_text(errors="replace").splitlines()[-8:]
                    print(f"---- {f.name} (last lines) ----\n" + "\n".join(tail), file=sys.stderr, flush=True)
                except OSError:
                    pass


def modern_checks(rest: Rest, name: str, body: dict) -> None:
    def connect() -> str:
        status, d = rest.request("POST", "/api/mcp-clients/connect", body, timeout=60)
        need(status == 200 and isinstance(d, dict) and d.get("status") == "ok", f"HTTP {status}: {short(d, 500)}")
        c = rest.clients().get(name) or {}
        need(c.get("status") == "connected", f"status {short(c)}")
        need(c.get("protocol_era") == "modern" and c.get("protocol_version") == "2026-07-28",
             f"era {c.get('protocol_era')!r}, protocol {c.get('protocol_version')!r}")
        return f"transport {c.get('transport')}, era {c['protocol_era']}, protocol {c['protocol_version']}, {c.get('tool_count')} tools"
    if step(f"f. {name}: connects in the modern era (initialize refused)", connect) is None:
        return

    def echo(word: str = "grüße ✓") -> str:
        d = rest.ok("POST", "/api/mcp-tools/call", {"tool": f"{name}/echo", "arguments": {"text": word}})
        got = text_of(d["result"].get("content", []))
        need(got == f"echo: {word}", short(d))
        return got
    step(f"f. {name}: echo with non-ASCII text", echo)

    def resource() -> str:
        d = rest.ok("POST", "/api/mcp-resources/read", {"server": name, "uri": "fixture://hello"})
        need(d.get("content") == "hello from py-modern", short(d))
        return d["content"]
    step(f"f. {name}: resources/read", resource)

    def timeout() -> str:
        t0 = time.monotonic()
        status, d = rest.request("POST", "/api/mcp-tools/call",
                                 {"tool": f"{name}/slow", "arguments": {"seconds": 10}}, timeout=20)
        took = time.monotonic() - t0
        need(status == 504 and isinstance(d, dict) and d.get("error") == "call_timeout", f"HTTP {status}: {short(d)}")
        echo("after")
        return f"504 call_timeout after {took:.2f} s; echo works after"
    step(f"f. {name}: slow past timeout_s {SHORT_TIMEOUT_S} -> call_timeout, then echo", timeout)

    def ask() -> str:
        t0 = time.monotonic()
        status, d = rest.request("POST", "/api/mcp-tools/call", {"tool": f"{name}/ask", "arguments": {}}, timeout=20)
        took = time.monotonic() - t0
        need(isinstance(d, dict), f"HTTP {status}: {short(d)}")
        err = d.get("error")
        result = d.get("result") if status == 200 else None
        need(err in ("input_required", "call_failed") or (result or {}).get("isError") is True,
             f"HTTP {status}: {short(d, 400)}")
        need(took < SHORT_TIMEOUT_S, f"took {took:.1f} s (not a clean refusal)")
        echo("after ask")
        what = err or "isError result"
        return f"HTTP {status} {what} in {took:.2f} s: {short(d.get('message') or text_of((result or {}).get('content', [])), 160)}"
    step(f"f. {name}: a tool asking for elicitation fails cleanly", ask)

    def mrtr() -> str:
        before = rest.ok("POST", "/api/mcp-tools/call", {"tool": f"{name}/calls", "arguments": {}})
        status, d = rest.request("POST", "/api/mcp-tools/call", {"tool": f"{name}/ask_mrtr", "arguments": {}},
                                 timeout=20)
        need(status == 502 and isinstance(d, dict) and d.get("error") == "input_required", f"HTTP {status}: {short(d)}")
        need(d.get("input_requests") == ["elicitation"], f"input_requests {d.get('input_requests')!r}")
        after = rest.ok("POST", "/api/mcp-tools/call", {"tool": f"{name}/calls", "arguments": {}})
        n0, n1 = (int(text_of(x["result"]["content"])) for x in (before, after))
        need(n1 == n0 + 1, f"ask_mrtr ran {n1 - n0} times for one call (retried?)")
        return f"502 input_required {d['input_requests']}, called once: {short(d.get('message'), 120)}"
    step(f"f. {name}: resultType input_required -> input_required error, not retried", mrtr)

    def grow() -> str:
        names = lambda: {t.get("name") for t in rest.ok("GET", "/api/mcp-tools").get("tools", [])}  # noqa: E731
        need(f"{name}/grown" not in names(), "grown listed before grow")
        t0 = time.monotonic()
        rest.ok("POST", "/api/mcp-tools/call", {"tool": f"{name}/grow", "arguments": {}})
        while f"{name}/grown" not in names():
            need(time.monotonic() - t0 < 10, "grown not listed 10 s after grow (list change not followed)")
            time.sleep(0.1)
        took = time.monotonic() - t0
        d = rest.ok("POST", "/api/mcp-tools/call", {"tool": f"{name}/grown", "arguments": {}})
        need(text_of(d["result"].get("content", [])) == "grown ok", short(d))
        return f"{name}/grown listed {took:.2f} s after grow (subscriptions/listen), and callable"
    step(f"f. {name}: a tool added while connected is followed via subscriptions/listen", grow)


# ------------------------------------------------------------------------------------------


async def main_async(a: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="cideldill-interop-up-"))
    # Peers started directly carry a CIDELDILL_HOME inside tmp too, for interop.sh's sweep.
    direct_home = tmp / "home-direct"
    direct_home.mkdir()
    peer_env = {"PATH": os.environ.get("PATH", ""), "CIDELDILL_HOME": str(direct_home)}
    try:
        rep.info(f"client: mcp {SDK_VERSION} mcp.Client(StdioServerParameters, mode=legacy); node {a.node}")
        probe: dict = {}

        def find_late() -> str:
            before, after, notified = late_tools_of_everything(a.node, a.everything, {**os.environ, **peer_env})
            probe["late"] = after - before
            need(notified, "no notifications/tools/list_changed after initialized")
            need(probe["late"], f"no tool added after initialized ({len(after)} tools)")
            return f"{len(before)} tools before initialized, then list_changed adds {sorted(probe['late'])}"
        step("server-everything (direct, no capabilities): tools registered after initialized", find_late)
        late = probe.get("late", set())

        direct: dict = {}

        async def run_direct() -> str:
            names, ms = await direct_everything(a.node, a.everything, peer_env)
            direct.update(names=names, ms=ms)
            return f"{len(names)} tools, {LATENCY_CALLS} echo calls"
        await astep("server-everything (direct, plain SDK client): tools/list + echo", run_direct)

        await agent_session(a, tmp, late, direct.get("names", set()), direct.get("ms"))
        await anyio.to_thread.run_sync(kill_and_recover, a, tmp)
        await anyio.to_thread.run_sync(http_transports, a, tmp, late)
        await anyio.to_thread.run_sync(modern_peers, a, tmp)
    finally:
        for pid in procs_with_env(f"CIDELDILL_HOME={direct_home}"):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"interop_upstream [mcp {SDK_VERSION}]: {rep.passed} passed, {rep.failed} failed", flush=True)
    return 1 if rep.failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(REPO / "target/debug/cideldill-server"))
    ap.add_argument("--everything", required=True, help="server-everything dist/index.js")
    ap.add_argument("--filesystem", required=True, help="server-filesystem dist/index.js")
    ap.add_argument("--memory", required=True, help="server-memory dist/index.js")
    ap.add_argument("--time-bin", required=True, help="mcp-server-time console script")
    ap.add_argument("--node", default=shutil.which("node") or "node")
    a = ap.parse_args()
    a.binary = Path(a.binary).resolve()
    missing = [p for p in (a.binary, a.everything, a.filesystem, a.memory, a.time_bin) if not Path(p).is_file()]
    if missing:
        print(f"FAIL [upstream] setup: missing {', '.join(map(str, missing))}", flush=True)
        return 1
    return anyio.run(main_async, a)


if __name__ == "__main__":
    sys.exit(main())
