#!/usr/bin/env python3
"""Benchmark of the pickle reader: decode-and-render throughput against python3 in one run.

Builds a few realistic payloads with pickle (protocol 4) and dill (as the debug client does),
then measures, on the same bytes, our `pickle::repr` (a small release binary built against this
crate in .cache/bench-pickle) and python3's `repr(pickle.loads(b))` (dill.loads for dill payloads).
Reports MB/s for both and the ratio per payload.
`--emit DIR` is the half that scripts/bench.sh uses: it writes the plain-pickle payloads (no dill)
to DIR/p<i>.pkl and prints one line per payload, `file<TAB>name<TAB>bytes<TAB>python MB/s`;
benches/bench.rs then times our reader on the same files.
Needs: cargo, python3; dill from the cache that scripts/demo_app.py installs (not for --emit).
Usage: scripts/bench_pickle.py [seconds-per-measurement]
       scripts/bench_pickle.py --emit DIR [seconds-per-measurement]
"""
import dataclasses, datetime, decimal, os, pickle, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache")
EMIT = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--emit" else None
ARGS = sys.argv[3:] if EMIT else sys.argv[1:]
SECONDS = float(ARGS[0]) if ARGS else 1.0
dill = None


def load_dill():
    global dill
    sys.path.insert(0, os.path.join(CACHE, "python"))
    try:
        import dill
    except ImportError:
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "demo_app.py"), "--self-test", "--dill"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import dill
    dill.settings["recurse"] = True


@dataclasses.dataclass
class Order:
    order_id: int
    customer: str
    total: float
    items: list
    placed: datetime.datetime


def payloads(with_dill=True):
    records = [{"id": i, "name": f"user{i}", "score": i * 1.5, "tags": ["a", "b", str(i)], "active": i % 2 == 0}
               for i in range(20000)]
    text = ["line %d: %s" % (i, "lorem ipsum dolor sit amet " * 3) for i in range(20000)]
    numbers = list(range(-50000, 50000)) + [2 ** 70 + i for i in range(1000)] + [i / 7 for i in range(50000)]
    nested = {"config": {"levels": [[{"k": (i, j, str(i * j))} for j in range(20)] for i in range(500)]},
              "when": datetime.datetime(2024, 1, 2, 3, 4, 5), "price": decimal.Decimal("19.99")}
    orders = [Order(i, f"c{i % 97}", i * 3.25, [("sku%d" % j, j) for j in range(5)],
                    datetime.datetime(2024, 5, 1, 12, 0, i % 60)) for i in range(5000)]
    plain = [
        ("records (list of dicts)", pickle.dumps(records, protocol=4), "pickle"),
        ("text lines", pickle.dumps(text, protocol=4), "pickle"),
        ("numbers (ints, bigints, floats)", pickle.dumps(numbers, protocol=4), "pickle"),
        ("nested tuples, datetime, Decimal", pickle.dumps(nested, protocol=4), "pickle"),
    ]
    if not with_dill:
        return plain
    return plain + [("dataclass instances (dill, by value)", dill.dumps(orders, protocol=4), "dill")]


BENCH_MAIN = r'''
use std::time::{Duration, Instant};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args[1].parse().unwrap();
    for path in &args[2..] {
        let bytes = std::fs::read(path).unwrap();
        let text = cideldill_server::pickle::repr(&bytes).expect("renders");
        let mut n = 0u64;
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs_f64(secs) {
            std::hint::black_box(cideldill_server::pickle::repr(std::hint::black_box(&bytes)).unwrap());
            n += 1;
        }
        let rate = (bytes.len() as f64 * n as f64) / t.elapsed().as_secs_f64() / 1e6;
        println!("{rate} {}", text.len());
    }
}
'''


def build_rust():
    proj = os.path.join(CACHE, "bench-pickle")
    os.makedirs(os.path.join(proj, "src"), exist_ok=True)
    with open(os.path.join(proj, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "bench-pickle"\nversion = "0.0.0"\nedition = "2021"\n\n[workspace]\n\n'
                '[dependencies]\ncideldill-server = { path = "%s" }\n\n[profile.release]\ndebug = 1\n' % ROOT)
    with open(os.path.join(proj, "src", "main.rs"), "w") as f:
        f.write(BENCH_MAIN)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target"))
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(proj, "Cargo.toml")],
                   check=True, env=env)
    return os.path.join(ROOT, "target", "release", "bench-pickle")


def python_rate(data, kind):
    loads = dill.loads if kind == "dill" else pickle.loads
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < SECONDS:
        repr(loads(data))
        n += 1
    return len(data) * n / (time.perf_counter() - t) / 1e6


def emit(directory):
    os.makedirs(directory, exist_ok=True)
    for i, (name, data, kind) in enumerate(payloads(with_dill=False)):
        path = os.path.join(directory, f"p{i}.pkl")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{path}\t{name}\t{len(data)}\t{python_rate(data, kind)}", flush=True)


def main():
    if EMIT:
        return emit(EMIT)
    load_dill()
    binary = build_rust()
    work = os.path.join(CACHE, "bench-pickle", "data")
    os.makedirs(work, exist_ok=True)
    items = payloads()
    paths = []
    for i, (_, data, _) in enumerate(items):
        path = os.path.join(work, f"p{i}.pkl")
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
    out = subprocess.run([binary, str(SECONDS)] + paths, check=True, capture_output=True, text=True).stdout.split("\n")
    print(f"{'payload':40} {'size':>9} {'ours MB/s':>10} {'python MB/s':>12} {'ratio':>7}")
    for (name, data, kind), line in zip(items, out):
        ours = float(line.split()[0])
        py = python_rate(data, kind)
        print(f"{name:40} {len(data):9d} {ours:10.1f} {py:12.1f} {ours / py:7.2f}")


if __name__ == "__main__":
    main()
