//! Command-line flags and the resolved configuration. `Args` is what argh parses; `Config` is
//! what the server runs with, every path and default resolved. Pure apart from reading the
//! environment variables passed in through `Env`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use argh::{ArgsInfo, FromArgs};

use crate::error::Error;
use crate::ids;
use crate::upstream::config::ClientFlags;
use crate::upstream::timing::Timing;

/// Default port, as the original's.
pub const DEFAULT_PORT: u16 = 5174;

/// cideldill-server: a breakpoint server for Python programs instrumented with the CID el Dill
/// client (cideldill_client). Calls of wrapped functions are reported here; the server decides
/// whether each runs, pauses, is skipped, modified, replaced or raises.
#[derive(FromArgs, ArgsInfo, Debug)]
#[argh(
    note = "Environment: CIDELDILL_HOME (data directory, default ~/.cideldill), CIDELDILL_PORT_FILE \
(port file path), RUST_LOG (log filter on stderr, default info)."
)]
pub struct Args {
    /// address to bind (default 127.0.0.1; a non-loopback address also needs --allow-remote)
    #[argh(option, arg_name = "addr", default = "String::from(\"127.0.0.1\")")]
    pub host: String,

    /// port to listen on (default 5174; 0 picks any free port; a port already in use falls back
    /// to a free one, and the port actually bound is written to the port file)
    #[argh(option, arg_name = "n")]
    pub port: Option<u16>,

    /// keep everything in memory: nothing is written to disk
    #[argh(switch)]
    pub memory: bool,

    /// with --mcp: start a server of its own even when the port file names a running one
    /// (by default --mcp joins that server's session, given no --db, --memory or --port)
    #[argh(switch)]
    pub standalone: bool,

    /// database file (append-only log; created if missing, in a directory that must exist;
    /// reopened with its objects, records, history and breakpoints if present; :memory: means
    /// --memory). Default: a new file $CIDELDILL_HOME/db/cideldill-<timestamp>-<pid>.db (home
    /// default ~/.cideldill, whose db directory is created)
    #[argh(option, arg_name = "path")]
    pub db: Option<PathBuf>,

    /// file to write the bound port to (default $CIDELDILL_PORT_FILE, else $CIDELDILL_HOME/port,
    /// else ~/.cideldill/port); removed on a clean exit
    #[argh(option, arg_name = "path")]
    pub port_file: Option<PathBuf>,

    /// largest request body accepted, in MiB (default 64); larger requests get 413, and note that
    /// the Python client exits when /api/call/start answers 413
    #[argh(
        option,
        arg_name = "mib",
        default = "crate::limits::DEFAULT_MAX_BODY_MB"
    )]
    pub max_body_mb: u64,

    /// call records (and breakpoint history entries) kept in memory (default 100000); older ones
    /// stay in the database file and are read from it, or with --memory are dropped and counted
    #[argh(option, arg_name = "n", default = "crate::limits::DEFAULT_MAX_RECORDS")]
    pub max_records: usize,

    /// memory the call records (and, separately, the breakpoint history) kept in memory may
    /// take, in MiB (default 256); the oldest fall out first, as by --max-records
    #[argh(
        option,
        arg_name = "mib",
        default = "crate::limits::DEFAULT_MAX_RECORDS_MB"
    )]
    pub max_records_mb: usize,

    /// allow binding a non-loopback --host. The server relays code evaluation into the debugged
    /// program: never expose it to untrusted networks
    #[argh(switch)]
    pub allow_remote: bool,

    /// most open HTTP connections (default 1024, lowered to fit the open-file limit); one more
    /// is answered 503 and closed
    #[argh(
        option,
        arg_name = "n",
        default = "crate::limits::DEFAULT_MAX_CONNECTIONS"
    )]
    pub max_connections: usize,

    /// seconds a REPL eval waits for the debugged program's answer (default 30)
    #[argh(
        option,
        arg_name = "seconds",
        default = "crate::limits::DEFAULT_REPL_TIMEOUT_S"
    )]
    pub repl_timeout_s: f64,

    /// poll interval the server asks paused clients to use, in ms (default 100)
    #[argh(option, arg_name = "ms", default = "100")]
    pub poll_interval_ms: u64,

    /// poll timeout sent to paused clients, in ms (default 60000; clients only log it)
    #[argh(option, arg_name = "ms", default = "60000")]
    pub poll_timeout_ms: u64,

    /// serve MCP on stdin/stdout for an AI agent; stdout then carries only JSON-RPC messages.
    /// Given no --db, --memory, --port or --standalone, it joins the server that the port file
    /// names, if one runs (the agent shares its session); otherwise it starts a server, whose
    /// HTTP side keeps serving the debugged program
    #[argh(switch)]
    pub mcp: bool,

    /// with --mcp: exit when stdin closes (default: keep serving HTTP so a paused program is not
    /// cut off)
    #[argh(switch)]
    pub exit_on_stdin_close: bool,

    /// also serve the legacy MCP HTTP+SSE transport at /mcp/sse (Streamable HTTP at /mcp is on
    /// by default on a loopback --host; on another host this flag turns it on too)
    #[argh(switch)]
    pub mcp_sse: bool,

    /// an extra browser Origin allowed on every endpoint besides the server's own, e.g.
    /// https://tools.example (repeatable; "*" allows any)
    #[argh(option, arg_name = "origin")]
    pub allow_origin: Vec<String>,

    /// a directory whose source files the web UI's call stack and frame pages may show
    /// (repeatable; when given, only files under these; default: source files anywhere but
    /// /proc, /sys, /dev and /etc)
    #[argh(option, arg_name = "dir")]
    pub source_root: Vec<PathBuf>,

    /// most concurrent MCP HTTP sessions (default 64; more get 503)
    #[argh(
        option,
        arg_name = "n",
        default = "crate::limits::DEFAULT_MCP_MAX_SESSIONS"
    )]
    pub mcp_max_sessions: usize,

    /// items per page of MCP list results (default 100)
    #[argh(
        option,
        arg_name = "n",
        default = "crate::limits::DEFAULT_MCP_PAGE_SIZE"
    )]
    pub mcp_page_size: usize,

    /// connect to the external MCP servers of the default config file
    /// ($CIDELDILL_MCP_CLIENTS_CONFIG, else $CIDELDILL_HOME/mcp_clients.json, else
    /// ~/.cideldill/mcp_clients.json); a missing default file means no servers
    #[argh(switch)]
    pub mcp_clients: bool,

    /// connect to the external MCP servers of this config file ({"servers": …} or a Claude-style
    /// {"mcpServers": …}); a missing file is an error
    #[argh(option, arg_name = "path")]
    pub mcp_clients_config: Option<String>,

    /// connect to one external MCP server, NAME:COMMAND ARGS… (stdio) or NAME:URL (Streamable
    /// HTTP, falling back to legacy SSE); repeatable; wins over a config entry of the same name
    #[argh(option, arg_name = "name:value")]
    pub mcp_client: Vec<String>,

    /// seconds an external MCP server may take to start and initialize (default 30)
    #[argh(
        option,
        arg_name = "seconds",
        default = "crate::limits::UPSTREAM_CONNECT_TIMEOUT.as_secs_f64()"
    )]
    pub mcp_connect_timeout_s: f64,

    /// seconds between health pings of connected external MCP servers (default 15)
    #[argh(option, arg_name = "seconds", default = "15.0")]
    pub mcp_ping_interval_s: f64,

    /// first delay of the automatic reconnection backoff, in seconds: attempts wait 1, 2, 4, 8
    /// and 16 times this (default 1), then the server is marked failed
    #[argh(option, arg_name = "seconds", default = "1.0")]
    pub mcp_backoff_base_s: f64,

    /// print the version and exit
    #[argh(switch)]
    pub version: bool,

    /// seconds a Streamable HTTP MCP session may stay idle (no request in flight, no open
    /// stream) before it is closed and its client must initialize again (default 1800)
    #[argh(
        option,
        arg_name = "seconds",
        default = "crate::limits::MCP_SESSION_IDLE_S"
    )]
    pub mcp_session_idle_s: f64,
}

/// The short usage lines of `--help` (argh's own names every flag on one line).
pub const USAGE: &str = "\
Usage: cideldill-server [--port <n>] [--db <path> | --memory] [flags]
       cideldill-server --mcp [flags]    the MCP server of an AI agent on stdio
       cideldill-server --help | --version";

/// What the exit status means (`--help` and docs/flags.md say it).
pub const EXIT_STATUS: &str =
    "Exit status: 0 ok, 1 runtime failure, 2 usage or configuration error.";

/// A group of flags: a heading of `--help` and of docs/flags.md, its flags in the order shown,
/// and a sentence docs/flags.md writes after its table (or "").
pub struct FlagGroup {
    pub title: &'static str,
    pub flags: &'static [FlagDoc],
    pub note: &'static str,
}

/// One flag as docs/flags.md describes it (markdown): its default and what it does. Its line in
/// `--help` is argh's own description, the doc comment of its field in `Args`, read through
/// `argh::ArgsInfo`; the value it takes is the field's `arg_name`.
pub struct FlagDoc {
    pub name: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// THE table of flags, by face: the groups and order of `--help` (`grouped_help`) and the
/// tables of docs/flags.md (`flags_markdown`, tidy-checked). Every flag argh knows is in exactly
/// one group, and every flag here is one argh knows (unit-tested).
pub const FLAGS: &[FlagGroup] = &[
    FlagGroup {
        title: "Server and storage",
        flags: &[
            FlagDoc {
                name: "--host",
                default: "`127.0.0.1`",
                doc: "Address to bind. A non-loopback address also needs `--allow-remote`.",
            },
            FlagDoc {
                name: "--port",
                default: "`5174`",
                doc: "Port; `0` picks a free one. If the port is taken, the server says so and binds a \
                    free one.",
            },
            FlagDoc {
                name: "--db",
                default: "new file",
                doc: "Database file: created if missing, reopened with its objects, call records, \
                    history and breakpoint settings (breakpoints with their options, behaviors, \
                    replacements, the default behavior) if present (files of the previous format are \
                    read and upgraded). An index of its records, `PATH.idx`, lives beside it and is \
                    rebuilt at every open. Locked while the server runs: a second server on the same \
                    file exits 1, naming the pid that holds it. Created 0600, its directory 0700. \
                    Its directory must exist (exit 2 otherwise; the default `$CIDELDILL_HOME/db` is \
                    created); `:memory:` means `--memory`.",
            },
            FlagDoc {
                name: "--memory",
                default: "off",
                doc: "Keep everything in memory.",
            },
            FlagDoc {
                name: "--port-file",
                default: "see below",
                doc: "Where the bound port (bare digits) is written, unless it names another live \
                    server, which keeps it; removed on a clean exit (Ctrl-C, SIGTERM) if this server \
                    wrote it and it still holds its port. Only a small regular file of digits is \
                    ever replaced; anything else at the path (other content, a link, a FIFO, a \
                    device) makes the server exit 1 and is left alone. A secret `PATH.<port>.secret` \
                    (0600) lies beside it, which `--mcp` checks before joining.",
            },
        ],
        note: "",
    },
    FlagGroup {
        title: "Web UI and trust",
        flags: &[
            FlagDoc {
                name: "--allow-remote",
                default: "off",
                doc: "Allow a non-loopback `--host` (prints a warning; see the trust model).",
            },
            FlagDoc {
                name: "--allow-origin",
                default: "none",
                doc: "An extra browser `Origin` (`scheme://host[:port]`, no path; anything else exits \
                    2) allowed on every endpoint besides the server's own `http://localhost:<port>` \
                    (repeatable; `*` allows any, as the original did, with a warning at start; other \
                    origins get 403, and on the browser-client endpoints wait to be allowed in the \
                    web UI, see the trust model).",
            },
            FlagDoc {
                name: "--source-root",
                default: "none",
                doc: "A directory whose source files the web UI's call stack and frame pages may show \
                    (repeatable; a missing directory exits 2). Without it, any file with a Python or \
                    JavaScript/TypeScript extension (`.py`, `.pyw`, `.pyi`, `.pyx`, `.pxd`, `.js`, \
                    `.mjs`, `.cjs`, `.jsx`, `.ts`, `.mts`, `.cts`, `.tsx`) holding text is shown, \
                    except under `/proc`, `/sys`, `/dev` and `/etc` (after resolving links); with \
                    it, only such files under one of these directories (a root under `/etc` widens \
                    the default, any other narrows it).",
            },
        ],
        note: "",
    },
    FlagGroup {
        title: "Debug clients (the instrumented Python programs)",
        flags: &[
            FlagDoc {
                name: "--poll-interval-ms",
                default: "`100`",
                doc: "Poll interval the server asks paused clients to use.",
            },
            FlagDoc {
                name: "--poll-timeout-ms",
                default: "`60000`",
                doc: "Poll timeout sent to clients (they only log it and keep waiting).",
            },
            FlagDoc {
                name: "--repl-timeout-s",
                default: "`30`",
                doc: "How long a REPL eval waits for the paused program.",
            },
        ],
        note: "",
    },
    FlagGroup {
        title: "MCP server (AI agents)",
        flags: &[
            FlagDoc {
                name: "--mcp",
                default: "off",
                doc: "Serve MCP on stdin/stdout for an AI agent. Given no `--db`, `--memory`, `--port` \
                    or `--standalone`, it joins the server the port file names if one runs; \
                    otherwise it starts one (see [Use it from an AI agent](mcp.md)).",
            },
            FlagDoc {
                name: "--standalone",
                default: "off",
                doc: "Only with `--mcp` (exit 2 otherwise): start a server of its own even when the \
                    port file names a running one.",
            },
            FlagDoc {
                name: "--exit-on-stdin-close",
                default: "off",
                doc: "With `--mcp`, in a server it started: exit when the agent closes stdin.",
            },
            FlagDoc {
                name: "--mcp-sse",
                default: "off",
                doc: "Also serve the legacy HTTP+SSE transport at `/mcp/sse`. Streamable HTTP at \
                    `/mcp` is on without it on a loopback `--host`; on another host this flag turns \
                    it on too.",
            },
            FlagDoc {
                name: "--mcp-page-size",
                default: "`100`",
                doc: "Items per page of MCP list results.",
            },
            FlagDoc {
                name: "--mcp-session-idle-s",
                default: "`1800`",
                doc: "A Streamable HTTP session with no request in flight and no stream open for this \
                    long is closed (its client gets 404 and initializes again).",
            },
        ],
        note: "",
    },
    FlagGroup {
        title: "External MCP servers (this server as an MCP client)",
        flags: &[
            FlagDoc {
                name: "--mcp-clients",
                default: "off",
                doc: "Connect to the external MCP servers of the default config file (see [External \
                    MCP servers](mcp.md#external-mcp-servers)); a missing default file means none.",
            },
            FlagDoc {
                name: "--mcp-clients-config",
                default: "none",
                doc: "Connect to the external MCP servers of this file (`{\"servers\": …}` or a \
                    Claude-style `{\"mcpServers\": …}`); a missing file is an error.",
            },
            FlagDoc {
                name: "--mcp-client",
                default: "none",
                doc: "Connect to one external MCP server: `NAME:COMMAND ARGS…` (stdio) or `NAME:URL` \
                    (Streamable HTTP, falling back to legacy SSE). Repeatable; wins over a file \
                    entry of the same name.",
            },
            FlagDoc {
                name: "--mcp-connect-timeout-s",
                default: "`30`",
                doc: "How long an external server may take to start, initialize and list its tools \
                    (then its status is `error`).",
            },
            FlagDoc {
                name: "--mcp-ping-interval-s",
                default: "`15`",
                doc: "Health ping interval for connected external servers.",
            },
            FlagDoc {
                name: "--mcp-backoff-base-s",
                default: "`1`",
                doc: "Automatic reconnection waits 1, 2, 4, 8 and 16 times this, then marks the server \
                    `failed`.",
            },
        ],
        note: "",
    },
    FlagGroup {
        title: "Limits",
        flags: &[
            FlagDoc {
                name: "--max-body-mb",
                default: "`64`",
                doc: "Largest request body; larger ones get 413. **A 413 on `/api/call/start` makes \
                    the Python client exit**, so raise this if your program passes very large \
                    arguments.",
            },
            FlagDoc {
                name: "--max-records",
                default: "`100000`",
                doc: "Call records (and, separately, breakpoint history entries) kept in memory. With \
                    `--memory` older ones are dropped (`/api/status` counts them in \
                    `calls_dropped`); with a database file they stay in the file.",
            },
            FlagDoc {
                name: "--max-records-mb",
                default: "`256`",
                doc: "Memory the call records kept in memory may take (and, separately, the breakpoint \
                    history): records are counted by what they keep that no other record shares (a \
                    typical call a few hundred bytes; large values from events, unusual items or \
                    external tools count whole); the oldest fall out first, as with `--max-records`.",
            },
            FlagDoc {
                name: "--max-connections",
                default: "`1024`",
                doc: "Most open HTTP connections, lowered to fit the open-file limit (the \
                    [limits table](limits.md) says how many file descriptors each holds); one more is answered 503 and closed.",
            },
            FlagDoc {
                name: "--mcp-max-sessions",
                default: "`64`",
                doc: "Most concurrent MCP HTTP sessions (both transports). At the cap, the Streamable \
                    HTTP session idle longest (no request in flight, no stream open) is closed to \
                    make room; when every session is in use, `initialize` gets 503.",
            },
        ],
        note: "Every other limit is fixed; the [limits table](limits.md) lists them all.",
    },
    FlagGroup {
        title: "Information",
        flags: &[
            FlagDoc {
                name: "--version",
                default: "",
                doc: "Print `cideldill-server <version>` on stdout and exit.",
            },
            FlagDoc {
                name: "--help",
                default: "",
                doc: "Print the flags, grouped as here, on stdout and exit.",
            },
        ],
        note: "",
    },
];

/// Where `--help` starts a flag's description, as argh's own help does.
const HELP_INDENT: usize = 20;

/// The flags argh knows, from its structured description of `Args` (`--help` included).
fn argh_flags() -> Vec<&'static argh::FlagInfo<'static>> {
    Args::get_args_info()
        .flags
        .iter()
        .filter(|f| !f.hidden)
        .collect()
}

/// A description as argh's help prints it: `ArgsInfo` gives the text as a format string, braces
/// doubled.
fn argh_text(text: &str) -> String {
    text.replace("{{", "{").replace("}}", "}")
}

/// The value a flag takes, as `--help` names it (`<origin...>` for a repeatable one), if any.
fn flag_value(flag: &argh::FlagInfo<'_>) -> Option<String> {
    match flag.kind {
        argh::FlagInfoKind::Switch => None,
        argh::FlagInfoKind::Option { arg_name } => Some(match flag.optionality {
            argh::Optionality::Repeating => format!("<{arg_name}...>"),
            _ => format!("<{arg_name}>"),
        }),
    }
}

/// One flag of `--help`: its name and value, then its description from column 20 (on the next
/// line when the two do not fit before it), wrapped at 80 columns.
fn render_flag(flag: &argh::FlagInfo<'_>, out: &mut String) {
    let mut line = format!("  {}", flag.long);
    if let Some(value) = flag_value(flag) {
        line.push(' ');
        line.push_str(&value);
    }
    if line.chars().count() >= HELP_INDENT {
        out.push_str(&line);
        out.push('\n');
        line.clear();
    }
    for word in argh_text(flag.description).split_whitespace() {
        let len = line.chars().count();
        if len > HELP_INDENT && len + 1 + word.chars().count() > 80 {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        let len = line.chars().count();
        if len < HELP_INDENT {
            line.push_str(&" ".repeat(HELP_INDENT - len));
        } else {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// `--help`: a short usage, the description, then the flags grouped as in `FLAGS`, each with
/// the value it takes and argh's own description of it, then the environment and the exit
/// status. A flag of argh's that no group names (there is none: a unit test checks) would be
/// listed under "Other" rather than lost.
pub fn grouped_help() -> String {
    let info = Args::get_args_info();
    let flags = argh_flags();
    let mut out = String::new();
    out.push_str(USAGE);
    out.push_str("\n\n");
    wrap(&argh_text(info.description), 80, &mut out);
    for group in FLAGS {
        out.push_str(&format!("\n{}:\n", group.title));
        for doc in group.flags {
            if let Some(flag) = flags.iter().find(|f| f.long == doc.name) {
                render_flag(flag, &mut out);
            }
        }
    }
    let others: Vec<_> = flags
        .iter()
        .filter(|f| {
            !FLAGS
                .iter()
                .any(|g| g.flags.iter().any(|d| d.name == f.long))
        })
        .collect();
    if !others.is_empty() {
        out.push_str("\nOther:\n");
        for flag in others {
            render_flag(flag, &mut out);
        }
    }
    out.push('\n');
    for note in info.notes {
        wrap(&argh_text(note), 80, &mut out);
    }
    wrap(EXIT_STATUS, 80, &mut out);
    out
}

/// docs/flags.md's tables (between its `flags` markers): a `##` heading and a table per group
/// of `FLAGS`, each flag with the value it takes (argh's `arg_name`, in capitals).
pub fn flags_markdown() -> String {
    let flags = argh_flags();
    let mut out = String::new();
    for group in FLAGS {
        out.push_str(&format!(
            "## {}\n\n| Flag | Default | Meaning |\n|---|---|---|\n",
            group.title
        ));
        for doc in group.flags {
            let value = flags
                .iter()
                .find(|f| f.long == doc.name)
                .and_then(|f| match f.kind {
                    argh::FlagInfoKind::Option { arg_name } => {
                        Some(format!(" {}", arg_name.to_uppercase()))
                    }
                    argh::FlagInfoKind::Switch => None,
                })
                .unwrap_or_default();
            out.push_str(&format!(
                "| `{}{value}` | {} | {} |\n",
                doc.name, doc.default, doc.doc
            ));
        }
        if !group.note.is_empty() {
            out.push_str(&format!("\n{}\n", group.note));
        }
        out.push('\n');
    }
    out
}

/// Appends `text` to `out` in lines of at most `width` characters (a longer word stays whole).
fn wrap(text: &str, width: usize, out: &mut String) {
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&line);
        out.push('\n');
    }
}

/// Where the server keeps its data.
#[derive(Clone, Debug, PartialEq)]
pub enum Database {
    Memory,
    File(PathBuf),
}

impl Database {
    /// As the banner shows it: the path, or `:memory:`.
    pub fn describe(&self) -> String {
        match self {
            Database::Memory => ":memory:".into(),
            Database::File(p) => p.display().to_string(),
        }
    }
}

/// The resolved configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub host: String,
    pub port: u16,
    pub database: Database,
    pub port_file: PathBuf,
    /// The data directory (`$CIDELDILL_HOME`, else `~/.cideldill`): the databases, the port file
    /// and its secret.
    pub home: PathBuf,
    pub max_body_bytes: u64,
    pub max_records: usize,
    /// Bytes the records window (and the history window) may keep.
    pub max_records_bytes: usize,
    pub allow_remote: bool,
    /// Most open HTTP connections, before the open-file limit lowers it.
    pub max_connections: usize,
    pub repl_timeout: Duration,
    pub poll_interval_ms: u64,
    pub poll_timeout_ms: u64,
    pub mcp_stdio: bool,
    pub exit_on_stdin_close: bool,
    pub mcp_page_size: usize,
    /// Streamable HTTP at `/mcp`: on by default on a loopback bind, else with `--mcp-sse`.
    pub mcp_http: bool,
    /// The legacy HTTP+SSE transport at `/mcp/sse` (`--mcp-sse`).
    pub mcp_legacy_sse: bool,
    /// `--mcp` with nothing that asks for a server of its own (`--db`, `--memory`, `--port`,
    /// `--standalone`): it joins the server the port file names, if one runs.
    pub may_join: bool,
    pub allow_origins: Vec<String>,
    /// `--source-root`: the directories whose source files the web UI may show (empty: any
    /// source file outside the system's own directories; see `ui::source`).
    pub source_roots: Vec<PathBuf>,
    pub mcp_max_sessions: usize,
    /// The default MCP clients config file (`$CIDELDILL_MCP_CLIENTS_CONFIG`, else
    /// `$CIDELDILL_HOME/mcp_clients.json`, else `~/.cideldill/mcp_clients.json`), which
    /// `--mcp-clients` reads; the web UI names it.
    pub mcp_clients_file: PathBuf,
    /// The three flags that ask for external MCP servers (read at start).
    pub mcp_clients: ClientFlags,
    pub upstream_timing: Timing,
    /// A Streamable HTTP session idle this long is closed.
    pub mcp_session_idle: Duration,
}

/// The environment variables the configuration depends on.
#[derive(Clone, Debug, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub cideldill_home: Option<PathBuf>,
    pub cideldill_port_file: Option<PathBuf>,
    pub cideldill_mcp_clients_config: Option<PathBuf>,
    /// This process's id: it names the default database with the time, so two servers
    /// started in the same microsecond (two tests, a script) never pick the same file.
    pub pid: u32,
}

impl Env {
    /// Reads `HOME`, `CIDELDILL_HOME` and `CIDELDILL_PORT_FILE`; empty values count as unset.
    pub fn from_process() -> Env {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Env {
            home: var("HOME"),
            cideldill_home: var("CIDELDILL_HOME"),
            cideldill_port_file: var("CIDELDILL_PORT_FILE"),
            cideldill_mcp_clients_config: var(crate::upstream::config::CONFIG_ENV_VAR),
            pid: std::process::id(),
        }
    }

    fn expand(&self, p: &Path) -> PathBuf {
        match (p.strip_prefix("~"), &self.home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => p.to_path_buf(),
        }
    }

    /// `$CIDELDILL_HOME`, else `~/.cideldill` (else `./.cideldill` with no home at all).
    pub fn data_home(&self) -> PathBuf {
        match (&self.cideldill_home, &self.home) {
            (Some(h), _) => self.expand(h),
            (None, Some(home)) => home.join(".cideldill"),
            (None, None) => PathBuf::from(".cideldill"),
        }
    }

    /// `$CIDELDILL_PORT_FILE`, else `$CIDELDILL_HOME/port`, else `~/.cideldill/port`.
    pub fn port_file(&self) -> PathBuf {
        match &self.cideldill_port_file {
            Some(p) => self.expand(p),
            None => self.data_home().join("port"),
        }
    }

    /// The default MCP clients config file, by the one rule of
    /// `upstream::config::config_path` (which start-up uses to read it).
    pub fn mcp_clients_file(&self) -> PathBuf {
        let text = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
        crate::upstream::config::config_path(&|name: &str| match name {
            "HOME" => text(&self.home),
            "CIDELDILL_HOME" => text(&self.cideldill_home),
            crate::upstream::config::CONFIG_ENV_VAR => text(&self.cideldill_mcp_clients_config),
            _ => None,
        })
    }
}

/// Checks an `--allow-origin` value: `*`, or an origin as a browser sends it,
/// `scheme://host[:port]` with no path (a trailing `/` is tolerated).
fn check_origin(origin: &str) -> Result<(), Error> {
    let bad = || {
        Error::Config(format!(
            "--allow-origin {origin:?} is not an origin: give scheme://host[:port] with no path, \
             as a browser sends it (e.g. http://localhost:3000 or https://tools.example), or \
             \"*\" for any"
        ))
    };
    if origin == "*" {
        return Ok(());
    }
    let (scheme, rest) = origin.split_once("://").ok_or_else(bad)?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or_else(bad)?;
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad());
        }
        match after {
            "" => ("v6", None),
            _ => ("v6", Some(after.strip_prefix(':').ok_or_else(bad)?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~%".contains(c));
    let port_ok =
        port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok());
    if scheme_ok && host_ok && port_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

/// Whether `host` names a loopback address.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Config {
    /// Resolves flags against the environment; `now` names a default database file.
    pub fn from_args(args: &Args, env: &Env, now: f64) -> Result<Config, Error> {
        if args.memory && args.db.is_some() {
            return Err(Error::Config(
                "--memory and --db cannot be used together".into(),
            ));
        }
        if !is_loopback_host(&args.host) && !args.allow_remote {
            return Err(Error::Config(format!(
                "--host {} is not a loopback address; pass --allow-remote to bind it anyway \
                 (the server relays code evaluation into the debugged program)",
                args.host
            )));
        }
        if args.max_body_mb == 0 || args.max_body_mb > 1 << 20 {
            return Err(Error::Config(
                "--max-body-mb must be between 1 and 1048576".into(),
            ));
        }
        if !(args.repl_timeout_s.is_finite()
            && args.repl_timeout_s > 0.0
            && args.repl_timeout_s <= 86_400.0)
        {
            return Err(Error::Config(
                "--repl-timeout-s must be a number of seconds between 0 and 86400".into(),
            ));
        }
        if args.mcp_max_sessions == 0 {
            return Err(Error::Config(
                "--mcp-max-sessions must be at least 1".into(),
            ));
        }
        if args.max_connections == 0 {
            return Err(Error::Config("--max-connections must be at least 1".into()));
        }
        if args.max_records == 0 {
            return Err(Error::Config("--max-records must be at least 1".into()));
        }
        if args.max_records_mb == 0 || args.max_records_mb > (1 << 24) {
            return Err(Error::Config(
                "--max-records-mb must be between 1 and 16777216".into(),
            ));
        }
        if args.mcp_page_size == 0 {
            return Err(Error::Config("--mcp-page-size must be at least 1".into()));
        }
        if args.exit_on_stdin_close && !args.mcp {
            return Err(Error::Config(
                "--exit-on-stdin-close only applies with --mcp".into(),
            ));
        }
        if args.standalone && !args.mcp {
            return Err(Error::Config(
                "--standalone only applies with --mcp (a server started without --mcp is always \
                 a server of its own)"
                    .into(),
            ));
        }
        for origin in &args.allow_origin {
            check_origin(origin)?;
        }
        if args.poll_interval_ms == 0 {
            return Err(Error::Config(
                "--poll-interval-ms must be at least 1".into(),
            ));
        }
        let seconds = |flag: &str, v: f64, max: f64| {
            if v.is_finite() && v > 0.0 && v <= max {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(Error::Config(format!(
                    "{flag} must be a number of seconds above 0 and at most {max}"
                )))
            }
        };
        let ping_interval = seconds("--mcp-ping-interval-s", args.mcp_ping_interval_s, 86_400.0)?;
        let upstream_timing = Timing {
            connect_timeout: seconds(
                "--mcp-connect-timeout-s",
                args.mcp_connect_timeout_s,
                3600.0,
            )?,
            ping_interval,
            // A ping is due again after one interval, so it may not take longer than that.
            ping_timeout: Timing::default().ping_timeout.min(ping_interval),
            ..Timing::default()
        }
        .with_backoff_base(seconds(
            "--mcp-backoff-base-s",
            args.mcp_backoff_base_s,
            3600.0,
        )?);
        // `--db :memory:` is `--memory`, as in the original (SQLite's name for a database that
        // is never written).
        let database = if args.memory || args.db.as_deref() == Some(Path::new(":memory:")) {
            Database::Memory
        } else if let Some(db) = &args.db {
            Database::File(env.expand(db))
        } else {
            let name = format!("cideldill-{}-{}.db", ids::file_timestamp(now), env.pid);
            Database::File(env.data_home().join("db").join(name))
        };
        Ok(Config {
            host: args.host.clone(),
            port: args.port.unwrap_or(DEFAULT_PORT),
            database,
            port_file: args
                .port_file
                .as_deref()
                .map(|p| env.expand(p))
                .unwrap_or_else(|| env.port_file()),
            home: env.data_home(),
            max_body_bytes: args.max_body_mb * 1024 * 1024,
            max_records: args.max_records,
            max_records_bytes: args.max_records_mb << 20,
            allow_remote: args.allow_remote,
            max_connections: args.max_connections,
            repl_timeout: Duration::from_secs_f64(args.repl_timeout_s),
            poll_interval_ms: args.poll_interval_ms,
            poll_timeout_ms: args.poll_timeout_ms,
            mcp_stdio: args.mcp,
            exit_on_stdin_close: args.exit_on_stdin_close,
            mcp_page_size: args.mcp_page_size,
            mcp_http: args.mcp_sse || is_loopback_host(&args.host),
            mcp_legacy_sse: args.mcp_sse,
            may_join: args.mcp
                && !args.standalone
                && !args.memory
                && args.db.is_none()
                && args.port.is_none(),
            allow_origins: args.allow_origin.clone(),
            source_roots: args.source_root.iter().map(|p| env.expand(p)).collect(),
            mcp_max_sessions: args.mcp_max_sessions,
            mcp_clients_file: env.mcp_clients_file(),
            mcp_clients: ClientFlags {
                mcp_clients: args.mcp_clients,
                config: args.mcp_clients_config.clone(),
                inline: args.mcp_client.clone(),
            },
            upstream_timing,
            mcp_session_idle: seconds(
                "--mcp-session-idle-s",
                args.mcp_session_idle_s,
                365.0 * 86_400.0,
            )?,
        })
    }

    /// The checks of the file system that flags need before anything starts: a `--db` file's
    /// directory must exist (the default database directory under the data home is created
    /// at start; a mistyped `--db` directory is not).
    pub fn check_paths(&self, args: &Args) -> Result<(), Error> {
        for root in &self.source_roots {
            if !root.is_dir() {
                return Err(Error::Config(format!(
                    "--source-root {}: not a directory",
                    root.display()
                )));
            }
        }
        let (Some(_), Database::File(path)) = (&args.db, &self.database) else {
            return Ok(());
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(Error::Config(format!(
                "--db {}: the directory {} does not exist (create it first, or give a path in an \
                 existing directory)",
                path.display(),
                dir.display()
            )));
        }
        Ok(())
    }

    /// A configuration for tests and embedding: in memory, any free port on 127.0.0.1.
    pub fn for_tests(port_file: PathBuf) -> Config {
        Config {
            host: "127.0.0.1".into(),
            port: 0,
            database: Database::Memory,
            home: port_file
                .parent()
                .map_or_else(std::env::temp_dir, Path::to_path_buf),
            port_file,
            max_body_bytes: crate::limits::DEFAULT_MAX_BODY_MB * 1024 * 1024,
            max_records: crate::limits::DEFAULT_MAX_RECORDS,
            max_records_bytes: crate::limits::DEFAULT_MAX_RECORDS_BYTES,
            allow_remote: false,
            max_connections: crate::limits::DEFAULT_MAX_CONNECTIONS,
            repl_timeout: Duration::from_secs_f64(crate::limits::DEFAULT_REPL_TIMEOUT_S),
            poll_interval_ms: 100,
            poll_timeout_ms: 60_000,
            mcp_stdio: false,
            exit_on_stdin_close: false,
            mcp_page_size: crate::limits::DEFAULT_MCP_PAGE_SIZE,
            mcp_http: false,
            mcp_legacy_sse: false,
            may_join: false,
            allow_origins: Vec::new(),
            source_roots: Vec::new(),
            mcp_max_sessions: crate::limits::DEFAULT_MCP_MAX_SESSIONS,
            mcp_clients_file: Env::default().mcp_clients_file(),
            mcp_clients: ClientFlags::default(),
            upstream_timing: Timing::default(),
            mcp_session_idle: Duration::from_secs_f64(crate::limits::MCP_SESSION_IDLE_S),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Args {
        Args::from_args(&["cideldill-server"], list).expect("flags parse")
    }

    fn env() -> Env {
        Env {
            home: Some("/home/u".into()),
            ..Env::default()
        }
    }

    #[test]
    fn help_states_the_defaults_that_limits_rs_gives_the_flags() {
        use crate::limits as l;
        let help = Args::from_args(&["cideldill-server"], &["--help"])
            .unwrap_err()
            .output;
        let paragraph = |flag: &str| {
            let mut out = String::new();
            let mut inside = false;
            for line in help.lines() {
                let line = line.trim();
                if line.starts_with("--") {
                    inside = line.split_whitespace().next() == Some(flag);
                }
                if inside {
                    out.push(' ');
                    out.push_str(line);
                }
            }
            out
        };
        let defaults = [
            ("--max-body-mb", l::DEFAULT_MAX_BODY_MB.to_string()),
            ("--max-records", l::DEFAULT_MAX_RECORDS.to_string()),
            ("--max-records-mb", l::DEFAULT_MAX_RECORDS_MB.to_string()),
            ("--max-connections", l::DEFAULT_MAX_CONNECTIONS.to_string()),
            ("--repl-timeout-s", l::DEFAULT_REPL_TIMEOUT_S.to_string()),
            (
                "--mcp-max-sessions",
                l::DEFAULT_MCP_MAX_SESSIONS.to_string(),
            ),
            ("--mcp-page-size", l::DEFAULT_MCP_PAGE_SIZE.to_string()),
            (
                "--mcp-connect-timeout-s",
                l::UPSTREAM_CONNECT_TIMEOUT.as_secs_f64().to_string(),
            ),
            ("--mcp-session-idle-s", l::MCP_SESSION_IDLE_S.to_string()),
        ];
        for (flag, value) in defaults {
            let text = paragraph(flag);
            assert!(
                text.contains(&format!("(default {value}")),
                "{flag}: the help does not say (default {value}: {text}"
            );
            let doc = FLAGS
                .iter()
                .flat_map(|g| g.flags)
                .find(|d| d.name == flag)
                .unwrap_or_else(|| panic!("{flag} is not in FLAGS"));
            assert_eq!(
                doc.default,
                format!("`{value}`"),
                "{flag}: docs/flags.md's default"
            );
        }
    }

    #[test]
    fn every_flag_argh_knows_is_in_exactly_one_group_of_the_flag_table() {
        let known: Vec<&str> = argh_flags().iter().map(|f| f.long).collect();
        assert!(known.len() >= 25, "argh's flags: {known:?}");
        for flag in &known {
            let groups: Vec<&str> = FLAGS
                .iter()
                .filter(|g| g.flags.iter().any(|d| d.name == *flag))
                .map(|g| g.title)
                .collect();
            assert_eq!(groups.len(), 1, "{flag} is in the groups {groups:?}");
        }
        for group in FLAGS {
            for doc in group.flags {
                assert!(
                    known.contains(&doc.name),
                    "{}: argh knows no {}",
                    group.title,
                    doc.name
                );
                assert!(!doc.doc.is_empty(), "{}: no text", doc.name);
            }
        }
    }

    #[test]
    fn grouped_help_shows_each_flag_once_with_its_value_and_argh_description() {
        let help = grouped_help();
        for flag in argh_flags() {
            assert!(!flag.description.is_empty(), "{flag:?}");
            let heads: Vec<usize> = help
                .match_indices("\n  --")
                .map(|(at, _)| at + 3)
                .filter(|at| help[*at..].split_whitespace().next() == Some(flag.long))
                .collect();
            assert_eq!(heads.len(), 1, "{}: {help}", flag.long);
            // The flag's paragraph: up to the next flag or heading.
            let rest = &help[heads[0]..];
            let end = rest[1..]
                .find("\n  --")
                .map(|e| e + 1)
                .into_iter()
                .chain(rest.find("\n\n"))
                .min()
                .unwrap_or(rest.len());
            let shown: Vec<&str> = rest[..end].split_whitespace().collect();
            let value = flag_value(flag);
            let head = [Some(flag.long), value.as_deref()];
            let said: Vec<String> = head
                .into_iter()
                .flatten()
                .map(str::to_owned)
                .chain(
                    argh_text(flag.description)
                        .split_whitespace()
                        .map(str::to_owned),
                )
                .collect();
            assert_eq!(shown, said, "{}", flag.long);
        }
        assert!(
            help.contains("\n  --host <addr>     address to bind"),
            "{help}"
        );
        assert!(help.contains("\n  --allow-origin <origin...>\n"), "{help}");
        assert!(
            help.contains("\n  --memory          keep everything"),
            "{help}"
        );
        assert!(!help.contains("\nOther:"), "{help}");
        for group in FLAGS {
            let title = group.title;
            assert!(help.contains(&format!("\n{title}:\n")), "{title}");
        }
        assert!(help.starts_with("Usage: cideldill-server "), "{help}");
        assert!(
            help.contains("cideldill-server: a breakpoint server"),
            "{help}"
        );
        assert!(
            help.contains("CIDELDILL_HOME"),
            "the environment note: {help}"
        );
        assert!(help.contains(EXIT_STATUS));
        for line in help.lines() {
            assert!(
                line.chars().count() <= 80,
                "a line over 80 characters: {line}"
            );
        }
    }

    #[test]
    fn defaults_match_the_original_where_it_is_sound() {
        let c = Config::from_args(&args(&[]), &env(), 0.0).unwrap();
        assert_eq!(c.host, "127.0.0.1");
        assert_eq!(c.port, 5174);
        assert_eq!(c.max_body_bytes, 64 << 20);
        assert_eq!(c.repl_timeout, Duration::from_secs(30));
        assert_eq!(c.port_file, PathBuf::from("/home/u/.cideldill/port"));
        assert_eq!(
            c.database,
            Database::File("/home/u/.cideldill/db/cideldill-19700101-000000-000000-0.db".into())
        );
    }

    // The three flags parse and accumulate.
    #[test]
    fn mcp_client_flags_parse_and_timing_defaults_are_the_designs() {
        let c = Config::from_args(&args(&[]), &env(), 0.0).unwrap();
        assert_eq!(c.mcp_clients, ClientFlags::default());
        assert_eq!(c.upstream_timing.connect_timeout, Duration::from_secs(30));
        assert_eq!(c.upstream_timing.ping_interval, Duration::from_secs(15));
        assert_eq!(
            c.upstream_timing.backoff,
            [1, 2, 4, 8, 16].map(Duration::from_secs).to_vec()
        );
        let c = Config::from_args(
            &args(&[
                "--mcp-clients",
                "--mcp-clients-config",
                "/etc/m.json",
                "--mcp-client",
                "a:cmd x",
                "--mcp-client",
                "b:http://h/mcp",
                "--mcp-backoff-base-s",
                "0.1",
            ]),
            &env(),
            0.0,
        )
        .unwrap();
        assert!(c.mcp_clients.mcp_clients);
        assert_eq!(c.mcp_clients.config.as_deref(), Some("/etc/m.json"));
        assert_eq!(c.mcp_clients.inline, ["a:cmd x", "b:http://h/mcp"]);
        assert_eq!(c.upstream_timing.backoff[4], Duration::from_millis(1600));
        assert!(Config::from_args(&args(&["--mcp-connect-timeout-s", "0"]), &env(), 0.0).is_err());
    }

    #[test]
    fn port_file_and_home_follow_the_environment() {
        let mut e = env();
        e.cideldill_home = Some("~/dd".into());
        assert_eq!(e.port_file(), PathBuf::from("/home/u/dd/port"));
        e.cideldill_port_file = Some("/tmp/p".into());
        assert_eq!(e.port_file(), PathBuf::from("/tmp/p"));
        let c = Config::from_args(&args(&["--port-file", "~/x"]), &e, 0.0).unwrap();
        assert_eq!(c.port_file, PathBuf::from("/home/u/x"));
    }

    #[test]
    fn bad_combinations_are_refused() {
        assert!(Config::from_args(&args(&["--memory", "--db", "x"]), &env(), 0.0).is_err());
        assert!(Config::from_args(&args(&["--host", "0.0.0.0"]), &env(), 0.0).is_err());
        assert!(
            Config::from_args(&args(&["--host", "0.0.0.0", "--allow-remote"]), &env(), 0.0).is_ok()
        );
        assert!(Config::from_args(&args(&["--max-body-mb", "0"]), &env(), 0.0).is_err());
        assert!(Config::from_args(&args(&["--max-connections", "0"]), &env(), 0.0).is_err());
        assert!(Config::from_args(&args(&["--max-records-mb", "0"]), &env(), 0.0).is_err());
        let big = (1u64 << 24).to_string();
        assert!(Config::from_args(&args(&["--max-records-mb", &big]), &env(), 0.0).is_ok());
        assert!(Config::from_args(&args(&["--repl-timeout-s", "-1"]), &env(), 0.0).is_err());
    }

    #[test]
    fn db_memory_is_memory_and_standalone_needs_mcp() {
        let c = Config::from_args(&args(&["--db", ":memory:"]), &env(), 0.0).unwrap();
        assert_eq!(c.database, Database::Memory);
        // Like --memory (and any --db), it asks for a server of its own: --mcp does not join.
        assert!(
            !Config::from_args(&args(&["--mcp", "--db", ":memory:"]), &env(), 0.0)
                .unwrap()
                .may_join
        );
        let e = Config::from_args(&args(&["--standalone"]), &env(), 0.0).unwrap_err();
        assert!(e.to_string().contains("only applies with --mcp"), "{e}");
        assert!(Config::from_args(&args(&["--mcp", "--standalone"]), &env(), 0.0).is_ok());
    }

    #[test]
    fn allow_origin_takes_origins_only() {
        for ok in [
            "*",
            "http://localhost:3000",
            "https://tools.example",
            "https://tools.example/",
            "http://127.0.0.1:8080",
            "http://[::1]:5173",
            "chrome-extension://abcdef",
        ] {
            assert!(
                Config::from_args(&args(&["--allow-origin", ok]), &env(), 0.0).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "not a url",
            "localhost:3000",
            "http://",
            "http://host/path",
            "http://host:port",
            "http://host:99999",
            "http://host:+80",
            "http://user@host",
            "http://[zz]:1",
            "://host",
            "",
        ] {
            let e = Config::from_args(&args(&["--allow-origin", bad]), &env(), 0.0).unwrap_err();
            assert!(e.to_string().contains("scheme://host[:port]"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_mcp_clients_file_follows_the_environment_as_start_up_reads_it() {
        let mut e = env();
        assert_eq!(
            e.mcp_clients_file(),
            PathBuf::from("/home/u/.cideldill/mcp_clients.json")
        );
        e.cideldill_home = Some("~/dd".into());
        assert_eq!(
            e.mcp_clients_file(),
            PathBuf::from("/home/u/dd/mcp_clients.json")
        );
        e.cideldill_mcp_clients_config = Some("/etc/m.json".into());
        let c = Config::from_args(&args(&[]), &e, 0.0).unwrap();
        assert_eq!(c.mcp_clients_file, PathBuf::from("/etc/m.json"));
    }

    #[test]
    fn loopback_names() {
        for h in ["127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["0.0.0.0", "192.168.1.1", "example.com", "::"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
