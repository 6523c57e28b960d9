#!/usr/bin/env python3
"""A tiny stand-in for an instrumented program, for scripts/interop.sh (stdlib only).

  interop_app.py start PORT         breakpoint on `add`, a same-signature `add_fast`, and a
                                    call add(2) that pauses;
                                    prints "<pause_id> <cid of the argument>"; like a real
                                    program, a background process then polls the pause every
                                    100 ms until it is resumed (at most 120 s), so the server
                                    never takes it for gone
  interop_app.py answer PORT PAUSE  answers one REPL eval of that pause (the expression's
                                    value is computed for `args[0] + 1` only), within 30 s
"""
import base64, hashlib, json, os, pickle, sys, time, urllib.error, urllib.request


def call(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def start(port):
    raw = pickle.dumps(2, protocol=4)
    arg = {"cid": hashlib.sha512(raw).hexdigest(), "client_ref": 2, "data": base64.b64encode(raw).decode()}
    call(port, "POST", "/api/breakpoints", {"function_name": "add", "signature": "(x)"})
    call(port, "POST", "/api/functions", {"function_name": "add_fast", "signature": "(x)"})
    started = call(port, "POST", "/api/call/start", {"method_name": "add", "args": [arg], "kwargs": {},
                                                      "process_pid": 1, "process_start_time": 1.0})
    pause = started["poll_url"].rsplit("/", 1)[1]
    print(pause, arg["cid"], flush=True)
    # The poller leaves the caller's output (a shell's $(...) waits for every writer).
    if os.fork() == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        poll(port, pause)
        os._exit(0)


def poll(port, pause):
    until = time.time() + 120
    while time.time() < until:
        try:
            if call(port, "GET", f"/api/poll/{pause}").get("status") != "waiting":
                return
        except (OSError, urllib.error.URLError, ValueError):
            return
        time.sleep(0.1)


def answer(port, pause):
    until = time.time() + 30
    while time.time() < until:
        req = call(port, "GET", f"/api/poll-repl/{pause}")
        if req.get("eval_id"):
            value = "3" if req["expr"].replace(" ", "") == "args[0]+1" else ""
            call(port, "POST", "/api/call/repl-result", {
                "eval_id": req["eval_id"], "pause_id": pause, "session_id": req["session_id"],
                "result": value, "stdout": "", "error": None if value else "NameError: unsupported here",
                "result_cid": None, "result_data": None})
            return
        time.sleep(0.05)
    sys.exit("no eval request within 30 s")


if __name__ == "__main__":
    if sys.argv[1] == "start":
        start(int(sys.argv[2]))
    else:
        answer(int(sys.argv[2]), sys.argv[3])
