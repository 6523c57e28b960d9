#!/usr/bin/env python3
"""conformance_client.py: our MCP client as the conformance suite's client under test.

The suite runs `conformance client --command "python3 scripts/conformance_client.py"`: it
appends its test server's URL as the last argument and sets MCP_CONFORMANCE_SCENARIO (and
MCP_CONFORMANCE_CONTEXT, a JSON object, for scenarios that hand the client data such as
pre-registered credentials or the tool calls to make). This script:

  1. starts cideldill-server (CIDELDILL_SERVER_BIN) with --memory --port 0 and the suite's
     server as the one external MCP server `conf` (a servers file; with an `oauth` object
     when the context carries client_id / client_secret / scope, and for auth/basic-cimd
     the `client_metadata_url` of the suite's metadata document, as a person who hosts one
     configures it),
  2. waits until `conf` is connected (GET /api/mcp-clients); when its `auth` state is
     `required`, authorizes: POST /api/mcp-clients/conf/authorize, then a GET of the
     authorization URL that follows redirects to our own /oauth/callback, then waits again,
  3. does through the REST API what the scenario expects of a client: lists the tools
     (GET /api/mcp-tools?server=conf) and calls the ones the scenario wants (POST
     /api/mcp-tools/call); for http-standard-headers also reads every resource,
  4. stops the server and exits 0, or 1 naming the step that failed (on stderr).

Environment: CIDELDILL_SERVER_BIN (required), CONFORMANCE_CLIENT_DEADLINE_S (seconds for the
whole run, default 25, under the suite's 30 s), TMPDIR (the server's home is created there).
Standard library only.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

NAME = "conf"

# Scenarios whose checks need no tool call: connecting (initialize, tools/list) is all.
LIST_ONLY = {"initialize", "json-schema-ref-no-deref"}
# Arguments for tools the suite's test servers advertise (any other tool gets {}).
TOOL_ARGS = {"add_numbers": {"a": 2, "b": 3}}
# json-schema-2020-12-preservation: echo the focal tool's inputSchema as we received it.
FOCAL_TOOL = "json_schema_2020_12_tool"
ECHO_TOOL = "json_schema_echo"
# auth/basic-cimd: the client ID metadata document the suite expects a client to name.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def log(msg):
    print(f"conformance_client: {msg}", file=sys.stderr, flush=True)


class Failed(Exception):
    pass


class Run:
    def __init__(self, binary, url, scenario, context, deadline_s):
        self.binary = binary
        self.url = url
        self.scenario = scenario
        self.context = context
        self.deadline = time.monotonic() + deadline_s
        self.home = tempfile.mkdtemp(prefix="cideldill-conformance-client.")
        self.proc = None
        self.base = None
        self.authorizations = 0

    def left(self):
        return max(0.5, self.deadline - time.monotonic())

    # -- the server ---------------------------------------------------------------------
    def start(self):
        entry = {"url": self.url}
        oauth = {k: self.context[k] for k in ("client_id", "client_secret", "scope") if k in self.context}
        if self.scenario == "auth/basic-cimd":
            # A person whose authorization server takes client ID metadata documents hosts one
            # and names it in the entry (this server cannot serve one an authorization server
            # can fetch: docs/mcp.md); the suite's document is at this fixed address.
            oauth["client_metadata_url"] = CIMD_URL
        if oauth:
            entry["oauth"] = oauth
        config = os.path.join(self.home, "servers.json")
        with open(config, "w") as f:
            json.dump({"servers": {NAME: entry}}, f)
        port_file = os.path.join(self.home, "port")
        env = dict(os.environ, CIDELDILL_HOME=self.home, CIDELDILL_PORT_FILE=port_file,
                   RUST_LOG=os.environ.get("INTEROP_RUST_LOG", "warn"))
        self.server_log = open(os.path.join(self.home, "server.log"), "wb")
        self.proc = subprocess.Popen([self.binary, "--memory", "--port", "0", "--mcp-clients-config", config],
                                     env=env, stdin=subprocess.DEVNULL, stdout=self.server_log,
                                     stderr=subprocess.STDOUT)
        while True:
            if self.proc.poll() is not None:
                raise Failed(f"server exited with status {self.proc.returncode} before writing its port: {self.tail()}")
            try:
                with open(port_file) as f:
                    port = f.read().strip()
                if port:
                    self.base = f"http://127.0.0.1:{int(port)}"
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() > self.deadline:
                raise Failed("server wrote no port file in time")
            time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self):
        try:
            with open(os.path.join(self.home, "server.log"), "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return " | ".join(lines[-5:])
        except OSError:
            return "(no server log)"

    # -- REST ---------------------------------------------------------------------------
    def rest(self, method, path, body=None, timeout=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.left()) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"raw": raw.decode("utf-8", "replace")[:300]}

    def server_state(self):
        status, body = self.rest("GET", "/api/mcp-clients")
        if status != 200:
            raise Failed(f"GET /api/mcp-clients answered {status}: {body}")
        entry = (body.get("clients") or {}).get(NAME)
        if entry is None:
            raise Failed(f"GET /api/mcp-clients does not list {NAME}: {body}")
        return entry

    def wait_connected(self):
        """Waits until `conf` is connected, authorizing whenever its auth state is required."""
        last = None
        while True:
            entry = self.server_state()
            auth = entry.get("auth") or {}
            state = auth.get("state")
            last = entry
            if entry.get("status") == "connected" and state in (None, "none", "authorized"):
                return entry
            if state == "required":
                self.authorize()
            elif state == "error":
                raise Failed(f"authorization failed: {auth.get('message')}")
            elif entry.get("status") in ("error", "failed") and state not in ("authorizing",):
                raise Failed(f"{NAME} is {entry.get('status')}: {entry.get('error')}; auth {auth or 'absent'}")
            if time.monotonic() > self.deadline:
                raise Failed(f"{NAME} not connected in time: {json.dumps(last)[:400]}")
            time.sleep(0.05)

    def authorize(self):
        self.authorizations += 1
        if self.authorizations > 3:
            raise Failed("authorization asked for more than 3 times")
        status, body = self.rest("POST", f"/api/mcp-clients/{NAME}/authorize", {})
        if status != 200 or not isinstance(body, dict) or "authorization_url" not in body:
            raise Failed(f"POST /api/mcp-clients/{NAME}/authorize answered {status}: {json.dumps(body)[:300]}")
        url = body["authorization_url"]
        log(f"opening the authorization URL {url[:200]}")
        # What a browser does: follow redirects, ending at our /oauth/callback page.
        try:
            with urllib.request.urlopen(url, timeout=self.left()) as resp:
                page = resp.read().decode("utf-8", "replace")
                final = resp.geturl()
        except urllib.error.HTTPError as e:
            page = e.read().decode("utf-8", "replace")
            raise Failed(f"the authorization URL ended at {e.geturl()} with {e.code}: {page[:300]}")
        if "/oauth/callback" not in final:
            raise Failed(f"the authorization URL ended at {final}, not at our /oauth/callback")
        log(f"callback page: {' '.join(page.split())[:200]}")

    # -- the scenario -------------------------------------------------------------------
    def tools(self):
        status, body = self.rest("GET", f"/api/mcp-tools?server={NAME}")
        if status != 200:
            raise Failed(f"GET /api/mcp-tools answered {status}: {body}")
        return body.get("tools") or []

    def call(self, tool, arguments):
        """Calls conf/<tool>; when the server asks for (more) authorization, authorizes once
        and calls again."""
        for _ in range(3):
            status, body = self.rest("POST", "/api/mcp-tools/call",
                                     {"tool": f"{NAME}/{tool}", "arguments": arguments})
            if status == 200:
                return body
            state = (self.server_state().get("auth") or {}).get("state")
            if state == "required":
                self.authorize()
                self.wait_connected()
                continue
            raise Failed(f"calling {tool} answered {status}: {json.dumps(body)[:400]}")
        raise Failed(f"calling {tool}: still unauthorized after authorizing")

    def calls_wanted(self, tools):
        by_name = {t.get("original_name"): t for t in tools}
        if isinstance(self.context.get("toolCalls"), list):
            wanted = []
            for c in self.context["toolCalls"]:
                if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                    raise Failed(f"MCP_CONFORMANCE_CONTEXT toolCalls holds an entry without a name: {c!r}")
                if c["name"] in by_name:
                    wanted.append((c["name"], c.get("arguments") or {}))
                else:
                    log(f"{c['name']} (asked for by the context) is not in our catalog: not called")
            return wanted
        if self.scenario in LIST_ONLY:
            return []
        if self.scenario == "json-schema-2020-12-preservation":
            focal = by_name.get(FOCAL_TOOL)
            if focal is None:
                raise Failed(f"the server advertises no {FOCAL_TOOL}; tools: {sorted(by_name)}")
            return [(ECHO_TOOL, {"schema": focal.get("input_schema")})]
        return [(name, TOOL_ARGS.get(name, {})) for name in sorted(by_name)]

    def run(self):
        self.start()
        entry = self.wait_connected()
        log(f"{NAME} connected ({entry.get('transport')}, era {entry.get('protocol_era')}, "
            f"version {entry.get('protocol_version')})")
        tools = self.tools()
        log(f"tools: {[t.get('original_name') for t in tools]}")
        for tool, arguments in self.calls_wanted(tools):
            result = self.call(tool, arguments)
            log(f"called {tool}: {json.dumps(result.get('result'))[:200]}")
        if self.scenario == "http-standard-headers":
            status, body = self.rest("GET", f"/api/mcp-resources?server={NAME}")
            if status != 200:
                raise Failed(f"GET /api/mcp-resources answered {status}: {body}")
            for res in body.get("resources") or []:
                status, read = self.rest("POST", "/api/mcp-resources/read", {"server": NAME, "uri": res.get("uri")})
                if status != 200:
                    raise Failed(f"reading {res.get('uri')} answered {status}: {json.dumps(read)[:300]}")
                log(f"read {res.get('uri')}")


def main():
    if len(sys.argv) < 2:
        log("usage: conformance_client.py [ARGS...] SERVER_URL (the suite appends the URL)")
        return 2
    binary = os.environ.get("CIDELDILL_SERVER_BIN")
    if not binary or not os.access(binary, os.X_OK):
        log(f"CIDELDILL_SERVER_BIN must name the cideldill-server binary (got {binary!r})")
        return 2
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except ValueError as e:
        log(f"MCP_CONFORMANCE_CONTEXT is not JSON: {e}")
        return 2
    if not isinstance(context, dict):
        log("MCP_CONFORMANCE_CONTEXT is not a JSON object")
        return 2
    try:
        deadline_s = float(os.environ.get("CONFORMANCE_CLIENT_DEADLINE_S", "25"))
    except ValueError:
        log("CONFORMANCE_CLIENT_DEADLINE_S is not a number")
        return 2
    log(f"scenario {scenario!r} against {url} "
        f"(protocol version asked: {os.environ.get('MCP_CONFORMANCE_PROTOCOL_VERSION', 'none')})")
    run = Run(binary, url, scenario, context, deadline_s)
    try:
        run.run()
        return 0
    except Failed as e:
        log(f"FAILED: {e}")
        log(f"server log: {run.tail()}")
        return 1
    except (OSError, ValueError) as e:
        log(f"FAILED: {type(e).__name__}: {e}")
        log(f"server log: {run.tail()}")
        return 1
    finally:
        run.stop()
        shutil.rmtree(run.home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
