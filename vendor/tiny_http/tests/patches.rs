//! The defects the patches of this copy fix, each reproduced against a real server on a
//! loopback port (see PATCHES.md). Every wait has a deadline.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tiny_http::{Handler, Header, Limits, Response, Server};

const WAIT: Duration = Duration::from_secs(10);

struct Running {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    _server: Server,
}

/// A server answering every request with 200 "ok" (and `Connection: close` for paths starting
/// with `/close`) without reading its body, unless the path starts with `/read`.
fn serve(limits: Limits) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let handler: Handler = Arc::new(move |mut rq: tiny_http::Request| {
        log.lock().unwrap().push(rq.url().to_owned());
        if rq.url().starts_with("/read") {
            let mut body = Vec::new();
            let _ = rq.as_reader().read_to_end(&mut body);
        }
        if rq.url().starts_with("/stream") {
            // An answer written later by another thread, which closes the connection.
            rq.close_connection();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(200));
                let mut w = rq.into_writer();
                let _ = w.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nstreamed");
            });
            return;
        }
        if rq.url().starts_with("/slow") {
            thread::sleep(Duration::from_millis(300));
        }
        let mut response = Response::from_string("ok");
        if rq.url().starts_with("/close") {
            response.add_header(Header::from_bytes("Connection", "close").unwrap());
        }
        let late = rq.url().starts_with("/late");
        let _ = rq.respond(response);
        if late {
            // Work after the answer (logging, say).
            thread::sleep(Duration::from_millis(600));
        }
    });
    let server = Server::from_listener_with(listener, None, limits, Some(handler)).unwrap();
    Running {
        port,
        seen,
        _server: server,
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s
}

/// Everything the server sends until it closes the connection (or the deadline).
fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let until = Instant::now() + WAIT;
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => panic!(
                "no end of the connection: {e}; read {:?}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn statuses(text: &str) -> Vec<&str> {
    text.match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .collect()
}

#[test]
fn a_space_before_a_colon_gets_one_400_and_no_second_request() {
    let server = serve(Limits::default());
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut s = connect(server.port);
    write!(
        s,
        "POST /api/behavior HTTP/1.1\r\nHost: x\r\nContent-Length : {}\r\n\r\n{}",
        smuggled.len(),
        smuggled
    )
    .unwrap();
    let answer = read_all(&mut s);
    assert_eq!(statuses(&answer), vec!["400"], "{}", answer);
    assert!(server.seen.lock().unwrap().is_empty());
}

#[test]
fn ambiguous_framing_gets_one_400_and_no_second_request() {
    let server = serve(Limits::default());
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    for framing in [
        "Content-Length: 4\r\nTransfer-Encoding: chunked".to_string(),
        format!("Content-Length: 0\r\nContent-Length: {}", smuggled.len()),
        "Transfer-Encoding: identity".to_string(),
        format!("Content-Length: -{}", smuggled.len()),
    ] {
        let mut s = connect(server.port);
        write!(
            s,
            "POST /x HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n0\r\n\r\n{smuggled}"
        )
        .unwrap();
        let answer = read_all(&mut s);
        assert_eq!(statuses(&answer), vec!["400"], "{}: {}", framing, answer);
    }
    assert!(server.seen.lock().unwrap().is_empty());
}

#[test]
fn a_head_over_the_limit_gets_431_without_being_read_to_its_end() {
    let server = serve(Limits {
        max_head_bytes: 1024,
        ..Limits::default()
    });
    let mut s = connect(server.port);
    let mut writer = s.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let _ = writer.write_all(b"GET / HTTP/1.1\r\nX-Big: ");
        let _ = writer.write_all(&vec![b'a'; 4 << 20]);
    });
    let answer = read_all(&mut s);
    assert_eq!(statuses(&answer), vec!["431"], "{}", answer);
    drop(s);
    sender.join().unwrap();
    // A head within the limit is served.
    let mut s = connect(server.port);
    s.write_all(b"GET /fine HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(statuses(&read_all(&mut s)), vec!["200"]);
}

#[test]
fn an_idle_connection_is_closed_and_a_slow_head_gets_408() {
    let server = serve(Limits {
        idle_timeout: Some(Duration::from_millis(300)),
        head_timeout: Some(Duration::from_millis(300)),
        ..Limits::default()
    });
    let started = Instant::now();
    let mut idle = connect(server.port);
    assert_eq!(read_all(&mut idle), "");
    assert!(started.elapsed() < Duration::from_secs(5));
    let mut slow = connect(server.port);
    slow.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    thread::sleep(Duration::from_millis(100));
    let _ = slow.write_all(b"Host: x\r\n");
    assert_eq!(statuses(&read_all(&mut slow)), vec!["408"]);
}

#[test]
fn a_huge_declared_body_left_unread_is_neither_allocated_nor_read() {
    let server = serve(Limits::default());
    for _ in 0..3 {
        let mut s = connect(server.port);
        // Upstream drained the rest on drop through `vec![0; remaining]`: 1 TiB.
        s.write_all(b"POST /close HTTP/1.1\r\nContent-Length: 1099511627776\r\n\r\n")
            .unwrap();
        let answer = read_all(&mut s);
        assert_eq!(statuses(&answer), vec!["200"], "{}", answer);
        assert!(answer.contains("Connection: close"), "{}", answer);
        // Without the close: a body too long to drain also ends the connection.
        let mut s = connect(server.port);
        s.write_all(b"POST /x HTTP/1.1\r\nContent-Length: 1099511627776\r\n\r\n")
            .unwrap();
        s.write_all(&vec![b'x'; 200 * 1024]).unwrap();
        let answer = read_all(&mut s);
        assert_eq!(statuses(&answer), vec!["200"], "{}", answer);
    }
}

#[test]
fn a_short_unread_body_keeps_the_connection_and_a_chunked_one_is_no_request() {
    let server = serve(Limits::default());
    let mut s = connect(server.port);
    s.write_all(b"POST /x HTTP/1.1\r\nContent-Length: 3000\r\n\r\n")
        .unwrap();
    s.write_all(&vec![b'x'; 3000]).unwrap();
    s.write_all(b"GET /second HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(statuses(&read_all(&mut s)), vec!["200", "200"]);
    // A chunked body whose data reads as a request, left unread past the drain limit.
    let mut s = connect(server.port);
    let inner = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4000);
    write!(
        s,
        "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
        inner.len(),
        inner
    )
    .unwrap();
    assert_eq!(statuses(&read_all(&mut s)), vec!["200"]);
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen, vec!["/x", "/second", "/x"]);
}

#[test]
fn connections_over_the_cap_get_503() {
    let server = serve(Limits {
        max_connections: Some(2),
        ..Limits::default()
    });
    let mut held: Vec<TcpStream> = Vec::new();
    for _ in 0..2 {
        let mut s = connect(server.port);
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        held.push(s);
    }
    let mut third = connect(server.port);
    let _ = third.write_all(b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(statuses(&read_all(&mut third)), vec!["503"]);
    drop(held);
    let until = Instant::now() + WAIT;
    loop {
        let mut s = connect(server.port);
        let _ = s.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
        if statuses(&read_all(&mut s)) == vec!["200"] {
            break;
        }
        assert!(
            Instant::now() < until,
            "never served again after the held ones closed"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn no_connection_waits_behind_idle_kept_alive_ones() {
    // Upstream's pool queued a connection for a thread counted idle that had just been given
    // another: the race shows on some fresh servers, so several are tried.
    for round in 0..6 {
        let server = serve(Limits::default());
        let conns: Vec<TcpStream> = (0..20).map(|_| connect(server.port)).collect();
        thread::sleep(Duration::from_millis(100));
        for mut s in &conns {
            s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        }
        for (i, mut s) in conns.iter().enumerate() {
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut buf = [0u8; 256];
            let n = s.read(&mut buf).unwrap_or(0);
            assert!(
                String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
                "round {}: connection {} unanswered",
                round,
                i
            );
        }
    }
}

#[test]
fn answers_on_a_kept_alive_connection_are_not_delayed() {
    // Nagle's algorithm held the second write of an answer (head, then body) until the
    // client's delayed acknowledgement: about 40 ms per request.
    let server = serve(Limits::default());
    let mut s = connect(server.port);
    let started = Instant::now();
    for _ in 0..20 {
        s.write_all(b"GET /y HTTP/1.1\r\n\r\n").unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).ends_with("ok"));
    }
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "20 requests took {:?}",
        started.elapsed()
    );
}

#[test]
fn no_connection_waits_behind_idle_kept_alive_ones_in_queue_mode() {
    // The same through the thread pool that hands connections to threads calling `recv`.
    for round in 0..6 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server =
            Arc::new(Server::from_listener_with(listener, None, Limits::default(), None).unwrap());
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let server = Arc::clone(&server);
                thread::spawn(move || {
                    while let Ok(rq) = server.recv() {
                        let _ = rq.respond(Response::from_string("ok"));
                    }
                })
            })
            .collect();
        let conns: Vec<TcpStream> = (0..20).map(|_| connect(port)).collect();
        thread::sleep(Duration::from_millis(100));
        for mut s in &conns {
            s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        }
        for (i, mut s) in conns.iter().enumerate() {
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut buf = [0u8; 256];
            let n = s.read(&mut buf).unwrap_or(0);
            assert!(
                String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
                "round {}: connection {} unanswered",
                round,
                i
            );
        }
        for _ in 0..workers.len() {
            server.unblock();
        }
        for w in workers {
            w.join().unwrap();
        }
    }
}

#[test]
fn an_answer_written_by_another_thread_is_not_cut_by_the_close() {
    let server = serve(Limits::default());
    let mut s = connect(server.port);
    s.write_all(b"GET /stream HTTP/1.1\r\n\r\n").unwrap();
    let answer = read_all(&mut s);
    assert!(answer.ends_with("streamed"), "{}", answer);
}

#[test]
fn the_last_answer_ends_the_connection_at_once() {
    // A client that sent `Connection: close` and reads to the end of the connection had its
    // answer only once the serving thread got to closing the socket.
    let server = serve(Limits::default());
    let mut s = connect(server.port);
    let started = Instant::now();
    s.write_all(b"GET /late HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = read_all(&mut s);
    let took = started.elapsed();
    assert!(answer.ends_with("ok"), "{}", answer);
    assert!(
        took < Duration::from_millis(400),
        "the end came after {:?}",
        took
    );
}
