//! Abstractions of Tcp and Unix socket types

#[cfg(unix)]
use std::os::unix::net as unix_net;
use std::{
    net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs},
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    sync::Arc,
    time::Duration,
};

/// Unified listener. Either a [`TcpListener`] or [`std::os::unix::net::UnixListener`]
pub enum Listener {
    Tcp(TcpListener),
    #[cfg(unix)]
    Unix(unix_net::UnixListener),
}
impl Listener {
    pub(crate) fn local_addr(&self) -> std::io::Result<ListenAddr> {
        match self {
            Self::Tcp(l) => l.local_addr().map(ListenAddr::from),
            #[cfg(unix)]
            Self::Unix(l) => l.local_addr().map(ListenAddr::from),
        }
    }

    pub(crate) fn accept(&self) -> std::io::Result<(Connection, Option<SocketAddr>)> {
        match self {
            Self::Tcp(l) => l
                .accept()
                .map(|(conn, addr)| (Connection::from(conn), Some(addr))),
            #[cfg(unix)]
            Self::Unix(l) => l.accept().map(|(conn, _)| (Connection::from(conn), None)),
        }
    }
}
impl From<TcpListener> for Listener {
    fn from(s: TcpListener) -> Self {
        Self::Tcp(s)
    }
}
#[cfg(unix)]
impl From<unix_net::UnixListener> for Listener {
    fn from(s: unix_net::UnixListener) -> Self {
        Self::Unix(s)
    }
}

/// Unified connection. Either a [`TcpStream`] or [`std::os::unix::net::UnixStream`].
/// A connection's socket, shared by its halves (cloning it is no system call; the socket
/// closes when the last clone is dropped).
#[derive(Debug)]
pub(crate) enum Connection {
    Tcp(Arc<TcpStream>),
    #[cfg(unix)]
    Unix(Arc<unix_net::UnixStream>),
}
impl std::io::Read for Connection {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Tcp(s) => (&**s).read(buf),
            #[cfg(unix)]
            Self::Unix(s) => (&**s).read(buf),
        }
    }
}
impl std::io::Write for Connection {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Tcp(s) => (&**s).write(buf),
            #[cfg(unix)]
            Self::Unix(s) => (&**s).write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => (&**s).flush(),
            #[cfg(unix)]
            Self::Unix(s) => (&**s).flush(),
        }
    }
}
impl Connection {
    /// Gets the peer's address. Some for TCP, None for Unix sockets.
    pub(crate) fn peer_addr(&mut self) -> std::io::Result<Option<SocketAddr>> {
        match self {
            Self::Tcp(s) => s.peer_addr().map(Some),
            #[cfg(unix)]
            Self::Unix(_) => Ok(None),
        }
    }

    pub(crate) fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.shutdown(how),
            #[cfg(unix)]
            Self::Unix(s) => s.shutdown(how),
        }
    }

    pub(crate) fn try_clone(&self) -> std::io::Result<Self> {
        match self {
            Self::Tcp(s) => Ok(Self::Tcp(Arc::clone(s))),
            #[cfg(unix)]
            Self::Unix(s) => Ok(Self::Unix(Arc::clone(s))),
        }
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(timeout),
            #[cfg(unix)]
            Self::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_write_timeout(timeout),
            #[cfg(unix)]
            Self::Unix(s) => s.set_write_timeout(timeout),
        }
    }

    pub(crate) fn set_nonblocking(&self) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_nonblocking(true),
            #[cfg(unix)]
            Self::Unix(s) => s.set_nonblocking(true),
        }
    }

    /// Small answers go out at once (no Nagle delay behind the client's delayed ACK).
    pub(crate) fn set_nodelay(&self) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_nodelay(true),
            #[cfg(unix)]
            Self::Unix(_) => Ok(()),
        }
    }
}

/// What a connection's requests share with the thread reading it: the socket (for timeouts
/// and the lingering close) and whether the connection ends after the current answer (a
/// response sent with `Connection: close`, or a request body left unread).
#[derive(Debug)]
pub(crate) struct ConnCtl {
    stream: Connection,
    closing: AtomicBool,
    // the request being answered is the connection's last (`Connection: close`, HTTP/1.0)
    last: AtomicBool,
    // the end of the answers was sent (FIN)
    ended: AtomicBool,
}

impl ConnCtl {
    pub(crate) fn new(stream: Connection) -> ConnCtl {
        ConnCtl {
            stream,
            closing: AtomicBool::new(false),
            last: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        }
    }

    /// The request being answered is the last one the client sends.
    pub(crate) fn mark_last(&self) {
        self.last.store(true, Ordering::SeqCst);
    }

    /// Whether no answer follows the one being written.
    pub(crate) fn answer_is_last(&self) -> bool {
        self.last.load(Ordering::SeqCst) || self.closing.load(Ordering::SeqCst)
    }

    /// Sends the end of the answers (once): a client that reads to the end of the connection
    /// has its answer at once, not when the thread serving it gets to closing the socket.
    pub(crate) fn end_answers(&self) {
        if !self.ended.swap(true, Ordering::SeqCst) {
            let _ = self.stream.shutdown(Shutdown::Write);
        }
    }

    pub(crate) fn stream(&self) -> &Connection {
        &self.stream
    }

    /// No request after the current one is read from this connection.
    pub(crate) fn close_after_answer(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}
impl From<TcpStream> for Connection {
    fn from(s: TcpStream) -> Self {
        Self::Tcp(Arc::new(s))
    }
}
#[cfg(unix)]
impl From<unix_net::UnixStream> for Connection {
    fn from(s: unix_net::UnixStream) -> Self {
        Self::Unix(Arc::new(s))
    }
}

#[derive(Debug, Clone)]
pub enum ConfigListenAddr {
    IP(Vec<SocketAddr>),
    #[cfg(unix)]
    // TODO: use SocketAddr when bind_addr is stabilized
    Unix(std::path::PathBuf),
}
impl ConfigListenAddr {
    pub fn from_socket_addrs<A: ToSocketAddrs>(addrs: A) -> std::io::Result<Self> {
        addrs.to_socket_addrs().map(|it| Self::IP(it.collect()))
    }

    #[cfg(unix)]
    pub fn unix_from_path<P: Into<PathBuf>>(path: P) -> Self {
        Self::Unix(path.into())
    }

    pub(crate) fn bind(&self) -> std::io::Result<Listener> {
        match self {
            Self::IP(a) => TcpListener::bind(a.as_slice()).map(Listener::from),
            #[cfg(unix)]
            Self::Unix(a) => unix_net::UnixListener::bind(a).map(Listener::from),
        }
    }
}

/// Unified listen socket address. Either a [`SocketAddr`] or [`std::os::unix::net::SocketAddr`].
#[derive(Debug, Clone)]
pub enum ListenAddr {
    IP(SocketAddr),
    #[cfg(unix)]
    Unix(unix_net::SocketAddr),
}
impl ListenAddr {
    pub fn to_ip(self) -> Option<SocketAddr> {
        match self {
            Self::IP(s) => Some(s),
            #[cfg(unix)]
            Self::Unix(_) => None,
        }
    }

    /// Gets the Unix socket address.
    ///
    /// This is also available on non-Unix platforms, for ease of use, but always returns `None`.
    #[cfg(unix)]
    pub fn to_unix(self) -> Option<unix_net::SocketAddr> {
        match self {
            Self::IP(_) => None,
            Self::Unix(s) => Some(s),
        }
    }
    #[cfg(not(unix))]
    pub fn to_unix(self) -> Option<SocketAddr> {
        None
    }
}
impl From<SocketAddr> for ListenAddr {
    fn from(s: SocketAddr) -> Self {
        Self::IP(s)
    }
}
#[cfg(unix)]
impl From<unix_net::SocketAddr> for ListenAddr {
    fn from(s: unix_net::SocketAddr) -> Self {
        Self::Unix(s)
    }
}
impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::IP(s) => s.fmt(f),
            #[cfg(unix)]
            Self::Unix(s) => std::fmt::Debug::fmt(s, f),
        }
    }
}
