//! Path traversal on every path parameter (and the query values) of every endpoint: the route
//! table, the web UI pages, the MCP endpoints, and the MCP `breakpoint://` resources and object
//! tool. The server runs in a directory three levels below a file holding a random secret; each
//! parameter in turn gets `../` sequences in their plain, percent-encoded, double-encoded,
//! overlong-UTF-8 and backslash forms, and absolute paths to the secret and to `/etc/passwd`.
//! No answer may contain the secret or `/etc/passwd`'s first line, nor be a 5xx.
//!
//! The oracle can see a file read: the source view of a call's own stack frame (the one file
//! the server may read, see `src/ui/source.rs`) shows a marker from the program's file, and the
//! test checks that it does.

use std::path::Path;

use serde_json::json;

use crate::harness::{exchange, home, request_bytes, McpHttp, Outcome, Proc};
use crate::routes::{encode, endpoints, new_panics};
use crate::support::{call_start_body, complete_body, item, pause_id};

/// The forms of `../../../secret.txt` and friends, as they go into a URL (already encoded
/// where they should be).
fn payloads(secret: &Path) -> Vec<String> {
    let abs = secret.to_str().expect("a UTF-8 temporary path");
    let mut out: Vec<String> = [
        "..",
        "../../../secret.txt",
        "..%2f..%2f..%2fsecret.txt",
        "..%2F..%2F..%2Fsecret.txt",
        "%2e%2e%2f%2e%2e%2f%2e%2e%2fsecret.txt",
        "%2e%2e/%2e%2e/%2e%2e/secret.txt",
        "..%252f..%252f..%252fsecret.txt",
        "%c0%ae%c0%ae%c0%af%c0%ae%c0%ae%c0%afsecret.txt",
        "....//....//....//secret.txt",
        "..%5c..%5c..%5csecret.txt",
        "..\\..\\..\\secret.txt",
        "secret.txt",
        "secret.txt%00.py",
        "%00",
        "~%2f.bashrc",
        "..%2f..%2f..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        "%2fetc%2fpasswd",
        "file%3a%2f%2f%2fetc%2fpasswd",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    out.push(encode(abs));
    out.push(abs.trim_start_matches('/').replace('/', "%2f"));
    out
}

/// What must never appear in an answer.
struct Secrets {
    secret: String,
    passwd: Option<String>,
}

impl Secrets {
    fn leaked(&self, body: &[u8]) -> Option<&str> {
        let text = String::from_utf8_lossy(body);
        if text.contains(&self.secret) {
            return Some("the secret file");
        }
        match &self.passwd {
            Some(line) if text.contains(line.as_str()) => Some("/etc/passwd"),
            _ => None,
        }
    }
}

#[test]
fn traversal_in_any_path_parameter_never_reads_a_file() {
    let dir = home("traversal");
    let root = dir.path();
    let secret_path = root.join("secret.txt");
    let secret = format!(
        "cideldill-traversal-secret-{:x}",
        std::process::id() as u64 * 2_654_435_761
    );
    std::fs::write(&secret_path, &secret).unwrap();
    let cwd = root.join("a/b/c");
    std::fs::create_dir_all(&cwd).unwrap();
    // The program's own file, which its stack trace names: the one file the server may show.
    let app = root.join("app.py");
    std::fs::write(&app, "def add(x):\n    return x  # APP-SOURCE-MARKER\n").unwrap();
    let secrets = Secrets {
        secret: secret.clone(),
        passwd: std::fs::read_to_string("/etc/passwd")
            .ok()
            .and_then(|t| t.lines().next().map(str::to_owned))
            .filter(|l| l.len() > 8),
    };

    let server = Proc::start_in(root, &["--memory", "--mcp-sse"], "warn", Some(&cwd));
    let port = server.port;
    let c = server.client();
    // State for the ids: a breakpoint, a paused call and a recorded call, whose stack names
    // app.py.
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let mut body = call_start_body("add", vec![item(&json!(1), 2)], json!({}));
    body["call_site"]["stack_trace"] = json!([{"filename": app.to_str().unwrap(), "lineno": 2, "function": "add", "code_context": "return x"}]);
    let paused = c.post_ok("/api/call/start", &body);
    let pause = pause_id(&paused);
    let done = c.post_ok("/api/call/start", &body);
    let done_pause = pause_id(&done);
    c.post_ok(
        &format!("/api/paused/{done_pause}/continue"),
        &json!({"action": "continue"}),
    );
    let call_id = done["call_id"].as_str().unwrap().to_owned();
    c.post_ok("/api/call/complete", &complete_body(&call_id, &json!(1)));
    let cid = item(&json!(1), 2)["cid"].as_str().unwrap().to_owned();

    // The oracle sees a file when the server shows one.
    let frame = c.get(&format!("/frame/call/{}/0", encode(&call_id)));
    assert_eq!(
        frame.status,
        200,
        "{}",
        String::from_utf8_lossy(&frame.body)
    );
    assert!(
        String::from_utf8_lossy(&frame.body).contains("APP-SOURCE-MARKER"),
        "the frame view does not show the program's own file, so this test could not see a read"
    );

    let valid = |name: &str| -> String {
        match name {
            "{pause_id}" => pause.clone(),
            "{call_id}" => encode(&call_id),
            "{cid}" => cid.clone(),
            "{index}" => "0".into(),
            "{name}" => "add".into(),
            _ => "x".into(),
        }
    };
    let payloads = payloads(&secret_path);
    let mut findings = Vec::new();
    let mut sent = 0;
    // HTTP: `check` holds the findings until the end of this block.
    {
        let mut check = |method: &str, target: &str, body: &[u8], what: String| {
            let headers = [("Content-Type".to_owned(), "application/json".to_owned())];
            sent += 1;
            match exchange(
                port,
                &request_bytes(port, method, target, &headers, body),
                crate::harness::LIVENESS,
                false,
            ) {
                Outcome::Answered(x) => {
                    if let Some(leak) = secrets.leaked(&x.body) {
                        findings.push(format!("{what}: {method} {target} answered {leak}"));
                    }
                    if x.status >= 500 {
                        findings.push(format!("{what}: {method} {target} -> {}", x.status));
                    }
                }
                other => findings.push(format!("{what}: {method} {target}: {other:?}")),
            }
        };
        for ep in endpoints() {
            let params: Vec<&str> = ep.path.split('/').filter(|s| s.starts_with('{')).collect();
            let body = if ep.method == "POST" {
                b"{}".to_vec()
            } else {
                Vec::new()
            };
            // Each parameter in turn, the others valid.
            for (k, _) in params.iter().enumerate() {
                for p in &payloads {
                    let mut i = 0;
                    let path: Vec<String> = ep
                        .path
                        .split('/')
                        .map(|seg| {
                            if seg.starts_with('{') {
                                i += 1;
                                if i - 1 == k {
                                    p.clone()
                                } else {
                                    valid(seg)
                                }
                            } else {
                                seg.to_owned()
                            }
                        })
                        .collect();
                    check(
                        ep.method,
                        &path.join("/"),
                        &body,
                        format!("{} {} param {k}", ep.method, ep.path),
                    );
                }
            }
            // Every query parameter.
            let concrete: String = ep
                .path
                .split('/')
                .map(|seg| {
                    if seg.starts_with('{') {
                        valid(seg)
                    } else {
                        seg.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            for q in &ep.query {
                for p in payloads.iter().step_by(3) {
                    check(
                        ep.method,
                        &format!("{concrete}?{q}={p}"),
                        &body,
                        format!("{} {} ?{q}", ep.method, ep.path),
                    );
                }
            }
        }
        // Traversal in the path itself, outside any parameter.
        for raw in [
            "/../../../secret.txt",
            "/ui/../../../secret.txt",
            "/ui/..%2f..%2f..%2fsecret.txt",
            "/api/../../../secret.txt",
            "/%2e%2e/%2e%2e/%2e%2e/secret.txt",
            "/frame/../../secret.txt",
            "/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
            "/ui/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        ] {
            check("GET", raw, b"", "the whole path".into());
        }
        // Stack frames that name the secret are the program's to give; frame indexes are not paths.
        for i in [
            "-1",
            "1",
            "99999999999999999999",
            "0x0",
            "0%2f..%2f..%2fsecret.txt",
            "..",
            "%2e",
        ] {
            check(
                "GET",
                &format!("/frame/{pause}/{i}"),
                b"",
                "a frame index".into(),
            );
            check(
                "GET",
                &format!("/frame/call/{}/{i}", encode(&call_id)),
                b"",
                "a frame index".into(),
            );
        }
    }

    // MCP: resources and the object tool with traversal in their ids.
    let mcp = McpHttp::open(port).expect("an MCP session");
    for p in &payloads {
        let raw = p.replace("%2f", "/").replace("%2F", "/");
        for uri in [
            format!("breakpoint://object/{raw}"),
            format!("breakpoint://call/{raw}"),
            format!("breakpoint://paused/{raw}"),
            format!("breakpoint://{raw}"),
            format!("file://{}", secret_path.display()),
        ] {
            let r = mcp
                .request("resources/read", json!({"uri": uri}))
                .expect("an answer");
            sent += 1;
            if let Some(leak) = secrets.leaked(r.to_string().as_bytes()) {
                findings.push(format!("resources/read {uri} answered {leak}"));
            }
        }
        let r = mcp
            .request(
                "tools/call",
                json!({"name": "breakpoint_inspect_object", "arguments": {"cid": raw}}),
            )
            .expect("an answer");
        sent += 1;
        if let Some(leak) = secrets.leaked(r.to_string().as_bytes()) {
            findings.push(format!("breakpoint_inspect_object {raw} answered {leak}"));
        }
    }
    eprintln!("traversal: {sent} requests");
    let panics = new_panics(&server.stderr());
    assert!(
        findings.is_empty() && panics.is_empty(),
        "{} findings:\n{}\npanics:\n{}",
        findings.len(),
        findings.join("\n"),
        panics.join("\n")
    );
}
