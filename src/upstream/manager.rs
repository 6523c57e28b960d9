//! The MCP client manager: the upstream servers, their connections, the tool catalog and call
//! routing.
//!
//! One `Mutex<Servers>` holds every server's slot (config, status, live connection, tools); it
//! is held only to read or swap slot fields, never across I/O. Connecting, calling and pinging
//! happen on the caller's thread (or a short-lived thread) through the slot's [`Peer`], which
//! multiplexes concurrent calls by request id. A *supervisor* thread reacts to what peers
//! report (connection lost, tool list changed), pings connected servers every
//! [`Timing::ping_interval`] and runs automatic reconnection with backoff.
//!
//! Every slot carries a generation number, bumped whenever its connection is replaced or
//! dropped; anything that finishes for an older generation (a slow connect, a late notice) is
//! discarded instead of overwriting newer state.
//!
//! Its parts, under `manager/`: `connect` (the handshake and installing a connection),
//! `supervisor` (the supervisor thread's loop, pings, reconnection, notices) and `tests`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Map, Value};

use super::auth::Auth;
use super::config::{ServerConfig, Transport, TransportKind};
use super::names::{
    catalog_name, check_display_name, check_resource_uri, check_tool_name, validate_server_name,
    Catalog, ExternalNameError, ResolveError,
};
use super::params::{self, Binding};
use super::peer::{show_duration, Era, Failure, Initialized, Notice, Peer};
use super::stdio::{self, Proc};
use super::timing::Timing;
use crate::error::ApiError;
use crate::ids;
use crate::limits::{UPSTREAM_MAX_CATALOG_BYTES, UPSTREAM_MAX_RESOURCES, UPSTREAM_MAX_TOOLS};

mod connect;
mod supervisor;

use connect::*;
use supervisor::*;

/// The grace periods of a child at shutdown (stdin closed, then SIGTERM, then SIGKILL): short,
/// because hosts give an MCP server about 2 s after closing its stdin before SIGTERM and 2 s
/// more before SIGKILL, and a SIGKILLed server could not stop its children any more.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(800);

/// A server's connection status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Connecting,
    Connected,
    /// Disconnected on request, or lost (with `error` saying why) and perhaps waiting to retry.
    Disconnected,
    /// The last connection attempt failed (see `error`).
    Error,
    /// Automatic reconnection gave up; only a manual reconnect tries again.
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Connected => "connected",
            Status::Disconnected => "disconnected",
            Status::Error => "error",
            Status::Failed => "failed",
        }
    }
}

fn server_not_found(name: &str) -> ApiError {
    ApiError::not_found(
        "server_not_found",
        format!("no upstream server is named {name:?}"),
    )
    .with("server", name)
    .with("name", name)
}

fn not_connected(name: &str, status: Status, error: Option<&str>) -> ApiError {
    let mut message = format!("upstream server {name:?} is {}", status.as_str());
    if let Some(e) = error {
        message.push_str(&format!(": {e}"));
    }
    ApiError::new(502, "server_not_connected", message)
        .with("server", name)
        .with("status", status.as_str())
}

/// A live connection.
struct Live {
    peer: Arc<Peer>,
    proc: Option<Arc<Proc>>,
    /// The transport actually used (`Auto` resolves to `Http` or `Sse`).
    transport: TransportKind,
    init: Initialized,
    /// The re-listing of its tools after `notifications/tools/list_changed`: at most one runs.
    relist: Mutex<Relist>,
}

/// Whether a re-listing runs, and whether the list changed again since it started (then it
/// runs once more when it ends): a flood of change notices costs one thread and two flags.
#[derive(Default)]
struct Relist {
    running: bool,
    again: bool,
}

/// What was skipped of a server's tool list, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Skipped {
    /// Empty, too long, or holding whitespace, control or invisible formatting characters
    /// (see [`check_tool_name`]); also a tool that is no object or has no string name.
    invalid_name: usize,
    /// A second tool of a name already listed (the first is kept).
    duplicate: usize,
    /// Past [`UPSTREAM_MAX_TOOLS`] or [`UPSTREAM_MAX_CATALOG_BYTES`].
    over_limit: usize,
    /// A modern Streamable HTTP server's tool whose `x-mcp-header` annotations break the
    /// rules (see [`super::params`]).
    invalid_header: usize,
}

impl Skipped {
    fn total(&self) -> usize {
        self.invalid_name + self.duplicate + self.over_limit + self.invalid_header
    }
}

/// A server's tool (or resource) list as kept.
struct Listed {
    /// The tools (or resources).
    tools: Vec<Value>,
    skipped: Skipped,
}

/// Individual log lines about skipped items per listing; the rest are only counted.
const SKIP_LOG_LINES: usize = 5;

/// A check of an external name ([`check_tool_name`], [`check_resource_uri`]).
type NameCheck = fn(&str) -> Result<(), ExternalNameError>;

/// What a bounded listing lists.
#[derive(Clone, Copy)]
enum Kind {
    Tools,
    Resources,
}

impl Kind {
    fn method(self) -> &'static str {
        match self {
            Kind::Tools => "tools/list",
            Kind::Resources => "resources/list",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Tools => "tools",
            Kind::Resources => "resources",
        }
    }

    fn max(self) -> usize {
        match self {
            Kind::Tools => UPSTREAM_MAX_TOOLS,
            Kind::Resources => UPSTREAM_MAX_RESOURCES,
        }
    }

    /// The item's identity (a tool's name, a resource's URI), or why it is invalid.
    fn identity(self, item: &Value) -> Result<&str, String> {
        let (field, check): (&str, NameCheck) = match self {
            Kind::Tools => ("name", check_tool_name),
            Kind::Resources => ("uri", check_resource_uri),
        };
        let Some(id) = item.get(field).and_then(Value::as_str) else {
            return Err(format!("its {field} is missing or not a string"));
        };
        let shown = |s: &str| s.chars().take(64).collect::<String>();
        check(id).map_err(|e| format!("its {field} {:?} is {e}", shown(id)))?;
        if let Kind::Resources = self {
            if let Some(n) = item.get("name").and_then(Value::as_str) {
                check_display_name(n).map_err(|e| format!("its name {:?} {e}", shown(n)))?;
            }
        }
        Ok(id)
    }
}

/// Lists `peer`'s tools or resources within the limits: items with an invalid identity (see
/// [`Kind::identity`]), duplicates (the first is kept) and those past the count or byte budget
/// are skipped (counted, and the first few logged); no page is asked for once the budget is
/// spent.
fn list_bounded(
    name: &str,
    peer: &Arc<Peer>,
    kind: Kind,
    timeout: Duration,
) -> Result<Listed, Failure> {
    let what = kind.key();
    let mut items = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut bytes = 0usize;
    let mut skipped = Skipped::default();
    let mut full = false;
    let mut logged = 0usize;
    // A modern Streamable HTTP connection mirrors annotated tool parameters into headers and
    // leaves out the tools whose annotations are invalid.
    let headers = matches!(kind, Kind::Tools) && peer.mirrors_tool_params();
    let mut bindings: HashMap<String, Vec<Binding>> = HashMap::new();
    let mut note = |why: String| {
        logged += 1;
        if logged <= SKIP_LOG_LINES {
            log::warn!("upstream {name}: skipped one of its {what}: {why}");
        }
    };
    peer.list_each(kind.method(), what, timeout, |item| {
        if full {
            skipped.over_limit += 1;
            return false;
        }
        let id = match kind.identity(&item) {
            Ok(id) => id,
            Err(why) => {
                skipped.invalid_name += 1;
                note(why);
                return true;
            }
        };
        if seen.contains(id) {
            skipped.duplicate += 1;
            note(format!("a second one of {id:?} (the first is kept)"));
            return true;
        }
        let annotated = if headers {
            match params::bindings(item.get("inputSchema").unwrap_or(&Value::Null)) {
                Ok(b) => b,
                Err(why) => {
                    skipped.invalid_header += 1;
                    note(format!(
                        "the tool {id:?} has an invalid x-mcp-header: {why}"
                    ));
                    return true;
                }
            }
        } else {
            Vec::new()
        };
        let size = serde_json::to_vec(&item).map_or(usize::MAX, |v| v.len());
        if items.len() >= kind.max() || bytes.saturating_add(size) > UPSTREAM_MAX_CATALOG_BYTES {
            full = true;
            skipped.over_limit += 1;
            return false;
        }
        seen.insert(id.to_owned());
        if !annotated.is_empty() {
            bindings.insert(id.to_owned(), annotated);
        }
        bytes += size;
        items.push(item);
        true
    })?;
    if headers {
        peer.set_param_bindings(bindings);
    }
    if skipped.total() > 0 {
        log::warn!(
            "upstream {name}: kept {} {what} ({bytes} bytes); skipped {} invalid, {} with invalid \
             x-mcp-header annotations, {} duplicates and {} past the limits ({} {what}, \
             {UPSTREAM_MAX_CATALOG_BYTES} bytes)",
            items.len(),
            skipped.invalid_name,
            skipped.invalid_header,
            skipped.duplicate,
            skipped.over_limit,
            kind.max()
        );
    }
    Ok(Listed {
        tools: items,
        skipped,
    })
}

/// Whether a Streamable HTTP refusal of this status (without a JSON-RPC error body) sends a
/// URL given without a transport to legacy HTTP+SSE: 400, 404 and 405, as the MCP
/// specification's backwards-compatibility rule says. Any other status (401 asking for
/// authorization, 403, 429…) is the answer of a Streamable HTTP server and fails as it is.
fn falls_back_to_sse(status: u16) -> bool {
    matches!(status, 400 | 404 | 405)
}

/// [`list_bounded`] for tools.
fn list_tools(name: &str, peer: &Arc<Peer>, timeout: Duration) -> Result<Listed, Failure> {
    list_bounded(name, peer, Kind::Tools, timeout)
}

/// Where a server's definition came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The config file or `--mcp-client` (reconnected on every start).
    Startup,
    /// `POST /api/mcp-clients/connect` (gone after a restart).
    Runtime,
}

struct Slot {
    config: ServerConfig,
    source: Source,
    status: Status,
    error: Option<String>,
    gen: u64,
    live: Option<Arc<Live>>,
    /// The server's tools as it listed them (unfiltered), those with valid names within the
    /// limits (see [`list_tools`]).
    tools: Vec<Value>,
    /// What [`list_tools`] skipped of its last list.
    skipped: Skipped,
    /// The tool list changed while this generation was still connecting (after the server
    /// listed it, perhaps): it is listed again once connected.
    changed_while_connecting: bool,
    connected_at: Option<f64>,
    /// Automatic reconnection attempts made since the connection was lost.
    attempts: u32,
    retry_at: Option<Instant>,
    next_ping: Option<Instant>,
}

impl Slot {
    fn new(config: ServerConfig, source: Source) -> Slot {
        Slot {
            config,
            source,
            status: Status::Connecting,
            error: None,
            gen: 0,
            live: None,
            tools: Vec::new(),
            skipped: Skipped::default(),
            changed_while_connecting: false,
            connected_at: None,
            attempts: 0,
            retry_at: None,
            next_ping: None,
        }
    }

    fn visible_tools(&self) -> impl Iterator<Item = (&str, &Value)> {
        let filter = self.config.tool_filter();
        self.tools.iter().filter_map(move |t| {
            let name = t.get("name").and_then(Value::as_str)?;
            filter.allows(name).then_some((name, t))
        })
    }
}

enum Event {
    Notice {
        name: String,
        gen: u64,
        notice: Notice,
        /// For a list change: set while this notice waits in the channel, so a flood of them
        /// queues one (cleared when the supervisor takes it).
        queued: Option<Arc<AtomicBool>>,
    },
    Stop,
}

impl Inner {
    fn status_changed(&self, name: &str, status: Status) {
        lock(&self.watchers).retain(|w| w.send((name.to_owned(), status)).is_ok());
    }
}

struct Inner {
    timing: Timing,
    /// Every HTTP server's MCP authorization.
    auth: Arc<Auth>,
    /// Who wants to hear of status changes (see [`Manager::watch`]).
    watchers: Mutex<Vec<Sender<(String, Status)>>>,
    servers: Mutex<BTreeMap<String, Slot>>,
    events: Sender<Event>,
    shutting_down: AtomicBool,
    /// Every child process started, until it is reaped (shutdown waits for them).
    procs: Mutex<Vec<Arc<Proc>>>,
}

/// Makes the first watcher (see [`Manager::watch`]) when the manager is first given a server:
/// the server's thread that turns status changes into events starts then, not before.
pub type FirstWatcher = Box<dyn FnOnce() -> std::io::Result<Sender<(String, Status)>> + Send>;

/// The supervisor thread: none until the manager has a server to look after.
enum Supervisor {
    /// No server yet: no thread runs and no child exists.
    Idle {
        events: Receiver<Event>,
        first_watcher: Option<FirstWatcher>,
    },
    Running(JoinHandle<()>),
    /// Shut down (or its thread could not start).
    Stopped,
}

/// The MCP client manager (see the module documentation). Every server has one, idle until a
/// server is connected (from the flags at start, or at run time).
pub struct Manager {
    inner: Arc<Inner>,
    supervisor: Mutex<Supervisor>,
}

/// The outcome of a tool call that reached the server.
#[derive(Clone, Debug)]
pub struct CallOutcome {
    pub server: String,
    pub original_name: String,
    pub result: Value,
}

/// Where a tool name leads.
struct Routed {
    server: String,
    tool: String,
    live: Arc<Live>,
    timeout: Duration,
}

/// A failed call with what is known about it (for the call record).
#[derive(Clone, Debug)]
pub struct CallFailure {
    pub error: ApiError,
    /// Set when the name resolved (the call was attempted or refused for a known server).
    pub server: Option<String>,
    pub original_name: Option<String>,
    /// Whether the request reached the server (timeouts and upstream errors did).
    pub sent: bool,
}

impl Manager {
    /// Starts the manager and connects `servers` in the background.
    pub fn start(servers: Vec<ServerConfig>, timing: Timing) -> std::io::Result<Arc<Manager>> {
        Manager::start_watched(servers, timing, None)
    }

    /// Starts the manager with a first watcher (see [`Manager::watch`]) that hears every status
    /// change from the first connection attempt on.
    pub fn start_watched(
        servers: Vec<ServerConfig>,
        timing: Timing,
        watcher: Option<Sender<(String, Status)>>,
    ) -> std::io::Result<Arc<Manager>> {
        let manager = Manager::idle(timing);
        if let Some(w) = watcher {
            manager.on_first_use(Box::new(move || Ok(w)));
        }
        manager.add_startup(servers)?;
        Ok(manager)
    }

    /// A manager with no server: it holds no thread until one is added.
    pub fn idle(timing: Timing) -> Arc<Manager> {
        let (tx, rx) = unbounded();
        Arc::new(Manager {
            inner: Arc::new(Inner {
                timing,
                auth: Auth::new(),
                servers: Mutex::new(BTreeMap::new()),
                events: tx,
                watchers: Mutex::new(Vec::new()),
                shutting_down: AtomicBool::new(false),
                procs: Mutex::new(Vec::new()),
            }),
            supervisor: Mutex::new(Supervisor::Idle {
                events: rx,
                first_watcher: None,
            }),
        })
    }

    /// Sets the first watcher, made when the manager wakes (ignored once it has).
    pub fn on_first_use(&self, make: FirstWatcher) {
        if let Supervisor::Idle { first_watcher, .. } = &mut *lock(&self.supervisor) {
            *first_watcher = Some(make);
        }
    }

    /// Starts the supervisor (and the first watcher) if they are not running yet.
    fn wake(&self) -> std::io::Result<()> {
        let mut sup = lock(&self.supervisor);
        match *sup {
            Supervisor::Idle { .. } => {}
            Supervisor::Running(_) => return Ok(()),
            Supervisor::Stopped if self.inner.shutting_down.load(Ordering::SeqCst) => return Ok(()),
            Supervisor::Stopped => {
                return Err(std::io::Error::other(
                    "the supervisor thread could not be started",
                ))
            }
        }
        let Supervisor::Idle {
            events,
            first_watcher,
        } = std::mem::replace(&mut *sup, Supervisor::Stopped)
        else {
            return Ok(());
        };
        if let Some(make) = first_watcher {
            let watcher = make()?;
            lock(&self.inner.watchers).push(watcher);
        }
        let sup_inner = self.inner.clone();
        let handle = thread::Builder::new()
            .name("upstream-supervisor".into())
            .spawn(move || supervise(&sup_inner, &events))?;
        *sup = Supervisor::Running(handle);
        Ok(())
    }

    /// Adds the servers of the flags and config file and connects them in the background.
    pub fn add_startup(&self, servers: Vec<ServerConfig>) -> std::io::Result<()> {
        if servers.is_empty() {
            return Ok(());
        }
        self.wake()?;
        let inner = &self.inner;
        for config in servers {
            let name = config.name.clone();
            let gen = {
                let mut servers = lock(&inner.servers);
                let slot = servers
                    .entry(name.clone())
                    .or_insert_with(|| Slot::new(config.clone(), Source::Startup));
                slot.gen += 1;
                slot.gen
            };
            let inner = inner.clone();
            thread::Builder::new()
                .name(format!("upstream-{name}-connect"))
                .spawn(move || {
                    if let Err(e) = connect_slot(&inner, &name, gen) {
                        log::warn!("upstream {name}: {e}");
                    }
                })?;
        }
        Ok(())
    }

    /// A channel that hears `(server, status)` at every status change, from now on. It is
    /// never blocked on: a watcher that went away is forgotten.
    pub fn watch(&self) -> Receiver<(String, Status)> {
        let (tx, rx) = unbounded();
        lock(&self.inner.watchers).push(tx);
        rx
    }

    /// The names of every known server.
    pub fn names(&self) -> Vec<String> {
        lock(&self.inner.servers).keys().cloned().collect()
    }

    pub fn timing(&self) -> &Timing {
        &self.inner.timing
    }

    /// Waits until no server is `connecting`, up to `timeout`; true when settled.
    pub fn wait_settled(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let busy = lock(&self.inner.servers)
                .values()
                .any(|s| s.status == Status::Connecting);
            if !busy {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Connects a new server at run time (never written to any file). A name already
    /// connected or connecting is `duplicate_name`; a name whose last attempt failed or that
    /// was disconnected is replaced by the new definition.
    pub fn connect(&self, config: ServerConfig) -> Result<Vec<String>, ApiError> {
        let name = config.name.clone();
        validate_server_name(&name).map_err(|e| {
            ApiError::new(
                400,
                "invalid_name",
                format!("invalid server name {name:?}: {e}"),
            )
            .with("name", name.as_str())
        })?;
        if self.inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ApiError::new(
                503,
                "shutting_down",
                "the server is shutting down",
            ));
        }
        self.wake().map_err(|e| {
            ApiError::internal(format!("cannot start the MCP client manager's thread: {e}"))
        })?;
        let gen = {
            let mut servers = lock(&self.inner.servers);
            if let Some(slot) = servers.get(&name) {
                if matches!(slot.status, Status::Connected | Status::Connecting) {
                    return Err(ApiError::new(
                        409,
                        "duplicate_name",
                        format!(
                            "an upstream server named {name:?} is already {}",
                            slot.status.as_str()
                        ),
                    )
                    .with("name", name.as_str()));
                }
            }
            let old_gen = servers.get(&name).map_or(0, |s| s.gen);
            let mut slot = Slot::new(config, Source::Runtime);
            slot.gen = old_gen + 1;
            let gen = slot.gen;
            servers.insert(name.clone(), slot);
            gen
        };
        connect_slot(&self.inner, &name, gen)
    }

    /// Disconnects a server, keeping its definition for [`Manager::reconnect`]. In-flight
    /// calls fail at once.
    pub fn disconnect(&self, name: &str) -> Result<(), ApiError> {
        let live = {
            let mut servers = lock(&self.inner.servers);
            let slot = servers
                .get_mut(name)
                .ok_or_else(|| server_not_found(name))?;
            slot.gen += 1;
            if std::mem::replace(&mut slot.status, Status::Disconnected) != Status::Disconnected {
                self.inner.status_changed(name, Status::Disconnected);
            }
            slot.error = None;
            slot.tools.clear();
            slot.skipped = Skipped::default();
            slot.retry_at = None;
            slot.next_ping = None;
            slot.connected_at = None;
            slot.live.take()
        };
        if let Some(live) = live {
            live.peer.shutdown("disconnected by request");
        }
        log::info!("upstream {name}: disconnected by request");
        Ok(())
    }

    /// Reconnects a server with its retained definition; resets the automatic attempt count.
    pub fn reconnect(&self, name: &str) -> Result<Vec<String>, ApiError> {
        if self.inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ApiError::new(
                503,
                "shutting_down",
                "the server is shutting down",
            ));
        }
        let (gen, live) = {
            let mut servers = lock(&self.inner.servers);
            let slot = servers
                .get_mut(name)
                .ok_or_else(|| server_not_found(name))?;
            slot.gen += 1;
            if std::mem::replace(&mut slot.status, Status::Connecting) != Status::Connecting {
                self.inner.status_changed(name, Status::Connecting);
            }
            slot.error = None;
            slot.attempts = 0;
            slot.retry_at = None;
            slot.next_ping = None;
            slot.tools.clear();
            slot.skipped = Skipped::default();
            slot.connected_at = None;
            (slot.gen, slot.live.take())
        };
        if let Some(live) = live {
            live.peer.shutdown("reconnecting by request");
        }
        connect_slot(&self.inner, name, gen)
    }

    /// Every server with its status.
    pub fn servers(&self) -> Value {
        let servers = lock(&self.inner.servers);
        let mut out = Map::new();
        for (name, slot) in servers.iter() {
            let tools: Vec<String> = slot
                .visible_tools()
                .map(|(t, _)| catalog_name(name, t))
                .collect();
            let mut s = json!({
                "status": slot.status.as_str(),
                "transport": slot.live.as_ref().map_or(slot.config.transport.kind(), |l| l.transport).as_str(),
                "configured_transport": slot.config.transport.kind().as_str(),
                "tools": tools,
                "tool_count": tools.len(),
                "connected_at": slot.connected_at,
                "error": slot.error,
                "source": match slot.source { Source::Startup => "startup", Source::Runtime => "runtime" },
                "auto_reconnect": slot.config.auto_reconnect,
                "timeout_s": slot.config.timeout.as_secs_f64(),
                "reconnect_attempts": slot.attempts,
                "skipped_tools": slot.skipped.total(),
                "auth": self.inner.auth.describe(name),
                "skipped_tools_by_reason": {
                    "invalid_name": slot.skipped.invalid_name,
                    "duplicate": slot.skipped.duplicate,
                    "over_limit": slot.skipped.over_limit,
                    "invalid_header": slot.skipped.invalid_header,
                },
            });
            match &slot.config.transport {
                Transport::Stdio { command, args, .. } => {
                    s["command"] = json!(command);
                    s["args"] = json!(args);
                }
                other => s["url"] = json!(other.url()),
            }
            if let Some(at) = slot.retry_at {
                s["next_retry_in_s"] =
                    json!(at.saturating_duration_since(Instant::now()).as_secs_f64());
            }
            if let Some(live) = &slot.live {
                s["protocol_version"] = json!(live.init.protocol_version);
                s["protocol_era"] = json!(live.init.era.as_str());
                s["server_info"] = live.init.server_info.clone();
                if let Some(p) = &live.proc {
                    s["pid"] = json!(p.pid());
                }
                if let Some(i) = &live.init.instructions {
                    s["instructions"] = json!(i);
                }
            }
            out.insert(name.clone(), s);
        }
        Value::Object(out)
    }

    /// MCP authorization of the HTTP servers (see [`super::auth`]).
    pub fn auth(&self) -> &Arc<Auth> {
        &self.inner.auth
    }

    /// Starts authorizing server `name` (`POST /api/mcp-clients/{name}/authorize`): the URL
    /// the person opens in a browser.
    pub fn authorize(&self, name: &str) -> Result<String, ApiError> {
        let config = lock(&self.inner.servers)
            .get(name)
            .map(|s| s.config.clone())
            .ok_or_else(|| server_not_found(name))?;
        self.inner.auth.start(&config)
    }

    /// The catalog: every visible tool of every connected server (or of `server`).
    pub fn tools(&self, server: Option<&str>) -> Result<Vec<Value>, ApiError> {
        let servers = lock(&self.inner.servers);
        if let Some(s) = server {
            if !servers.contains_key(s) {
                return Err(server_not_found(s));
            }
        }
        let mut out = Vec::new();
        for (name, slot) in servers.iter() {
            if server.is_some_and(|s| s != name) || slot.status != Status::Connected {
                continue;
            }
            for (tool, t) in slot.visible_tools() {
                let mut entry = json!({
                    "name": catalog_name(name, tool),
                    "server": name,
                    "original_name": tool,
                    "description": t.get("description").cloned().unwrap_or(json!("")),
                    "input_schema": t.get("inputSchema").cloned().unwrap_or(json!({"type": "object"})),
                });
                copy_fields(
                    t,
                    &mut entry,
                    &[
                        ("title", "title"),
                        ("outputSchema", "output_schema"),
                        ("annotations", "annotations"),
                    ],
                );
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// Resolves a tool name (`server/tool`, or a bare name offered by exactly one connected
    /// server) to the live connection, its original name and its timeout.
    fn route(&self, name: &str) -> Result<Routed, (ApiError, Option<String>)> {
        let servers = lock(&self.inner.servers);
        // A known server prefix decides before any catalog lookup.
        if let Some((server, tool)) = name.split_once('/') {
            if let Some(slot) = servers.get(server) {
                if slot.status != Status::Connected {
                    return Err((
                        not_connected(server, slot.status, slot.error.as_deref()),
                        Some(server.to_owned()),
                    ));
                }
                if !slot.config.tool_filter().allows(tool) {
                    return Err((
                        ApiError::new(
                            403,
                            "tool_denied",
                            format!("tool {name:?} is not allowed by the configuration of server {server:?} (allowed_tools / denied_tools)"),
                        )
                        .with("tool", name),
                        Some(server.to_owned()),
                    ));
                }
                // The common case, `server/tool` naming a tool the server lists: the same
                // answer the catalog gives (a qualified name resolves first), without building it.
                if let Some(live) = &slot.live {
                    if slot.visible_tools().any(|(t, _)| t == tool) {
                        return Ok(Routed {
                            server: server.to_owned(),
                            tool: tool.to_owned(),
                            live: live.clone(),
                            timeout: slot.config.timeout,
                        });
                    }
                }
            }
        }
        let mut catalog = Catalog::new();
        for (sname, slot) in servers.iter() {
            if slot.status != Status::Connected {
                continue;
            }
            catalog.add_server(sname);
            for (tool, _) in slot.visible_tools() {
                catalog.add_tool(sname, tool);
            }
        }
        let resolved = catalog.resolve(name).map_err(|e| {
            let status = match e {
                ResolveError::EmptyName => 400,
                ResolveError::Ambiguous { .. } => 409,
                _ => 404,
            };
            let mut err = ApiError::new(status, e.code(), e.to_string()).with("tool", name);
            if let ResolveError::Ambiguous { candidates, .. } = &e {
                err = err.with("candidates", json!(candidates));
            }
            if let ResolveError::ServerNotFound { server } = &e {
                err = err.with("server", server.as_str());
            }
            (err, None)
        })?;
        let slot = &servers[resolved.server];
        match &slot.live {
            Some(live) => Ok(Routed {
                server: resolved.server.to_owned(),
                tool: resolved.tool.to_owned(),
                live: live.clone(),
                timeout: slot.config.timeout,
            }),
            None => Err((
                not_connected(resolved.server, slot.status, slot.error.as_deref()),
                Some(resolved.server.to_owned()),
            )),
        }
    }

    /// Calls a tool. The result is the server's `CallToolResult`, untouched (an `isError`
    /// result is a success here: the call reached the tool).
    /// `cancel`, when given, ends the wait early (the server is sent `notifications/cancelled`);
    /// `progress`, when given, receives the params of the server's progress notifications.
    pub fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        cancel: Option<&crossbeam_channel::Receiver<()>>,
        progress: Option<Sender<Value>>,
    ) -> Result<CallOutcome, CallFailure> {
        // A server still connecting (at start-up) is waited for, up to the connect timeout.
        if let Some((server, _)) = name.split_once('/') {
            self.wait_for(server);
        } else {
            self.wait_settled(self.inner.timing.connect_timeout);
        }
        let Routed {
            server,
            tool,
            live,
            timeout,
        } = self.route(name).map_err(|(error, server)| CallFailure {
            error,
            server,
            original_name: None,
            sent: false,
        })?;
        let params = json!({"name": tool, "arguments": arguments});
        let fail = |error: ApiError| CallFailure {
            error,
            server: Some(server.clone()),
            original_name: Some(tool.clone()),
            sent: true,
        };
        let reply = match progress {
            Some(tx) => live
                .peer
                .request_with_progress("tools/call", params, timeout, cancel, tx),
            None => live
                .peer
                .request_cancellable("tools/call", params, timeout, cancel),
        };
        match reply {
            Ok(result) if result.is_object() => Ok(CallOutcome {
                server: server.clone(),
                original_name: tool.clone(),
                result,
            }),
            Ok(other) => Err(fail(ApiError::new(
                502,
                "call_failed",
                format!(
                    "the server answered tools/call with a non-object result: {}",
                    super::peer::preview(&other.to_string())
                ),
            ))),
            Err(f) => Err(fail(failure_error(&server, "call", &f))),
        }
    }

    fn wait_for(&self, server: &str) {
        let deadline = Instant::now() + self.inner.timing.connect_timeout;
        while Instant::now() < deadline {
            let connecting = lock(&self.inner.servers)
                .get(server)
                .is_some_and(|s| s.status == Status::Connecting);
            if !connecting {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn live_of(&self, server: &str) -> Result<(Arc<Live>, Duration), ApiError> {
        self.wait_for(server);
        let servers = lock(&self.inner.servers);
        let slot = servers
            .get(server)
            .ok_or_else(|| server_not_found(server))?;
        match (&slot.live, slot.status) {
            (Some(live), Status::Connected) => Ok((live.clone(), slot.config.timeout)),
            _ => Err(not_connected(server, slot.status, slot.error.as_deref())),
        }
    }

    /// Resources of every connected server (or of `server`), each with its `server`. A server
    /// that fails to list is reported in `errors` instead of failing the whole listing.
    pub fn resources(&self, server: Option<&str>) -> Result<Value, ApiError> {
        let targets: Vec<String> = match server {
            Some(s) => {
                self.live_of(s)?;
                vec![s.to_owned()]
            }
            None => {
                self.wait_settled(self.inner.timing.connect_timeout);
                lock(&self.inner.servers)
                    .iter()
                    .filter(|(_, s)| s.status == Status::Connected)
                    .map(|(n, _)| n.clone())
                    .collect()
            }
        };
        let mut resources = Vec::new();
        let mut errors = Map::new();
        let mut skipped = Map::new();
        for name in targets {
            let Ok((live, timeout)) = self.live_of(&name) else {
                continue;
            };
            if !live.init.capabilities.contains_key("resources") {
                continue;
            }
            match list_bounded(&name, &live.peer, Kind::Resources, timeout) {
                Ok(Listed {
                    tools: list,
                    skipped: s,
                }) => {
                    if s.total() > 0 {
                        skipped.insert(
                            name.clone(),
                            json!({"invalid": s.invalid_name, "duplicate": s.duplicate,
                                "over_limit": s.over_limit}),
                        );
                    }
                    for r in list {
                        let mut entry = json!({
                            "uri": r.get("uri").cloned().unwrap_or(Value::Null),
                            "server": name,
                            "name": r.get("name").cloned().unwrap_or(Value::Null),
                            "description": r.get("description").cloned().unwrap_or(Value::Null),
                            "mime_type": r.get("mimeType").cloned().unwrap_or(Value::Null),
                        });
                        copy_fields(
                            &r,
                            &mut entry,
                            &[
                                ("title", "title"),
                                ("size", "size"),
                                ("annotations", "annotations"),
                            ],
                        );
                        resources.push(entry);
                    }
                }
                Err(f) => {
                    errors.insert(name.clone(), json!(f.to_string()));
                }
            }
        }
        let mut out = json!({"resources": resources, "errors": errors});
        if !skipped.is_empty() {
            // Only when something was skipped: by server, by reason.
            out["skipped"] = Value::Object(skipped);
        }
        Ok(out)
    }

    /// Reads a resource: `{content, mime_type, contents}` where `content` is the first text
    /// (or base64 blob) and `contents` the server's full list.
    pub fn read_resource(&self, server: &str, uri: &str) -> Result<Value, ApiError> {
        let (live, timeout) = self.live_of(server)?;
        match live
            .peer
            .request("resources/read", json!({"uri": uri}), timeout)
        {
            Ok(result) => {
                let contents = result
                    .get("contents")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let first = contents.first();
                let content = first
                    .and_then(|c| c.get("text").or_else(|| c.get("blob")))
                    .cloned()
                    .unwrap_or(Value::Null);
                let mime = first
                    .and_then(|c| c.get("mimeType"))
                    .cloned()
                    .unwrap_or(Value::Null);
                Ok(
                    json!({"server": server, "uri": uri, "content": content, "mime_type": mime, "contents": contents}),
                )
            }
            Err(Failure::Rpc { code, message, .. })
                if code == -32002 || message.to_ascii_lowercase().contains("not found") =>
            {
                Err(ApiError::new(
                    404,
                    "resource_not_found",
                    format!("server {server:?} has no resource {uri:?}: {message}"),
                )
                .with("uri", uri)
                .with("server", server))
            }
            Err(f) => Err(failure_error(server, "read", &f).with("uri", uri)),
        }
    }

    /// Stops everything: ends every connection, stops every child (closing stdin, SIGTERM,
    /// SIGKILL to its process group) and waits until each is reaped. Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        // Watchers hear nothing more: their threads end.
        lock(&self.inner.watchers).clear();
        let lives: Vec<Arc<Live>> = {
            let mut servers = lock(&self.inner.servers);
            servers
                .values_mut()
                .filter_map(|s| {
                    s.gen += 1;
                    s.retry_at = None;
                    s.live.take()
                })
                .collect()
        };
        let _ = self.inner.events.send(Event::Stop);
        let supervisor = std::mem::replace(&mut *lock(&self.supervisor), Supervisor::Stopped);
        if let Supervisor::Running(h) = supervisor {
            let _ = h.join();
        }
        for live in &lives {
            if live.proc.is_none() {
                live.peer.shutdown("the server is shutting down");
            }
        }
        let procs: Vec<Arc<Proc>> = lock(&self.inner.procs).drain(..).collect();
        let grace = self.inner.timing.kill_grace.min(SHUTDOWN_GRACE);
        let stoppers: Vec<_> = procs
            .into_iter()
            .filter_map(|p| {
                thread::Builder::new()
                    .name("upstream-stop".into())
                    .spawn(move || p.stop_within(grace))
                    .ok()
            })
            .collect();
        for h in stoppers {
            let _ = h.join();
        }
        for live in &lives {
            live.peer.closed("the server is shutting down");
        }
    }
}

/// Maps a request failure to the error a caller sees.
fn failure_error(server: &str, what: &str, f: &Failure) -> ApiError {
    match f {
        Failure::Timeout(d) => ApiError::new(
            504,
            "call_timeout",
            format!(
                "server {server:?} did not answer the {what} within {} (its timeout_s); the request was cancelled",
                show_duration(*d)
            ),
        )
        .with("server", server)
        .with("timeout_s", d.as_secs_f64()),
        Failure::Disconnected(why) => ApiError::new(
            502,
            "call_failed",
            format!("server {server:?} disconnected during the {what}: {why}"),
        )
        .with("server", server),
        Failure::Rpc {
            code,
            message,
            data,
        } => {
            let mut e = ApiError::new(
                502,
                "call_failed",
                format!("server {server:?} answered with error {code}: {message}"),
            )
            .with("server", server)
            .with("upstream_code", *code);
            if let Some(d) = data {
                e = e.with("upstream_data", d.clone());
            }
            e
        }
        Failure::InputRequired(kinds) => ApiError::new(
            502,
            "input_required",
            format!("server {server:?} cannot complete the {what}: {f}; the {what} was not retried"),
        )
        .with("server", server)
        .with("input_requests", json!(kinds))
        .with_hint(
            "The external server needs sampling, elicitation or roots from its client, which this debugger does not \
             provide; use another tool or call that server from a client that supports them.",
        ),
        Failure::Cancelled => ApiError::new(
            400,
            "cancelled",
            format!("the {what} was cancelled by the caller; server {server:?} was told"),
        )
        .with("server", server),
        other => ApiError::new(
            502,
            "call_failed",
            format!("server {server:?}: {other}"),
        )
        .with("server", server),
    }
}

/// Copies the optional fields `from` → `to` that `source` has into `target`.
fn copy_fields(source: &Value, target: &mut Value, pairs: &[(&str, &str)]) {
    for (from, to) in pairs {
        if let Some(v) = source.get(*from) {
            target[*to] = v.clone();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
