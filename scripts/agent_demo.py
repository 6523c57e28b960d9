#!/usr/bin/env python3
"""An AI-agent-style session against `cideldill-server --mcp`, driven by the MCP Python SDK 2.x.

What it does
    1. Starts `<binary> --mcp --memory --port 0` over stdio with `mcp.Client`
       (CIDELDILL_HOME and CIDELDILL_PORT_FILE in a temporary directory; ~/.cideldill is
       never touched) and adds a breakpoint on `add` with `breakpoint_add`.
    2. Starts `python3 scripts/demo_app.py --server http://localhost:<port>` (the debugged
       program; its stdout is captured).
    3. Like an agent would: `breakpoint_wait_for_pause` for `add`, `breakpoint_inspect_object`
       on the first argument's CID (expects repr "2"), `breakpoint_repl_eval` of
       `args[0] + 1` (expects "3", evaluated by the demo), then `breakpoint_continue` with
       modified_args [10] and modified_kwargs {"y": 20}.
    4. Resumes every later pause (`breakpoint_wait_for_pause` + `breakpoint_continue`) until
       the demo exits, and checks it exited 0 and printed `add(10, y=20) -> 30`.
    5. Measures tools/call latency over stdio: p50/p99 of 200 `breakpoint_list_breakpoints`
       calls against 200 `ping`s (the floor), and their ratio.

What it needs
    Python 3.10+ with mcp 2.x (`mcp.Client`; tested with 2.3.0), a built binary, and
    python3 on PATH for the demo (stdlib only).

How to call it
    <venv>/bin/python scripts/agent_demo.py [--binary target/debug/cideldill-server]

Output
    `PASS <name>` / `FAIL <name>: <why>` lines, an `INFO latency ...` line, then
    `agent_demo: N passed, N failed`; exit status 1 if anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp
from mcp import StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "scripts" / "demo_app.py"
EXPECTED_LINE = "add(10, y=20) -> 30"
LATENCY_CALLS = 200

warnings.filterwarnings("ignore", category=DeprecationWarning)
if hasattr(mcp, "MCPDeprecationWarning"):
    warnings.filterwarnings("ignore", category=mcp.MCPDeprecationWarning)


class Failed(Exception):
    pass


class Agent:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.passed = 0
        self.failed = 0

    def ok(self, name: str, detail: str = "") -> None:
        self.passed += 1
        print(f"PASS agent {name}" + (f" ({detail})" if detail else ""), flush=True)

    def fail(self, name: str, why: str) -> None:
        self.failed += 1
        print(f"FAIL agent {name}: {why}", flush=True)

    async def tool(self, name: str, args: dict | None = None) -> Any:
        """Calls a tool; returns its JSON, raising Failed on isError or a malformed result."""
        res = await self.client.call_tool(name, args or {})
        content = res.content
        if len(content) != 1 or getattr(content[0], "type", None) != "text":
            raise Failed(f"{name}: expected one text item, got {content!r}")
        data = json.loads(content[0].text)
        if res.is_error:
            raise Failed(f"{name} returned isError: {data}")
        if res.structured_content is not None and res.structured_content != data:
            raise Failed(f"{name}: structuredContent differs from the text JSON")
        return data


def read_port(port_file: Path, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = port_file.read_text().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise Failed(f"no port file {port_file} after {timeout} s")


def percentile(samples: list[float], q: float) -> float:
    s = sorted(samples)
    k = max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))
    return s[k]


async def timed(n: int, fn: Any) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


async def session(a: Agent, port_file: Path, tmp: Path) -> None:
    # 1. breakpoint on add (the demo would also create it when it registers add).
    try:
        d = await a.tool("breakpoint_add", {"function_name": "add"})
        a.ok("breakpoint_add add", json.dumps(d))
    except Exception as e:  # noqa: BLE001
        a.fail("breakpoint_add add", str(e))
        return

    # 2. the debugged program.
    port = await anyio.to_thread.run_sync(read_port, port_file)
    python = shutil.which("python3") or sys.executable
    demo_err = open(tmp / "demo.stderr", "w+")
    demo = subprocess.Popen([python, str(DEMO), "--server", f"http://localhost:{port}"],
                            stdout=subprocess.PIPE, stderr=demo_err, text=True,
                            env={**os.environ, "CIDELDILL_HOME": str(tmp / "home")})
    try:
        await drive(a, demo)
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGTERM)
            try:
                demo.wait(5)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait()
        demo_err.seek(0)
        err_text = demo_err.read()
        demo_err.close()
        if a.failed:
            print("---- demo stderr (last 30 lines) ----\n" + "\n".join(err_text.splitlines()[-30:]),
                  file=sys.stderr, flush=True)

    # 5. latency over stdio, with the server idle again.
    try:
        await a.tool("breakpoint_list_breakpoints")  # warm-up
        await a.client.session.send_ping()
        tool_ms = await timed(LATENCY_CALLS, lambda: a.client.call_tool("breakpoint_list_breakpoints", {}))
        ping_ms = await timed(LATENCY_CALLS, lambda: a.client.session.send_ping())
        t50, t99 = percentile(tool_ms, 50), percentile(tool_ms, 99)
        p50, p99 = percentile(ping_ms, 50), percentile(ping_ms, 99)
        print(f"INFO agent latency over stdio ({LATENCY_CALLS} calls each): "
              f"tools/call breakpoint_list_breakpoints p50 {t50:.2f} ms p99 {t99:.2f} ms; "
              f"ping p50 {p50:.2f} ms p99 {p99:.2f} ms; ratio p50 {t50 / p50:.1f}x p99 {t99 / p99:.1f}x "
              f"(mean {statistics.mean(tool_ms):.2f} vs {statistics.mean(ping_ms):.2f} ms)", flush=True)
        a.ok("latency measured", f"tool p50 {t50:.2f} ms, ping p50 {p50:.2f} ms")
    except Exception as e:  # noqa: BLE001
        a.fail("latency measured", f"{type(e).__name__}: {e}")


async def drive(a: Agent, demo: subprocess.Popen) -> None:
    # 3. the first pause of add: look, evaluate, modify.
    try:
        w = await a.tool("breakpoint_wait_for_pause", {"function_name": "add", "timeout_s": 20})
        if not w.get("paused"):
            raise Failed(f"add did not pause within 20 s: {w}")
        pause = w["pause"]
        pause_id = pause["id"]
        cd = pause["call_data"]
        a.ok("breakpoint_wait_for_pause add",
             f"pretty_args {cd.get('pretty_args')}, pretty_kwargs {cd.get('pretty_kwargs')}")
    except Exception as e:  # noqa: BLE001
        a.fail("breakpoint_wait_for_pause add", str(e))
        return

    try:
        cid = cd["args"][0]["cid"]
        obj = await a.tool("breakpoint_inspect_object", {"cid": cid})
        if obj.get("repr") != "2":
            raise Failed(f"repr {obj.get('repr')!r}, expected '2': {obj}")
        a.ok("breakpoint_inspect_object args[0]", f"{obj.get('type')} {obj.get('repr')}")
    except Exception as e:  # noqa: BLE001
        a.fail("breakpoint_inspect_object args[0]", str(e))

    try:
        t = time.perf_counter()
        r = await a.tool("breakpoint_repl_eval", {"pause_id": pause_id, "expression": "args[0] + 1",
                                                  "timeout_s": 20})
        if r.get("output") != "3" or r.get("is_error"):
            raise Failed(f"expected output '3': {r}")
        a.ok("breakpoint_repl_eval args[0] + 1", f"output {r['output']!r} in {(time.perf_counter() - t) * 1e3:.0f} ms")
    except Exception as e:  # noqa: BLE001
        a.fail("breakpoint_repl_eval args[0] + 1", str(e))

    try:
        c = await a.tool("breakpoint_continue", {"pause_id": pause_id, "modified_args": [10],
                                                 "modified_kwargs": {"y": 20}})
        if c.get("action") != "modify":
            raise Failed(f"unexpected answer {c}")
        a.ok("breakpoint_continue modified_args [10] y=20", json.dumps(c))
    except Exception as e:  # noqa: BLE001
        a.fail("breakpoint_continue modified_args [10] y=20", str(e))
        return

    # 4. resume everything else until the demo exits.
    resumed: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while demo.poll() is None:
            if time.monotonic() > deadline:
                raise Failed(f"demo still running after 60 s; resumed {resumed}")
            w = await a.tool("breakpoint_wait_for_pause", {"timeout_s": 1})
            if w.get("paused"):
                p = w["pause"]
                await a.tool("breakpoint_continue", {"pause_id": p["id"]})
                after = "pretty_result" in p["call_data"] or "exception" in p["call_data"]
                resumed.append(f"{p['call_data']['method_name']}{'/after' if after else ''}")
        a.ok("resume every pause until the demo exits", f"{len(resumed)} pauses: {', '.join(resumed)}")
    except Exception as e:  # noqa: BLE001
        a.fail("resume every pause until the demo exits", str(e))
        return

    out = await anyio.to_thread.run_sync(demo.stdout.read)
    rc = demo.wait()
    if rc == 0:
        a.ok("demo exited 0")
    else:
        a.fail("demo exited 0", f"exit status {rc}; stdout:\n{out}")
    if EXPECTED_LINE in out:
        line = next(l for l in out.splitlines() if EXPECTED_LINE in l)
        a.ok("demo printed the modified call", line.strip())
    else:
        a.fail("demo printed the modified call", f"no {EXPECTED_LINE!r} in stdout:\n{out}")


async def main_async(binary: Path) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="cideldill-agent-"))
    home = tmp / "home"
    home.mkdir()
    port_file = home / "port"
    params = StdioServerParameters(
        command=str(binary), args=["--mcp", "--memory", "--port", "0"],
        env={"CIDELDILL_HOME": str(home), "CIDELDILL_PORT_FILE": str(port_file),
             "RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn")})
    a = None
    try:
        async with mcp.Client(params, mode="legacy", read_timeout_seconds=90) as client:
            a = Agent(client)
            await session(a, port_file, tmp)
    except Exception as e:  # noqa: BLE001
        a = a or Agent(None)
        a.fail("session", f"{type(e).__name__}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"agent_demo: {a.passed} passed, {a.failed} failed", flush=True)
    return 1 if a.failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(REPO / "target/debug/cideldill-server"))
    args = ap.parse_args()
    binary = Path(args.binary).resolve()
    if not hasattr(mcp, "Client"):
        print("FAIL agent setup: needs mcp 2.x (mcp.Client)", flush=True)
        return 1
    if not binary.is_file():
        print(f"FAIL agent setup: no binary at {binary} (run cargo build)", flush=True)
        return 1
    return anyio.run(main_async, binary)


if __name__ == "__main__":
    sys.exit(main())
