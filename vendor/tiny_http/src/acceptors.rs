//! Handler mode (`Server::from_listener_with` with a handler): threads that accept
//! connections themselves and answer each connection's requests on the thread that accepted
//! it, with no hand-off. The last idle acceptor starts another before it serves a connection,
//! so a connection never waits behind another; beyond `MAX_IDLE` idle ones, the extra end.

use std::io::ErrorKind;
use std::panic;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::client::ClientConnection;
use crate::connection::{ConnCtl, Listener};
use crate::util::RefinedTcpStream;
use crate::{refuse_busy, Handler, Limits, ACCEPT_BACKOFF};

/// Acceptors kept waiting in `accept` when the server is quiet (enough that a busy server
/// rarely starts a thread before it serves a connection; an idle one costs a few KiB).
const MAX_IDLE: usize = 32;

pub(crate) struct Acceptors {
    listener: Listener,
    limits: Limits,
    handler: Handler,
    close: Arc<AtomicBool>,
    /// Threads waiting in `accept` (read by `Server::drop` to wake them all).
    pub(crate) idle: AtomicUsize,
    /// Connections open.
    live: AtomicUsize,
    /// When an accept error or a refusal was last logged.
    warned: std::sync::Mutex<Option<Instant>>,
}

pub(crate) fn start(
    listener: Listener,
    limits: Limits,
    handler: Handler,
    close: Arc<AtomicBool>,
) -> std::io::Result<Arc<Acceptors>> {
    let acceptors = Arc::new(Acceptors {
        listener,
        limits,
        handler,
        close,
        idle: AtomicUsize::new(0),
        live: AtomicUsize::new(0),
        warned: std::sync::Mutex::new(None),
    });
    for _ in 0..2 {
        spawn(&acceptors)?;
    }
    Ok(acceptors)
}

fn spawn(acceptors: &Arc<Acceptors>) -> std::io::Result<()> {
    acceptors.idle.fetch_add(1, SeqCst);
    let me = Arc::clone(acceptors);
    let spawned = thread::Builder::new()
        .name("http-conn".into())
        .spawn(move || run(&me));
    if spawned.is_err() {
        acceptors.idle.fetch_sub(1, SeqCst);
    }
    spawned.map(|_| ())
}

impl Acceptors {
    /// Whether to log now (once a second at most).
    fn warn_now(&self) -> bool {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        let now = warned.map_or(true, |at| at.elapsed() >= Duration::from_secs(1));
        if now {
            *warned = Some(Instant::now());
        }
        now
    }
}

fn run(a: &Arc<Acceptors>) {
    loop {
        let accepted = a.listener.accept();
        let idle_now = a.idle.fetch_sub(1, SeqCst) - 1;
        if a.close.load(SeqCst) {
            break;
        }
        if idle_now == 0 {
            // Keep one thread in `accept` while this one serves.
            if let Err(e) = spawn(a) {
                if a.warn_now() {
                    log::error!("Could not start a thread to accept connections: {}", e);
                }
            }
        }
        match accepted {
            Ok((sock, from)) => {
                let over = a
                    .limits
                    .max_connections
                    .map_or(false, |max| a.live.load(SeqCst) >= max);
                if over {
                    if a.warn_now() {
                        log::warn!(
                            "refused a connection: {} are open (the most allowed)",
                            a.live.load(SeqCst)
                        );
                    }
                    refuse_busy(sock, &a.limits);
                } else {
                    a.live.fetch_add(1, SeqCst);
                    serve(a, sock, from);
                    a.live.fetch_sub(1, SeqCst);
                }
            }
            Err(e) => {
                if !matches!(
                    e.kind(),
                    ErrorKind::ConnectionAborted | ErrorKind::Interrupted
                ) {
                    if a.warn_now() {
                        log::error!("Error accepting new client: {}", e);
                    }
                    thread::sleep(ACCEPT_BACKOFF);
                }
            }
        }
        if a.close.load(SeqCst) || a.idle.load(SeqCst) >= MAX_IDLE {
            break;
        }
        a.idle.fetch_add(1, SeqCst);
    }
}

fn serve(a: &Acceptors, sock: crate::connection::Connection, from: Option<std::net::SocketAddr>) {
    let ctl = match sock.try_clone() {
        Ok(clone) => Arc::new(ConnCtl::new(clone)),
        Err(e) => {
            log::error!("Error accepting new client: {}", e);
            return;
        }
    };
    let (read, write) = RefinedTcpStream::new(sock);
    let client = ClientConnection::new(write, read, ctl, a.limits.clone(), from);
    for rq in client {
        let answered = panic::catch_unwind(panic::AssertUnwindSafe(|| (a.handler)(rq)));
        if answered.is_err() {
            log::error!("A request handler panicked");
            break;
        }
    }
}
