//! Start-up and shutdown: raise the open-file limit, open the database and restore its records,
//! bind the listener (falling back to a free port), start tiny_http on it and `mcp-notify` (and
//! the MCP stdio transport with `--mcp`), print the banner, write the port file; on a shutdown
//! request (Ctrl-C, SIGTERM, stdin EOF with `--exit-on-stdin-close`, or `Running::stop`) stop
//! taking connections, release every waiter, stop HTTP within a deadline, drain stdout and
//! remove the port file.

use std::io::{self, Write};
use std::net::{TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};

use crate::config::{Config, Database};
use crate::error::Error;
use crate::events::EventKind;
use crate::http;
use crate::ids;
use crate::intern::Interner;
use crate::limits;
use crate::mcp::{stdio, Mcp, Outgoing};
use crate::port_file;
use crate::process_index::ProcessIndex;
use crate::records::{HistoryEntry, Record, Records};
use crate::state::{Shared, State};
use crate::store::{IndexKey, RecordKind, Store};
use crate::upstream;

/// How long shutdown waits for request threads to finish.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

/// Why the server stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    Requested,
    Signal(i32),
    /// The MCP client closed stdin and `--exit-on-stdin-close` was given.
    StdinClosed,
}

/// A running server.
pub struct Running {
    shared: Arc<Shared>,
    http: http::Http,
    port: u16,
    fell_back_from: Option<u16>,
    shutdown_tx: Sender<Shutdown>,
    shutdown_rx: Receiver<Shutdown>,
    mcp: Arc<Mcp>,
    notifier: Option<(Sender<()>, JoinHandle<()>)>,
    stdio: Option<stdio::Stdio>,
    /// The port file this server wrote (and so removes at exit).
    owns_port_file: Option<port_file::Written>,
}

/// Opens the store and rebuilds the persisted part of the state.
fn open_database(
    config: &Config,
    interner: &mut Interner,
) -> Result<(Store, State, ProcessIndex), Error> {
    let mut state = State::default();
    state.records = Records::new(config.max_records, config.max_records_bytes);
    let mut processes = ProcessIndex::default();
    let Database::File(path) = &config.database else {
        return Ok((Store::memory(), state, processes));
    };
    let (mut n_records, mut n_history) = (0, 0);
    let mut settings = crate::service::SettingsLoader::default();
    // Deleted runs (tombstones): where their records are, and the history entries of each
    // process so far (to find a deleted run's).
    let mut forgotten: Vec<u64> = Vec::new();
    let mut history_of: std::collections::HashMap<String, Vec<u64>> = Default::default();
    let mut deleted_runs = 0;
    // Records stream through the bounded window (the file keeps them all; listings read
    // the older ones back from it through the index).
    let (store, recovered) = Store::open_with(path, &mut |kind, at, value| match kind {
        RecordKind::CallRecord => {
            n_records += 1;
            let record = Record::from_disk(interner, value);
            let seq = state.records.next_seq();
            let key = record.index_key(seq);
            processes.note(&record, at);
            state.records.push(record);
            key
        }
        RecordKind::History => {
            let known = state.records.newest_call();
            match HistoryEntry::from_disk(interner, &value, known) {
                Some(entry) => {
                    n_history += 1;
                    let key = entry.index_key();
                    history_of
                        .entry(entry.call.process.key())
                        .or_default()
                        .push(at);
                    state.records.push_history(entry);
                    key
                }
                None => IndexKey::default(),
            }
        }
        RecordKind::Settings => {
            if let Some(run) = crate::service::deleted_run(&value) {
                // A deleted run: its records so far go (the store drops its objects itself).
                if let Some(gone) = processes.remove(run, at) {
                    forgotten.extend(gone.entries.iter().map(|e| e.loc));
                }
                forgotten.extend(history_of.remove(run).unwrap_or_default());
                state.records.forget_process(run);
                deleted_runs += 1;
            }
            settings.add(&value);
            IndexKey::default()
        }
    })
    .map_err(|e| Error::io(format!("cannot open database {}", path.display()), e))?;
    // The index entries of deleted runs' records, rebuilt with the rest, are marked again.
    if !forgotten.is_empty() {
        if let Err(e) = store.forget_records(&forgotten) {
            log::error!(
                "database {}: cannot mark deleted records: {e}",
                path.display()
            );
        }
    }
    if deleted_runs > 0 {
        log::info!(
            "database {}: {deleted_runs} deleted runs ({} records and history entries) left out",
            path.display(),
            forgotten.len()
        );
    }
    // Records and the store's index then share one copy of each digest.
    for meta in store.list() {
        interner.share(&meta.cid);
    }
    if recovered.blobs + n_records + n_history > 0 {
        log::info!(
            "reopened {}: {} objects, {n_records} call records, {n_history} history entries",
            path.display(),
            recovered.blobs
        );
    }
    if recovered.dropped_records > 0 || recovered.truncated_bytes > 0 {
        log::warn!(
            "database {}: dropped {} corrupt records and a torn tail of {} bytes",
            path.display(),
            recovered.dropped_records,
            recovered.truncated_bytes
        );
    }
    state.origins.restore(settings.granted_origins());
    settings.restore_runs(&mut state.runs);
    settings.restore_notes(&mut state.record_notes);
    settings.restore(&mut state.breakpoints, path);
    // The call trees of the processes read back, before the first page asks for one.
    processes.compute_shapes();
    Ok((store, state, processes))
}

/// The directories of the server's data are its user's alone (see `files`): its own default
/// ones (`~/.cideldill` without `CIDELDILL_HOME`, and `db` under the data home) are
/// narrowed to 0700; one the user chose (`CIDELDILL_HOME`, the directory of `--db`) that others
/// may enter gets a warning.
fn check_data_dirs(config: &Config) {
    let env = crate::config::Env::from_process();
    let home = &config.home;
    if env.cideldill_home.is_none() && home.file_name() == Some(".cideldill".as_ref()) {
        crate::files::narrow_own_dir(home);
    } else {
        crate::files::warn_if_open(home, "the data directory (CIDELDILL_HOME)");
    }
    let own = [home.join("db")];
    for dir in &own {
        crate::files::narrow_own_dir(dir);
    }
    if let Database::File(path) = &config.database {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if &dir != home && !own.contains(&dir) {
            crate::files::warn_if_open(&dir, "the database's directory");
        }
    }
}

/// Binds `host:port`; a port in use falls back to a free one (returned as the second value).
fn bind(host: &str, port: u16) -> Result<(TcpListener, Option<u16>), Error> {
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::io(format!("cannot resolve --host {host}"), e))?
        .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(Error::Config(format!(
            "--host {host} resolves to no address"
        )));
    };
    match TcpListener::bind(addr) {
        Ok(l) => Ok((l, None)),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse && port != 0 => {
            let mut any = addr;
            any.set_port(0);
            let l =
                TcpListener::bind(any).map_err(|e| Error::io(format!("cannot bind {any}"), e))?;
            Ok((l, Some(port)))
        }
        Err(e) => Err(Error::io(format!("cannot bind {addr}"), e)),
    }
}

/// Raises the soft open-file limit to the hard one (every connection costs file descriptors)
/// and returns the cap on connections that fits in it.
fn connection_cap(asked: usize) -> usize {
    let soft = match crate::sys::raise_open_files_limit() {
        Ok(limit) => {
            match limit.raised_from {
                Some(from) => log::debug!("open-file limit raised from {from} to {}", limit.soft),
                None => log::debug!("open-file limit: {}", limit.soft),
            }
            limit.soft
        }
        Err(e) => {
            log::warn!("could not raise the open-file limit: {e}");
            crate::sys::open_files_limit().map_or(1024, |l| l.soft)
        }
    };
    let fits = soft.saturating_sub(limits::FDS_RESERVED) / limits::FDS_PER_CONNECTION;
    let fits = usize::try_from(fits).unwrap_or(usize::MAX).max(1);
    if asked > fits {
        log::warn!(
            "at most {fits} HTTP connections fit in the open-file limit of {soft} (asked for {asked})"
        );
    }
    asked.min(fits)
}

/// Starts the server: everything is ready to serve when this returns.
pub fn start(config: Config) -> Result<Running, Error> {
    start_with(config, |_| {})
}

/// Starts the server, handing the banner lines to `announce` before the port file is written,
/// so whoever waits for the port file finds the banner already printed.
pub fn start_with(config: Config, announce: impl FnOnce(&[String])) -> Result<Running, Error> {
    let upstream_servers = upstream::config::startup_servers(
        &config.mcp_clients,
        &upstream::config::read_fs,
        &|k: &str| std::env::var(k).ok(),
    )
    .map_err(|e| Error::Config(e.to_string()))?;
    let max_connections = connection_cap(config.max_connections);
    check_data_dirs(&config);
    let mut interner = Interner::default();
    let (store, state, processes) = open_database(&config, &mut interner)?;
    let (listener, fell_back_from) = bind(&config.host, config.port)?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the bound address", e))?
        .port();
    let port_file = config.port_file.clone();
    // The data directory's own `port` is where only the debugger's servers write.
    let unmarked = if port_file == config.home.join("port") {
        port_file::Unmarked::Stale
    } else {
        port_file::Unmarked::Refuse
    };
    let secret = port_file::Secret::new(port)
        .map_err(|e| Error::io("cannot make the port file's secret", e))?;
    let shared = Shared::with_interner(config, store, state, interner);
    *shared.processes() = processes;
    let shared = Arc::new(shared);
    let _ = shared.join_secret.set(secret.clone());
    // The MCP client manager is always there, idle until it is given a server (by the flags
    // now, or at run time through `POST /api/mcp-clients/connect` and the web UI). Then a
    // thread starts that turns external server status changes into events (the web UI and
    // /api/events show them); it ends when the manager shuts down.
    let events = Arc::downgrade(&shared);
    shared.upstream.on_first_use(Box::new(move || {
        let (watch_tx, watch_rx) = unbounded::<(String, upstream::manager::Status)>();
        std::thread::Builder::new()
            .name("upstream-status".into())
            .spawn(move || {
                for (name, status) in watch_rx {
                    let Some(events) = events.upgrade() else {
                        break;
                    };
                    events.lock().emit(EventKind::ExternalServer {
                        name,
                        status: status.as_str(),
                    });
                }
            })?;
        Ok(watch_tx)
    }));
    // MCP authorization of HTTP upstream servers: the browser comes back to this server's own
    // callback page; tokens are kept in the data directory (in memory only with --memory).
    let callback_host = match shared.config.host.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".to_owned(),
        "::" | "[::]" => "[::1]".to_owned(),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.to_owned(),
    };
    let token_file = match shared.config.database {
        crate::config::Database::Memory => None,
        crate::config::Database::File(_) => {
            Some(shared.config.home.join(upstream::auth::TOKEN_FILE))
        }
    };
    shared.upstream.auth().configure(
        format!("http://{callback_host}:{port}/oauth/callback"),
        token_file,
    );
    shared
        .upstream
        .add_startup(upstream_servers.unwrap_or_default())
        .map_err(|e| Error::io("cannot start the MCP client manager", e))?;
    let (shutdown_tx, shutdown_rx) = unbounded();
    let mcp = Mcp::new(shared.clone(), shared.config.mcp_page_size);
    let http_mcp = shared.config.mcp_http.then(|| mcp.clone());
    let http = http::spawn_http(shared.clone(), listener, port, http_mcp, max_connections)
        .map_err(|e| Error::io("cannot start the HTTP server", e))?;

    let notifier = mcp
        .spawn_notifier()
        .map_err(|e| Error::io("cannot start the mcp-notify thread", e))?;
    let mut running = Running {
        shared,
        http,
        port,
        fell_back_from,
        shutdown_tx,
        shutdown_rx,
        mcp,
        notifier: Some(notifier),
        stdio: None,
        owns_port_file: None,
    };
    announce(&running.banner());
    match port_file::claim(&port_file, &secret, unmarked) {
        Ok(port_file::Claim::Owned(written)) => running.owns_port_file = Some(written),
        Ok(port_file::Claim::Other(other)) => log::warn!(
            "the port file {} names another running server ({}, pid {}); it is left to that \
             server, so debug clients that find the server through the port file talk to it, \
             not to this one (give them CIDELDILL_SERVER_URL={} instead)",
            port_file.display(),
            other.url(),
            other.pid,
            running.url()
        ),
        Err(e) => {
            running.stop();
            return Err(Error::io(
                format!("cannot write port file {}", port_file.display()),
                e,
            ));
        }
    }
    Ok(running)
}

impl Running {
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The base URL clients use.
    pub fn url(&self) -> String {
        let host = &self.shared.config.host;
        if host.contains(':') {
            format!(
                "http://[{}]:{}",
                host.trim_matches(|c| c == '[' || c == ']'),
                self.port
            )
        } else {
            format!("http://{host}:{}", self.port)
        }
    }

    /// The URL a debugged program is given (`CIDELDILL_SERVER_URL`): the client accepts only
    /// loopback names, so a server bound to every address is named by `127.0.0.1`.
    pub fn client_url(&self) -> String {
        let host = self
            .shared
            .config
            .host
            .trim_matches(|c| c == '[' || c == ']');
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_unspecified() => format!("http://127.0.0.1:{}", self.port),
            _ => self.url(),
        }
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The MCP server core, shared by every MCP transport.
    pub fn mcp(&self) -> &Arc<Mcp> {
        &self.mcp
    }

    /// Serves MCP on this process's stdin and stdout.
    pub fn start_stdio(&mut self) -> Result<(), Error> {
        let exit = self.shared.config.exit_on_stdin_close;
        let tx = self.shutdown_tx.clone();
        let on_eof = move || {
            if exit {
                let _ = tx.send(Shutdown::StdinClosed);
            } else {
                log::info!(
                    "mcp stdio closed; the HTTP server keeps serving (Ctrl-C or SIGTERM to stop)"
                );
            }
        };
        let io = stdio::spawn_stdio(self.mcp.clone(), on_eof)
            .map_err(|e| Error::io("cannot start the stdio threads", e))?;
        self.stdio = Some(io);
        Ok(())
    }

    /// A sender that asks the server to stop.
    pub fn shutdown_sender(&self) -> Sender<Shutdown> {
        self.shutdown_tx.clone()
    }

    /// The start-up banner lines (stderr; never stdout).
    pub fn banner(&self) -> Vec<String> {
        let config = &self.shared.config;
        let mut lines = vec![format!("cideldill-server {}", env!("CARGO_PKG_VERSION"))];
        if let Some(asked) = self.fell_back_from {
            lines.push(format!(
                "Port {asked} is occupied, using free port {} instead",
                self.port
            ));
        }
        lines.push(format!("Server running on {}", self.url()));
        // What a newcomer does next: open the web UI, point a program at us, add an agent.
        lines.push(format!("  Web UI:   {}/", self.url()));
        lines.push(
            "  Python:   from cideldill_client import with_debug; with_debug(\"ON\"); f = with_debug(f)"
                .to_owned(),
        );
        lines.push(format!(
            "            and run the program with CIDELDILL_SERVER_URL={}",
            self.client_url()
        ));
        if !config.mcp_stdio {
            // The path of this very executable: after `cargo run` no `cideldill-server` is on
            // PATH, and an MCP host may not have the shell's PATH anyway.
            let exe = std::env::current_exe().unwrap_or_else(|_| "cideldill-server".into());
            lines.push(format!(
                "  AI agent: claude mcp add cideldill -- {}",
                join_command(&exe, &config.port_file)
            ));
            if !on_path(&exe) {
                lines.push(
                    "            (this build's path, gone with `cargo clean`; `cargo install --locked \
                     --path . --bin cideldill-server`"
                        .to_owned(),
                );
                lines.push(format!(
                    "            puts cideldill-server on PATH: then register `{}`)",
                    join_command(Path::new("cideldill-server"), &config.port_file)
                ));
            }
        }
        if config.mcp_legacy_sse {
            lines.push(format!(
                "MCP: Streamable HTTP at {0}/mcp, HTTP+SSE at {0}/mcp/sse",
                self.url()
            ));
        } else if config.mcp_http {
            lines.push(format!("MCP: Streamable HTTP at {}/mcp", self.url()));
        }
        if config.mcp_clients != upstream::config::ClientFlags::default() {
            let names = self.shared.upstream.names();
            lines.push(if names.is_empty() {
                "External MCP servers: none configured".to_owned()
            } else {
                format!("External MCP servers: {} (connecting)", names.join(", "))
            });
        }
        lines.push(format!("Database: {}", config.database.describe()));
        lines.push(format!("Port file: {}", config.port_file.display()));
        lines
    }

    /// Blocks until a shutdown is requested, then stops.
    pub fn wait(self) -> Result<(), Error> {
        let reason = self.shutdown_rx.recv().unwrap_or(Shutdown::Requested);
        log::info!("shutting down ({reason:?})");
        self.stop();
        Ok(())
    }

    /// Stops: refuses new work, releases waiting evals, stops HTTP, removes the port file.
    pub fn stop(mut self) {
        // No new connections or requests; answers in flight go on.
        self.http.close();
        {
            let mut st = self.shared.lock();
            self.shared
                .shutting_down
                .store(true, std::sync::atomic::Ordering::SeqCst);
            st.repl.close_all(ids::now());
        }
        // Ending every MCP session ends their HTTP event streams (their outboxes are dropped).
        self.mcp.close_all();
        // External MCP servers next: in-flight external calls fail at once, and every child
        // process (with its process group) is gone before we return.
        self.shared.upstream.shutdown();
        let busy = self
            .http
            .stop(std::time::Instant::now() + SHUTDOWN_DEADLINE);
        if busy > 0 {
            log::warn!(
                "http: {busy} requests still being answered after {SHUTDOWN_DEADLINE:?}; exiting anyway"
            );
        }
        let until = std::time::Instant::now() + SHUTDOWN_DEADLINE;
        while self
            .mcp
            .open_streams
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
            && std::time::Instant::now() < until
        {
            thread::sleep(Duration::from_millis(10));
        }
        let stuck = self
            .mcp
            .open_streams
            .load(std::sync::atomic::Ordering::SeqCst);
        if stuck > 0 {
            // A writer blocked in a socket write cannot be interrupted; it ends with the process.
            log::warn!("mcp http: {stuck} event streams still blocked in writes; exiting anyway");
        }
        if let Some((stop, handle)) = self.notifier.take() {
            let _ = stop.send(());
            let _ = handle.join();
        }
        if let Some(io) = self.stdio.take() {
            // Drain what is queued, then stop the only stdout writer. The reader may be blocked in
            // a read of stdin that cannot be interrupted; it ends with the process.
            let _ = io.out_tx.send(Outgoing::Close);
            let _ = io.writer.join();
        }
        if let Some(written) = self.owns_port_file.take() {
            port_file::release(&self.shared.config.port_file, self.port, written);
        }
    }
}

/// The command an MCP host runs (`exe`, this executable) to join the server of `port_file`:
/// `<exe> --mcp`, plus `--port-file` when that is not the default one (a host does not pass on
/// the variables of the shell that started the server).
fn join_command(exe: &Path, port_file: &Path) -> String {
    let home = crate::config::Env::from_process().home;
    let default = crate::config::Env {
        home,
        ..Default::default()
    }
    .port_file();
    let exe = shell_word(exe);
    if port_file == default {
        format!("{exe} --mcp")
    } else {
        format!("{exe} --mcp --port-file {}", shell_word(port_file))
    }
}

/// A path as one word of a POSIX shell command (quoted when it needs to be).
fn shell_word(path: &Path) -> String {
    let path = path.display().to_string();
    if !path.is_empty()
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-~+".contains(&b))
    {
        path
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

/// Whether `cideldill-server` on `PATH` is this executable (`cargo install` put it there).
fn on_path(exe: &Path) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    std::env::split_paths(&path).any(|dir| {
        std::fs::canonicalize(dir.join("cideldill-server")).is_ok_and(|found| found == exe)
    })
}

/// With `--mcp` and nothing that asks for a server of its own: the running server the port
/// file names, if there is one (see `mcp::bridge`).
pub fn server_to_join(config: &Config) -> Option<port_file::Running> {
    if !config.may_join {
        return None;
    }
    port_file::running_server(&config.port_file)
}

/// Joins a running server: relays MCP between stdio and its `/mcp` until stdin closes.
pub fn join(config: &Config, server: &port_file::Running) -> Result<(), Error> {
    let clients = &config.mcp_clients;
    if clients.mcp_clients || clients.config.is_some() || !clients.inline.is_empty() {
        return Err(Error::Config(refuse_client_flags(config, server)));
    }
    let mut err = io::stderr().lock();
    let _ = writeln!(
        err,
        "cideldill-server {}: joining the running server at {} (pid {}, named by {})\n\
         MCP on stdio is relayed to {}/mcp: the agent shares the session of the web UI at {}/\n\
         (--standalone starts a separate server instead)",
        env!("CARGO_PKG_VERSION"),
        server.url(),
        server.pid,
        config.port_file.display(),
        server.url(),
        server.url()
    );
    drop(err);
    match crate::mcp::bridge::run_stdio(server.port) {
        crate::mcp::bridge::End::StdinClosed => Ok(()),
        crate::mcp::bridge::End::Lost(why) => Err(Error::Joined(why)),
    }
}

/// Why a joining `--mcp` process refuses the client flags, and what to do instead: connect the
/// servers to the running server at run time (its web UI page, or the `curl` line of each
/// `--mcp-client`), or start a separate server.
fn refuse_client_flags(config: &Config, server: &port_file::Running) -> String {
    let url = server.url();
    let mut text = format!(
        "a server is already running for the port file {} ({url}, pid {}), and this --mcp \
         process joins its session; --mcp-client, --mcp-clients and --mcp-clients-config would \
         start programs in that server's environment, so they are refused here.\n\
         To connect external servers to the running server (they run in its environment), use \
         its web UI page {url}/mcp-servers or POST {url}/api/mcp-clients/connect",
        config.port_file.display(),
        server.pid,
    );
    let env = |k: &str| std::env::var(k).ok();
    let lines: Vec<String> = config
        .mcp_clients
        .inline
        .iter()
        .map(|flag| match upstream::config::parse_inline(flag, &env) {
            Ok(c) => connect_curl(&url, &c),
            Err(_) => None,
        })
        .collect::<Option<_>>()
        .unwrap_or_default();
    if lines.is_empty() {
        text.push_str(
            " (a JSON body such as {\"name\": \"files\", \"command\": \"npx\", \"args\": [...]}, \
             or {\"name\": ..., \"url\": ...}",
        );
        let file = match &config.mcp_clients.config {
            Some(f) if !f.trim_start().starts_with('{') => Some(f.clone()),
            Some(_) => None,
            None => Some(config.mcp_clients_file.display().to_string()),
        };
        if let Some(file) = file.filter(|_| config.mcp_clients.inline.is_empty()) {
            text.push_str(&format!(
                "; each server entry of {file} is such a body, with \"name\" added"
            ));
        }
        text.push(')');
    } else {
        text.push_str(", here:");
        for line in lines {
            text.push_str("\n  ");
            text.push_str(&line);
        }
    }
    text.push_str("\n(or add --standalone to start a separate server of its own with these flags)");
    text
}

/// The `curl` line that connects `c` to the server at `url` at run time, when its definition
/// fits on one line without secrets (no environment, no headers).
fn connect_curl(url: &str, c: &upstream::config::ServerConfig) -> Option<String> {
    use upstream::config::Transport;
    let mut body = serde_json::json!({"name": c.name});
    match &c.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd: None,
        } if env.is_empty() => {
            body["command"] = command.as_str().into();
            body["args"] = args.clone().into();
        }
        Transport::Sse { url, headers }
        | Transport::Http { url, headers }
        | Transport::Auto { url, headers }
            if headers.is_empty() =>
        {
            body["url"] = url.as_str().into();
            if !matches!(c.transport, Transport::Auto { .. }) {
                body["transport"] = c.transport.kind().as_str().into();
            }
        }
        _ => return None,
    }
    let body = body.to_string().replace('\'', "'\\''");
    Some(format!(
        "curl -X POST {url}/api/mcp-clients/connect -H 'Content-Type: application/json' -d '{body}'"
    ))
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(config: Config) -> Result<(), Error> {
    if let Some(server) = server_to_join(&config) {
        return join(&config, &server);
    }
    let with_stdio = config.mcp_stdio;
    let mut running = start_with(config, |banner| {
        let mut err = io::stderr().lock();
        for line in banner {
            let _ = writeln!(err, "{line}");
        }
    })?;
    if with_stdio {
        running.start_stdio()?;
    }
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(|e| Error::io("cannot install signal handlers", e))?;
    let handle = signals.handle();
    let tx = running.shutdown_sender();
    let signal_thread = thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let _ = tx.send(Shutdown::Signal(sig));
            }
        })
        .map_err(|e| Error::io("cannot start the signal thread", e))?;
    let result = running.wait();
    handle.close();
    let _ = signal_thread.join();
    result
}
