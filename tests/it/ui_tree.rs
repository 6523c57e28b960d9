//! The call-tree, call-stack and frame pages against the real binary: calls made over the wire
//! nest in the tree, frame pages show the files a call's own stack names (and nothing else:
//! no URL takes a path; directories, devices, FIFOs and huge files are not shown), and every
//! page carries the strict CSP.

use serde_json::{json, Value};

use crate::support::{
    call_start_body, complete_body, item, pause_id, Client, Resp, Server, TempDir,
};

const KEY: &str = "1795311683.721166+16759";
const KEY_URL: &str = "1795311683.721166%2B16759";

fn page(c: &Client, path: &str) -> Resp {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/html,*/*;q=0.8\r\nConnection: close\r\n\r\n",
        c.port
    );
    let r = c.raw(req.as_bytes());
    let csp = r
        .header("Content-Security-Policy")
        .unwrap_or_else(|| panic!("GET {path}: no CSP"));
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"));
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    r
}

fn html(c: &Client, path: &str) -> String {
    let r = page(c, path);
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 200, "GET {path}: {body}");
    body
}

fn not_found(c: &Client, path: &str) {
    let r = page(c, path);
    assert_eq!(
        r.status,
        404,
        "GET {path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    assert!(String::from_utf8_lossy(&r.body).contains("Not found"));
}

fn frame(file: &str, line: u64, function: &str) -> Value {
    json!({"filename": file, "lineno": line, "function": function, "code_context": "x = 1"})
}

/// Starts a call with this stack (innermost caller first) at client time `at`: its call id.
fn start(c: &Client, method: &str, at: f64, stack: Value) -> String {
    let mut body = call_start_body(method, vec![item(&json!(method), 2)], json!({}));
    body["call_site"] = json!({"timestamp": at, "stack_trace": stack});
    let answer = c.post_ok("/api/call/start", &body);
    assert_eq!(answer["action"], "continue", "{answer}");
    answer["call_id"].as_str().unwrap().to_owned()
}

fn finish(c: &Client, call_id: &str, at: f64) {
    let mut body = complete_body(call_id, &json!(42));
    body["timestamp"] = json!(at);
    c.post_ok("/api/call/complete", &body);
}

/// A call started and completed.
fn call(c: &Client, method: &str, at: f64, stack: Value) -> String {
    let id = start(c, method, at, stack);
    finish(c, &id, at + 0.5);
    id
}

#[test]
fn calls_made_over_the_wire_nest_in_the_call_tree() {
    let s = Server::start(&[]);
    let c = s.client();
    let main_py = "/home/me/main.py";
    let outer = start(&c, "outer", 100.0, json!([frame(main_py, 10, "<module>")]));
    let inner = start(
        &c,
        "inner",
        100.1,
        json!([
            frame("/home/me/lib.py", 3, "outer"),
            frame(main_py, 10, "<module>")
        ]),
    );
    let innermost = call(
        &c,
        "innermost",
        100.2,
        json!([
            frame("/home/me/lib.py", 7, "inner"),
            frame("/home/me/lib.py", 3, "outer"),
            frame(main_py, 10, "<module>")
        ]),
    );
    finish(&c, &inner, 100.3);
    finish(&c, &outer, 100.4);
    let sibling = call(
        &c,
        "sibling",
        101.0,
        json!([frame(main_py, 11, "<module>")]),
    );

    let list = html(&c, "/call-tree");
    assert!(
        list.contains(&format!("href=\"/call-tree/{KEY_URL}\"")),
        "{list}"
    );
    assert!(list.contains(KEY));
    assert!(
        list.contains("<td class=\"num\">4</td>"),
        "four records: {list}"
    );

    let tree = html(&c, &format!("/call-tree/{KEY_URL}?selected={inner}"));
    // The same page through the raw key.
    assert_eq!(page(&c, &format!("/call-tree/{KEY}")).status, 200);
    let pos = |name: &str| {
        tree.find(&format!("<span class=\"fn\">{name}</span>"))
            .unwrap_or_else(|| panic!("{name} in {tree}"))
    };
    let (o, i, m, sib) = (pos("outer"), pos("inner"), pos("innermost"), pos("sibling"));
    assert!(o < i && i < m && m < sib, "{tree}");
    // Each row is one level below its caller (the tree is a list of rows with their depth):
    // inner under outer, innermost under inner, and sibling a root again.
    let depth = |at: usize| {
        let li = tree[..at].rfind("<li class=\"d").expect("a row");
        tree[li + "<li class=\"d".len()..]
            .split('"')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        [depth(o), depth(i), depth(m), depth(sib)],
        ["0", "1", "2", "0"],
        "{tree}"
    );
    assert!(tree.contains("Called from"), "inner is a child of outer");
    // The program names the process, its key in a title.
    assert!(list.contains(">main.py</a>"), "{list}");
    // The details panel of the selected call.
    assert!(tree.contains("Called from"));
    assert!(tree.contains(&format!("href=\"/frame/call/{inner}/0#L3\"")));
    assert!(tree.contains("record 2 of 4 in time order"));
    assert!(tree.contains(&format!("selected={outer}\" rel=\"prev\"")));
    assert!(tree.contains(&format!("selected={innermost}\" rel=\"next\"")));
    assert!(tree.contains("href=\"/object/"));
    let _ = sibling;

    // The fragment the live update fetches holds the regions.
    let frag = html(&c, &format!("/call-tree/{KEY_URL}?fragment=1"));
    assert!(frag.starts_with("<div id=\"frag-status\">"));
    assert!(frag.contains("id=\"tree-nodes\""));

    not_found(&c, "/call-tree/0.000000%2B1");
    not_found(&c, &format!("/call-tree/{KEY_URL}/more"));
}

#[test]
fn frame_pages_read_only_the_files_the_call_stack_names() {
    let s = Server::start(&[]);
    let c = s.client();
    let dir = TempDir::new("frames");
    let app = dir.path().join("app.py");
    let lines: Vec<String> = (1..=40)
        .map(|n| format!("value_{n} = '<b>{n}</b>'"))
        .collect();
    std::fs::write(&app, lines.join("\n")).unwrap();
    let big = dir.path().join("big.py");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(3 * 1024 * 1024)
        .unwrap();
    let fifo = dir.path().join("fifo.py");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let id = call(
        &c,
        "f",
        5.0,
        json!([
            frame(&path(&app), 20, "f_caller"),
            frame("/dev/zero", 1, "zero"),
            frame(&path(dir.path()), 1, "dir"),
            frame(&path(&fifo), 1, "fifo"),
            frame(&path(&big), 1, "big"),
            frame("relative/app.py", 1, "relative"),
        ]),
    );

    let body = html(&c, &format!("/frame/call/{id}/0"));
    assert!(body.contains(
        "<span class=\"line hl\" id=\"L20\"><span class=\"n\">20</span>value_20 = <span class=\"ts\">&#39;&lt;b&gt;20&lt;/b&gt;&#39;</span></span>"
    ), "{body}");
    assert!(body.contains("id=\"L40\""), "the whole file");
    assert!(!body.contains("<b>"));

    // No URL names a path: neither a query nor extra segments nor an encoded path reach a file.
    let passwd = html(&c, &format!("/frame/call/{id}/0?file=/etc/passwd"));
    assert!(!passwd.contains("root:"), "{passwd}");
    for bad in [
        "/frame/source?file=/etc/passwd&line=1".to_owned(),
        format!("/frame/call/{id}/0/../../../../etc/passwd"),
        format!("/frame/call/{id}/%2Fetc%2Fpasswd"),
        "/frame/%2Fetc%2Fpasswd/0".to_owned(),
        format!("/frame/call/{id}/99"),
        format!("/frame/call/{id}/-1"),
        "/frame/call/no-such-call/0".to_owned(),
    ] {
        not_found(&c, &bad);
    }
    // A device, a directory, a FIFO, a relative path: not shown (and nothing blocks).
    for i in 1..=3 {
        not_found(&c, &format!("/frame/call/{id}/{i}"));
    }
    not_found(&c, &format!("/frame/call/{id}/5"));
    // A huge file: a notice instead of its content.
    let huge = html(&c, &format!("/frame/call/{id}/4"));
    assert!(huge.contains("larger than the 2 MiB shown"), "{huge}");

    // The call stack of the recorded call: each frame with its lines or why not.
    let stack = html(&c, &format!("/callstack/call/{id}"));
    assert!(stack.contains("<span class=\"line hl\" id=\"L20\">"));
    assert!(stack.contains("id=\"L15\"") && stack.contains("id=\"L25\""));
    assert!(!stack.contains("id=\"L26\""));
    assert!(stack.contains("Source not shown: not a regular file."));
    assert!(stack.contains(&format!("href=\"/frame/call/{id}/4#L1\"")));
    assert!(stack.contains(&format!("href=\"/call-tree/{KEY_URL}?selected={id}\"")));
    not_found(&c, "/callstack/call/no-such-call");
}

#[test]
fn the_call_stack_of_a_pause_is_linked_from_the_paused_page_and_gone_once_resumed() {
    let s = Server::start(&[]);
    let c = s.client();
    let dir = TempDir::new("pause");
    let app = dir.path().join("app.py");
    std::fs::write(&app, "def add(x):\n    return x\n\nadd(1)\n").unwrap();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let mut body = call_start_body("add", vec![item(&json!(1), 2)], json!({}));
    body["call_site"] = json!({"timestamp": 1.0, "stack_trace": [
        frame(&app.to_string_lossy(), 4, "<module>")
    ]});
    let answer = c.post_ok("/api/call/start", &body);
    let pause = pause_id(&answer);

    let home = html(&c, "/");
    assert!(
        home.contains(&format!("href=\"/callstack/{pause}\"")),
        "{home}"
    );
    assert!(home.contains("app.py:4 in &lt;module&gt;"));
    let stack = html(&c, &format!("/callstack/{pause}"));
    assert!(
        stack.contains(
            "<span class=\"line hl\" id=\"L4\"><span class=\"n\">4</span>add(<span class=\"tn\">1</span>)</span>"
        ),
        "{stack}"
    );
    assert!(stack.contains(&format!("href=\"/frame/{pause}/0#L4\"")));
    let file = html(&c, &format!("/frame/{pause}/0"));
    assert!(file.contains("<span class=\"tk\">return</span> x"));

    c.post_ok(
        &format!("/api/paused/{pause}/continue"),
        &json!({"action": "continue"}),
    );
    not_found(&c, &format!("/callstack/{pause}"));
    not_found(&c, &format!("/frame/{pause}/0"));
    not_found(&c, "/callstack/00000000-0000-4000-8000-000000000000");
    // The navigation names the call tree on every page.
    assert!(html(&c, "/").contains("<a href=\"/call-tree\">Call tree</a>"));
}

/// A process with more calls than a window: the page shows a window with links to the later
/// part, folds a node by its address, and hides the client's own events with their count.
#[test]
fn a_large_call_tree_is_shown_a_window_at_a_time() {
    let s = Server::start(&[]);
    let c = s.client();
    let main_py = "/home/me/batch.py";
    let root = start(&c, "root", 100.0, json!([frame(main_py, 10, "<module>")]));
    let kids: Vec<String> = (0..260)
        .map(|i| {
            call(
                &c,
                "step",
                100.0 + f64::from(i) * 0.001,
                json!([frame(main_py, 4, "root"), frame(main_py, 10, "<module>")]),
            )
        })
        .collect();
    finish(&c, &root, 200.0);
    c.post_ok(
        "/api/call/event",
        &json!({"method_name": "with_debug.register", "status": "registered",
                "timestamp": 201.0, "process_pid": 16759,
                "process_start_time": 1795311683.721166, "event_id": "ev-register",
                "call_site": {"stack_trace": []}}),
    );
    let base = format!("/call-tree/{KEY_URL}");
    let rows = |html: &str| html.matches("<li class=\"d").count();
    let first = html(&c, &base);
    assert_eq!(rows(&first), 200, "one window");
    assert!(first.contains("rows 1–200 of 261"), "{first}");
    assert!(first.contains("1 client event hidden"));
    assert!(!first.contains("with_debug.register"));
    // The later part, through the link the page gives.
    let later = first
        .split("data-page=\"later\" href=\"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .expect("a link to the later rows")
        .replace("&amp;", "&");
    let second = html(&c, &later);
    assert_eq!(rows(&second), 61);
    assert!(second.contains("rows 201–261 of 261"), "{second}");
    assert!(
        second.contains("<p class=\"inside\">Inside"),
        "starts inside root"
    );
    assert!(second.contains(&kids[259]));
    // Folding the root leaves one row.
    let fold = first
        .split("<a class=\"twist\" data-swap href=\"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .expect("a fold link")
        .replace("&amp;", "&");
    let folded = html(&c, &fold);
    assert_eq!(rows(&folded), 1, "{folded}");
    assert!(folded.contains("aria-expanded=\"false\""));
    // The selected call's window holds it, and its fragment holds the four regions.
    let frag = html(&c, &format!("{base}?selected={}&fragment=1", kids[240]));
    for id in ["tree-meta", "tree-stepper", "tree-nodes", "tree-details"] {
        assert!(frag.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(frag.contains(&format!("selected={}\" aria-current", kids[240])));
    // Shown when asked, as the client's.
    let shown = html(&c, &format!("{base}?events=show&selected=ev-register"));
    assert!(shown.contains("<span class=\"badge client\">client</span>"));
}
