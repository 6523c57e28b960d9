//! The benchmark's load generator, shared with the reliability suite: an HTTP/1.1 client
//! written by hand over std `TcpStream`, one new connection per request with `Connection: close`
//! like the Python client, and the request bodies of the real client's call cycle
//! (`/api/call/start` + `/api/call/complete`), built once from a load description
//! (`scripts/bench_load.py`'s output, or the same shape built in Rust). Every blocking read has
//! a deadline (the socket timeouts).

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

pub type Res<T> = Result<T, String>;

/// The benchmark's deadline of one request.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

pub fn err<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

// ---------------------------------------------------------------------------------------------
// HTTP client: one connection per request, `Connection: close`, read to EOF.

pub fn http(port: u16, method: &str, path: &str, body: &[u8]) -> Res<(u16, Vec<u8>)> {
    http_within(port, method, path, body, HTTP_TIMEOUT)
}

/// [`http`] with its own deadline for connecting, writing and each read.
pub fn http_within(
    port: u16,
    method: &str,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> Res<(u16, Vec<u8>)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(err("connect"))?;
    s.set_nodelay(true).map_err(err("nodelay"))?;
    s.set_read_timeout(Some(timeout)).map_err(err("timeout"))?;
    s.set_write_timeout(Some(timeout)).map_err(err("timeout"))?;
    let mut req = Vec::with_capacity(160 + body.len());
    let _ = write!(
        req,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    req.extend_from_slice(body);
    s.write_all(&req).map_err(err("write"))?;
    let mut resp = Vec::with_capacity(1024);
    s.read_to_end(&mut resp).map_err(err("read"))?;
    parse_response(&resp)
}

pub fn parse_response(resp: &[u8]) -> Res<(u16, Vec<u8>)> {
    let end = find(resp, b"\r\n\r\n").ok_or("response without a header end")?;
    let head = String::from_utf8_lossy(&resp[..end]);
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line: {head}"))?;
    let rest = &resp[end + 4..];
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok((status, rest.to_vec()));
    }
    let (mut body, mut at) = (Vec::new(), 0);
    loop {
        let eol = find(&rest[at..], b"\r\n").ok_or("bad chunk")? + at;
        let size_text = String::from_utf8_lossy(&rest[at..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(err("chunk size"))?;
        if size == 0 {
            return Ok((status, body));
        }
        let data = eol + 2;
        body.extend_from_slice(rest.get(data..data + size).ok_or("short chunk")?);
        at = data + size + 2;
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A request that must answer 200 with a JSON body.
pub fn call(port: u16, method: &str, path: &str, body: &[u8]) -> Res<Value> {
    call_within(port, method, path, body, HTTP_TIMEOUT)
}

/// [`call`] with its own deadline.
pub fn call_within(
    port: u16,
    method: &str,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> Res<Value> {
    let (status, body) = http_within(port, method, path, body, timeout)?;
    if status != 200 {
        return Err(format!(
            "{method} {path} -> {status} {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    serde_json::from_slice(&body).map_err(err("response JSON"))
}

// ---------------------------------------------------------------------------------------------
// The load: request bodies of the real client, built once.

pub struct Load {
    /// Per argument set: the call/start body for the function without a breakpoint.
    pub free: Vec<Vec<u8>>,
    /// The same for `bp`, the function with a breakpoint.
    pub bp: Vec<Vec<u8>>,
    /// Per argument set: the call/complete body after `{"call_id":<id>`.
    pub complete_tail: Vec<String>,
}

impl Load {
    /// Reads `scripts/bench_load.py`'s output.
    pub fn read(path: &Path) -> Res<Load> {
        let text = fs::read_to_string(path).map_err(err("load file"))?;
        let v: Value = serde_json::from_str(&text).map_err(err("load JSON"))?;
        Load::from_value(&v)
    }

    /// Builds the bodies from `{"target": item, "sets": [{"args", "kwargs", "result"}, ...]}`.
    pub fn from_value(v: &Value) -> Res<Load> {
        let target = &v["target"];
        let sets = v["sets"].as_array().ok_or("load: no sets")?;
        let pid = std::process::id();
        let started = now() - 12.5;
        let frames = |i: usize| {
            json!([
                {"filename": "/srv/shop/checkout.py", "lineno": 120 + i, "function": "checkout",
                 "code_context": "total = apply_discount(order, currency, c=flags)"},
                {"filename": "/srv/shop/views.py", "lineno": 57, "function": "post_order",
                 "code_context": "receipt = checkout(cart, user)"},
                {"filename": "/srv/shop/app.py", "lineno": 14, "function": "main",
                 "code_context": "serve(routes)"},
            ])
        };
        let start = |method: &str, i: usize, set: &Value| {
            let body = json!({
                "method_name": method,
                "process_pid": pid,
                "process_start_time": started,
                "target": target,
                "args": set["args"],
                "kwargs": set["kwargs"],
                "call_site": {"timestamp": started + 1.0 + i as f64, "target_cid": target["cid"],
                              "stack_trace": frames(i)},
                "call_type": "proxy",
                "signature": "(a, b, c=None)",
            });
            serde_json::to_vec(&body).expect("JSON")
        };
        let mut load = Load {
            free: Vec::new(),
            bp: Vec::new(),
            complete_tail: Vec::new(),
        };
        for (i, set) in sets.iter().enumerate() {
            load.free.push(start("apply_discount", i, set));
            load.bp.push(start("bp", i, set));
            let r = &set["result"];
            let tail = json!({
                "timestamp": started + 2.0 + i as f64,
                "status": "success",
                "result_cid": r["cid"],
                "result_data": r["data"],
                "result_client_ref": r["client_ref"],
                "process_pid": pid,
                "process_start_time": started,
            })
            .to_string();
            load.complete_tail.push(format!(",{}", &tail[1..]));
        }
        if load.free.is_empty() {
            return Err("load: empty".into());
        }
        Ok(load)
    }

    pub fn complete(&self, i: usize, call_id: &Value) -> Vec<u8> {
        let tail = &self.complete_tail[i % self.complete_tail.len()];
        format!("{{\"call_id\":{call_id}{tail}").into_bytes()
    }
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// One call cycle of a function without a breakpoint: call/start (continue) + call/complete.
pub fn cycle(port: u16, load: &Load, i: u64) -> Res<()> {
    cycle_within(port, load, i, HTTP_TIMEOUT).map(|_| ())
}

/// [`cycle`] with its own deadline per request; returns the call id.
pub fn cycle_within(port: u16, load: &Load, i: u64, timeout: Duration) -> Res<Value> {
    let i = (i % load.free.len() as u64) as usize;
    let start = call_within(port, "POST", "/api/call/start", &load.free[i], timeout)?;
    if start["action"] != "continue" {
        return Err(format!("call/start answered {start}"));
    }
    let done = call_within(
        port,
        "POST",
        "/api/call/complete",
        &load.complete(i, &start["call_id"]),
        timeout,
    )?;
    if done["action"] == "poll" {
        return Err(format!("call/complete paused: {done}"));
    }
    Ok(start["call_id"].clone())
}
