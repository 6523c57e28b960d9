#!/usr/bin/env python3
"""The benchmark's load: the pickles a CID el Dill client sends per call, as JSON on stdout.

Writes {"target": item, "sets": [{"args": [item, item], "kwargs": {"c": item}, "result": item}, ...]}
with 64 distinct argument sets, each item {"cid": sha512 hex, "client_ref": int, "data": base64}
of a protocol-4 pickle. The target is a module-level function, which dill (like pickle) writes as
a global reference. scripts/bench.sh feeds this to benches/bench.rs, which builds the request
bodies of /api/call/start and /api/call/complete from it.
Needs: python3 (stdlib only). Usage: scripts/bench_load.py > load.json
"""
import base64, hashlib, json, pickle, sys, types

SETS = 64


def item(value, ref):
    raw = pickle.dumps(value, protocol=4)
    return {"cid": hashlib.sha512(raw).hexdigest(), "client_ref": ref,
            "data": base64.b64encode(raw).decode()}


def target_function():
    # An importable function of the debugged program: pickled by reference (module + name).
    sys.modules["shop"] = types.ModuleType("shop")
    module = sys.modules["shop.pricing"] = types.ModuleType("shop.pricing")

    def apply_discount(a, b, c=None):
        return a

    apply_discount.__module__ = "shop.pricing"
    apply_discount.__qualname__ = "apply_discount"
    module.apply_discount = apply_discount
    return apply_discount


def main():
    target = item(target_function(), 1)
    sets = []
    for i in range(SETS):
        order = {"order_id": 10_000 + i, "customer": "customer-%04d" % i, "total": i * 3.25,
                 "items": [("sku-%d" % j, j + 1, 9.99) for j in range(3)]}
        ref = 2 + 4 * i
        sets.append({
            "args": [item(order, ref), item("EUR-%d" % i, ref + 1)],
            "kwargs": {"c": item([i, i * 0.5, None, True], ref + 2)},
            "result": item({"order_id": 10_000 + i, "discounted": round(i * 2.9, 2)}, ref + 3),
        })
    json.dump({"target": target, "sets": sets}, sys.stdout)


if __name__ == "__main__":
    main()
