#!/usr/bin/env python3
"""Writes tests/fixtures/store-v1/: a database in store format 1 and what its server answered.

Format 1 is what cideldill-server wrote before format 2 (commit bb8ecc7 and earlier). This script
drives such a binary through a short session (calls of a function with a breakpoint, so they
leave history; a call that raises; a plain call; a diagnostic event), records its answers to
/api/call-records and /api/breakpoints/hist/history, stops it, and keeps the file. The test
`persistence::a_format_1_database_reopens_with_the_same_records` reopens that file with today's
binary and expects the same answers. Usage: scripts/gen_store_v1_fixture.py OLD_BINARY
"""
import base64, hashlib, json, os, pickle, shutil, signal, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "store-v1")


def item(value, ref):
    raw = pickle.dumps(value, protocol=4)
    return {"cid": hashlib.sha512(raw).hexdigest(), "client_ref": ref, "data": base64.b64encode(raw).decode()}


def main(binary):
    tmp = tempfile.mkdtemp()
    db = os.path.join(tmp, "v1.db")
    port_file = os.path.join(tmp, "port")
    env = dict(os.environ, CIDELDILL_HOME=tmp, RUST_LOG="warn")
    proc = subprocess.Popen([binary, "--port", "0", "--port-file", port_file, "--db", db], env=env)
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        time.sleep(0.05)
    base = "http://127.0.0.1:%s" % open(port_file).read().strip()

    def call(method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(req).read())

    ident = {"process_pid": 4242, "process_start_time": 1795311683.25}
    stack = [{"filename": "/app/main.py", "lineno": 10 + i, "function": "f%d" % i, "code_context": "x = hist(1)\n"} for i in range(3)]
    call("POST", "/api/breakpoints", {"function_name": "hist"})
    call("POST", "/api/breakpoints/hist/behavior", {"behavior": "go"})
    call("POST", "/api/breakpoints/hist/after_behavior", {"behavior": "go"})
    for i, (name, raises) in enumerate([("hist", False), ("hist", True), ("free", False)]):
        start = dict(ident, method_name=name, target=item(name, 1), args=[item(i, 2)], kwargs={"y": item("v%d" % i, 3)},
                     call_site={"timestamp": 1795311690.0 + i, "target_cid": item(name, 1)["cid"], "stack_trace": stack},
                     call_type="proxy", signature="(x, y=None)")
        call_id = call("POST", "/api/call/start", start)["call_id"]
        done = dict(ident, call_id=call_id, timestamp=1795311691.0 + i)
        if raises:
            done.update(status="exception", exception_type="ValueError", exception_message="bad %d" % i,
                        exception_traceback="Traceback (most recent call last):\n  ...\nValueError: bad")
        else:
            r = item([i, {"k": i}], 4)
            done.update(status="success", result_cid=r["cid"], result_data=r["data"], result_client_ref=4)
        call("POST", "/api/call/complete", done)
    call("POST", "/api/call/event", dict(ident, method_name="__getattr__('_cideldill_alias_name')", status="exception",
                                         timestamp=1795311695.0, call_site={"timestamp": 1795311695.0, "stack_trace": stack},
                                         pretty_args=[], pretty_kwargs={},
                                         exception={"type": "AttributeError", "message": "no alias", "requested_attribute": "_cideldill_alias_name"}))
    expected = {
        "call_records": call("GET", "/api/call-records"),
        "history": call("GET", "/api/breakpoints/hist/history"),
        "objects": call("GET", "/api/objects")["total_count"],
    }
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    os.makedirs(OUT, exist_ok=True)
    shutil.copy(db, os.path.join(OUT, "v1.db"))
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main(sys.argv[1])
