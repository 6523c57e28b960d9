#!/usr/bin/env python3
"""Benchmark of the debug-client protocol, reported as ratios against a floor.

Starts the release binary on a free port (memory, then a --db file), and times, with one new
connection per request like the Python client:
  floor    GET /api/breakpoints (the cheapest request: HTTP plus a lock)
  call     POST /api/call/start (no breakpoint: continue) + POST /api/call/complete
  paused   call/start (pauses) + poll + continue + poll + call/complete, then the after-pause
Needs: python3, a built binary (cargo build --release). Usage: scripts/bench.py [N]
"""
import base64, hashlib, http.client, json, os, pickle, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    resp = conn.getresponse()
    out = json.loads(resp.read() or b"null")
    conn.close()
    if resp.status != 200:
        raise SystemExit(f"{method} {path} -> {resp.status} {out}")
    return out


def item(value, ref):
    raw = pickle.dumps(value, protocol=4)
    return {"cid": hashlib.sha512(raw).hexdigest(), "client_ref": ref, "data": base64.b64encode(raw).decode()}


IDENT = {"process_pid": os.getpid(), "process_start_time": time.time()}


def start_body(name, i):
    return dict(IDENT, method_name=name, target=item(name, 1), args=[item(i, 2)], kwargs={"y": item("x" * 100, 3)},
                call_site={"timestamp": time.time(), "stack_trace": []}, signature="(x, y)")


def complete_body(call_id, i):
    r = item(i * 2, 4)
    return dict(IDENT, call_id=call_id, timestamp=time.time(), status="success",
                result_cid=r["cid"], result_data=r["data"], result_client_ref=4)


def timed(fn):
    t = time.perf_counter()
    for i in range(N):
        fn(i)
    return N / (time.perf_counter() - t)


def run(args):
    binary = os.path.join(ROOT, "target", "release", "cideldill-server")
    tmp = tempfile.mkdtemp()
    env = dict(os.environ, CIDELDILL_HOME=tmp, RUST_LOG="warn")
    port_file = os.path.join(tmp, "port")
    proc = subprocess.Popen([binary, "--port", "0", "--port-file", port_file] + args(tmp), env=env)
    try:
        deadline = time.time() + 10
        while not os.path.exists(port_file) and time.time() < deadline:
            time.sleep(0.01)
        port = int(open(port_file).read())
        floor = timed(lambda i: request(port, "GET", "/api/breakpoints"))
        call = timed(lambda i: request(port, "POST", "/api/call/complete",
                                       complete_body(request(port, "POST", "/api/call/start", start_body("free", i))["call_id"], i)))
        request(port, "POST", "/api/breakpoints", {"function_name": "bp"})

        def paused(i):
            start = request(port, "POST", "/api/call/start", start_body("bp", i))
            pid = start["poll_url"].rsplit("/", 1)[1]
            request(port, "GET", start["poll_url"])
            request(port, "POST", f"/api/paused/{pid}/continue", {"action": "continue"})
            request(port, "GET", start["poll_url"])
            after = request(port, "POST", "/api/call/complete", complete_body(start["call_id"], i))
            apid = after["poll_url"].rsplit("/", 1)[1]
            request(port, "POST", f"/api/paused/{apid}/continue", {"action": "continue"})
            request(port, "GET", after["poll_url"])

        paused_rate = timed(paused)
        return floor, call, paused_rate
    finally:
        proc.terminate()
        proc.wait()


def main():
    print(f"N = {N} per measurement, one connection per request")
    for label, args in [("memory", lambda d: ["--memory"]), ("db", lambda d: ["--db", os.path.join(d, "b.db")])]:
        floor, call, paused = run(args)
        print(f"{label:6}  floor {floor:8.0f} req/s | call {call:7.0f} calls/s = {call / floor:.3f} x floor"
              f" (2 requests) | paused call {paused:6.0f} calls/s = {paused / floor:.3f} x floor (8 requests)")


if __name__ == "__main__":
    main()
