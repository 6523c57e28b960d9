//! The demo program (`scripts/demo_app.py`, which speaks the Python client's protocol) run
//! against the real server: pauses are resumed over REST while it runs, one with `modify`,
//! one after a REPL eval, and it must finish printing the modified call.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{deadline, Client, Server};

/// Starts the demo against `server`; its output goes to files of the server's directory.
pub(crate) fn demo(server: &Server, extra: &[&str]) -> Child {
    demo_on(server.port, &server.home, extra)
}

/// Starts the demo against the server on `port`, its output in files of `dir`.
pub(crate) fn demo_on(port: u16, dir: &Path, extra: &[&str]) -> Child {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/demo_app.py");
    let out = dir.join(format!("demo-out-{}.txt", extra.len()));
    let err = dir.join(format!("demo-err-{}.txt", extra.len()));
    Command::new("python3")
        .arg(script)
        .args(["--server", &format!("http://localhost:{port}")])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .expect("python3 must be installed to run the demo")
}

/// The demo's stdout and stderr so far (as started with `extra`).
pub(crate) fn output(server: &Server, extra: &[&str]) -> (String, String) {
    output_in(&server.home, extra)
}

/// [`output`] of a demo started with [`demo_on`] in `dir`.
pub(crate) fn output_in(dir: &Path, extra: &[&str]) -> (String, String) {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(format!("{name}-{}.txt", extra.len()))).unwrap_or_default()
    };
    (read("demo-out"), read("demo-err"))
}

/// What the server must show for the arguments of `summarize`, exactly as Python's repr (and
/// the documented forms: a dataclass repr, a plain instance from its attributes).
const SUMMARIZE_ARGS: [&str; 5] = [
    "{'k': [1, 2], 'name': 'x'}",
    "Point(x=1, y=2, label='p')",
    "Box(width=2, height=3)",
    "datetime.datetime(2024, 1, 2, 3, 4, 5)",
    "{1, 3}",
];

/// Resumes every pause until the demo exits: the first before-pause of `add` is modified, the
/// one of `summarize` is checked and skipped with a fake result, and the first pause is
/// inspected through a REPL eval first. Returns the demo's exit success.
fn drive(server: &Server, child: &mut Child, budget: Duration) -> bool {
    let c: Client = server.client();
    let until = Instant::now() + budget;
    let (mut modified, mut evaluated) = (false, false);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.success();
        }
        assert!(Instant::now() < until, "demo did not finish in {budget:?}");
        for p in c.get_ok("/api/paused")["paused"]
            .as_array()
            .unwrap()
            .clone()
        {
            let id = p["id"].as_str().unwrap();
            let cd = &p["call_data"];
            if !evaluated {
                evaluated = true;
                let session =
                    c.post_ok("/api/repl/start", &json!({"pause_id": id}))["session_id"].clone();
                let out = c.post_ok(
                    &format!("/api/repl/{}/eval", session.as_str().unwrap()),
                    &json!({"expr": "len(args)"}),
                );
                assert_eq!(out["is_error"], false, "{out}");
                assert!(
                    out["output"].as_str().unwrap().parse::<u32>().is_ok(),
                    "{out}"
                );
            }
            let before = cd.get("pretty_result").is_none() && cd.get("exception").is_none();
            let body: Value = if cd["method_name"] == "summarize" && before {
                assert_eq!(cd["pretty_args"], json!(SUMMARIZE_ARGS), "{cd}");
                json!({"action": "skip", "fake_result": {"a": [1, 2.5, null]}})
            } else if cd["method_name"] == "add" && before && !modified {
                modified = true;
                json!({"action": "modify", "modified_args": [10], "modified_kwargs": {"y": 20}})
            } else {
                json!({"action": "continue"})
            };
            let r = c.post(&format!("/api/paused/{id}/continue"), &body);
            assert!(
                r.status == 200 || r.status == 409,
                "{}",
                String::from_utf8_lossy(&r.body)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_demo_runs_to_completion_with_a_modified_call() {
    let server = Server::start(&[]);
    let mut child = demo(&server, &[]);
    let ok = drive(&server, &mut child, deadline() * 3);
    let (out, err) = output(&server, &[]);
    assert!(ok, "demo failed:\n{out}\n{err}");
    assert!(
        out.contains("add(10, y=20) -> 30"),
        "modified arguments were not used:\n{out}"
    );
    assert!(out.contains("greet('world') -> 'Hello, world!'"), "{out}");
    check_summarize(&server, &out);
    assert!(out.contains("ZeroDivisionError"), "{out}");
    let c = server.client();
    assert_eq!(
        c.get_ok("/api/call-records?function=pickle_error")["total_count"]
            .as_u64()
            .map(|n| n >= 1),
        Some(true)
    );
    assert_eq!(
        c.get_ok("/api/com-errors")["errors"],
        json!([]),
        "the demo reported no communication error"
    );
    assert_eq!(
        c.get_ok("/api/call-records?function=divide&status=exception")["total_count"],
        1
    );
}

#[test]
fn the_demo_runs_with_dill_like_the_real_client() {
    let server = Server::start(&[]);
    // Installs dill into .cache/python on first use (from PyPI).
    let mut child = demo(&server, &["--dill"]);
    let ok = drive(&server, &mut child, deadline() * 12);
    let (out, err) = output(&server, &["--dill"]);
    assert!(ok, "demo --dill failed:\n{out}\n{err}");
    assert!(out.contains("add(10, y=20) -> 30"), "{out}");
    check_summarize(&server, &out);
    assert_eq!(
        server.client().get_ok("/api/com-errors")["errors"],
        json!([])
    );
}

/// The skipped `summarize` call: the demo received the fake result, and its arguments render
/// the same in call records and object views.
fn check_summarize(server: &Server, out: &str) {
    assert!(
        out.contains("-> {'a': [1, 2.5, None]}"),
        "the fake result reached the demo:\n{out}"
    );
    let c = server.client();
    let rec = c.get_ok("/api/call-records?function=summarize")["calls"][0].clone();
    assert_eq!(rec["pretty_args"], json!(SUMMARIZE_ARGS));
    for (i, expected) in SUMMARIZE_ARGS.iter().enumerate() {
        let cid = rec["args"][i]["cid"].as_str().unwrap();
        let obj = c.get_ok(&format!("/api/objects/{cid}"));
        assert_eq!(obj["repr"], *expected, "{obj}");
        assert_eq!(obj["value"], *expected);
    }
}

/// A server started with `--port-file` elsewhere: the demo finds it with the same flag, and
/// without it says which port file it read and how to name the server.
#[test]
fn the_demo_finds_a_server_by_its_port_file_or_says_where_it_looked() {
    use crate::support::{binary, wait_for_port, TempDir};
    let home = TempDir::new("demo-port-file");
    let port_file = home.path().join("elsewhere").join("pf");
    let err_path = home.path().join("server.stderr");
    let mut child = Command::new(binary("cideldill-server"))
        .args(["--memory", "--port", "0", "--port-file"])
        .arg(&port_file)
        .env("CIDELDILL_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let port = wait_for_port(&mut child, &port_file, &err_path);
    let c = Client { port };
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/demo_app.py");
    let run = |args: &[&str]| {
        Command::new("python3")
            .arg(&script)
            .args(args)
            .env("CIDELDILL_HOME", home.path())
            .env_remove("CIDELDILL_SERVER_URL")
            .env_remove("CIDELDILL_PORT_FILE")
            .stdin(Stdio::null())
            .output()
            .expect("python3 must be installed to run the demo")
    };
    let found = run(&["--port-file", port_file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&found.stderr).into_owned()
        + &String::from_utf8_lossy(&found.stdout);
    assert!(found.status.success(), "{text}");
    assert!(
        text.contains(&format!("talking to http://localhost:{port}")),
        "{text}"
    );
    // Without the flag it reads $CIDELDILL_HOME/port, which this server did not write: one
    // left there names a port nobody listens on (not 5174, which another test may hold).
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let default = home.path().join("port");
    std::fs::write(&default, dead.to_string()).unwrap();
    let lost = run(&[]);
    let text = String::from_utf8_lossy(&lost.stderr).into_owned();
    assert!(!lost.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "Port file: {} (names port {dead})",
            default.display()
        )),
        "{text}"
    );
    assert!(text.contains("--port-file PATH"), "{text}");
    let _ = child.kill();
    let _ = child.wait();
}
