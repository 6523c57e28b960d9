//! Hostile input to the configuration parsers, in process with the counting allocator: the
//! external MCP servers' config file (`upstream::config::parse_file`), `--mcp-client` values
//! (`parse_inline`), run-time connect bodies (`parse_runtime`), `${VAR}` expansion, tool-filter
//! globs, and the command line (`config::Args` through argh, then `Config::from_args`).
//!
//! Properties on any input: no panic, an answer within 1 s, peak memory at most `CONFIG_FACTOR`
//! times the input plus `CONFIG_SLACK` (expansion can grow a text: each `${X}`, at least 4
//! bytes, becomes a value of at most `ENV_VALUE_MAX` bytes here, so the factor covers a `Value`
//! tree (36x, see `framing.rs`) plus that growth), and what parses is valid: every server name
//! passes the name rules, every timeout is positive, an inline command is not empty; every
//! error has a message.

use std::time::{Duration, Instant};

use argh::FromArgs;
use cideldill_server::config::{Args, Config, Env};
use cideldill_server::upstream::config::{
    expand_vars, parse_file, parse_inline, parse_runtime, plan, ClientFlags, ServerConfig,
    Transport,
};
use cideldill_server::upstream::names::{glob_match, validate_server_name};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::alloc::peak_during;
use crate::props::{config, hostile_string, json_value, mangled, number};

pub const CONFIG_FACTOR: usize = 64;
pub const CONFIG_SLACK: usize = 64 * 1024;
const ENV_VALUE_MAX: usize = 64;
const PER_INPUT: Duration = Duration::from_secs(1);

/// The environment the expansions see: a few variables, one empty, values up to 64 bytes.
fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/tester".into()),
        "TOKEN" => Some("t".repeat(ENV_VALUE_MAX)),
        "EMPTY" => Some(String::new()),
        "A" => Some("${A}".into()),
        _ => None,
    }
}

/// Runs `f` on an input of `len` bytes, checking its time and memory.
fn bounded<T>(what: &str, len: usize, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    let t0 = Instant::now();
    let (out, peak) = peak_during(f);
    let took = t0.elapsed();
    prop_assert!(took < PER_INPUT, "{what} took {took:?}");
    let bound = CONFIG_FACTOR * len + CONFIG_SLACK;
    prop_assert!(
        peak <= bound,
        "{what} held {peak} bytes for {len} bytes of input (bound {bound})"
    );
    Ok(out)
}

fn valid(servers: &[ServerConfig]) -> Result<(), TestCaseError> {
    for s in servers {
        prop_assert!(
            validate_server_name(&s.name).is_ok(),
            "accepted name {:?}",
            s.name
        );
        prop_assert!(!s.timeout.is_zero(), "{}: zero timeout", s.name);
        match &s.transport {
            Transport::Stdio { command, .. } => {
                prop_assert!(!command.trim().is_empty(), "{}: empty command", s.name)
            }
            Transport::Sse { url, .. }
            | Transport::Http { url, .. }
            | Transport::Auto { url, .. } => {
                let lower = url.to_ascii_lowercase();
                prop_assert!(
                    lower.starts_with("http://") || lower.starts_with("https://"),
                    "{}: url {url:?}",
                    s.name
                );
            }
        }
    }
    Ok(())
}

/// A string that is often a `${…}` expansion.
fn expandable() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        hostile_string(),
        prop::sample::select(vec![
            "${HOME}",
            "${TOKEN}",
            "${EMPTY:-fallback}",
            "${UNSET}",
            "${UNSET:-}",
            "${A}",
            "${",
            "${}",
            "${1X}",
            "${TOKEN:-${HOME}}",
            "$HOME",
            "http://",
            "https://x",
            "HTTP://",
            "stdio",
            "sse",
            "http",
            "streamable-http",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

/// A value for the entry field `key`: usually of the right type, sometimes anything.
fn field_value(key: &'static str) -> BoxedStrategy<Value> {
    let strings = || prop::collection::vec(expandable().prop_map(Value::String), 0..4);
    let typed = match key {
        "args" | "allowed_tools" | "denied_tools" => strings().prop_map(Value::Array).boxed(),
        "env" | "headers" => prop::collection::vec(
            (hostile_string(), expandable().prop_map(Value::String)),
            0..4,
        )
        .prop_map(|kv| Value::Object(kv.into_iter().collect()))
        .boxed(),
        "timeout_s" | "timeoutMs" | "timeout_ms" => number().boxed(),
        "auto_reconnect" => any::<bool>().prop_map(Value::Bool).boxed(),
        "transport" | "type" => prop::sample::select(vec![
            "stdio",
            "sse",
            "http",
            "streamable-http",
            "streamableHttp",
            "streamable_http",
            "auto",
            "STDIO",
            "",
        ])
        .prop_map(Value::from)
        .boxed(),
        _ => expandable().prop_map(Value::String).boxed(),
    };
    prop_oneof![5 => typed, 1 => json_value()].boxed()
}

/// One server entry: a command or a URL, then a handful of the known keys (and others) with
/// hostile values.
fn entry() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "transport",
        "type",
        "timeout_s",
        "timeoutMs",
        "timeout_ms",
        "auto_reconnect",
        "allowed_tools",
        "denied_tools",
        "name",
        "other",
    ]);
    let base = prop::sample::select(vec![
        ("command", "server --flag ${HOME}"),
        ("url", "http://127.0.0.1:1/mcp?t=${TOKEN}"),
        ("url", "https://example.invalid/${UNSET:-x}"),
        ("command", "${UNSET}"),
    ]);
    (
        prop::option::of(base),
        prop::collection::vec(key.prop_flat_map(|k| (Just(k), field_value(k))), 0..6),
    )
        .prop_map(|(base, kv)| {
            let mut m: Map<String, Value> = Map::new();
            if let Some((k, v)) = base {
                m.insert(k.into(), v.into());
            }
            for (k, v) in kv {
                m.insert(k.to_owned(), v);
            }
            Value::Object(m)
        })
}

fn server_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z][a-z0-9_-]{0,12}",
        1 => hostile_string(),
        1 => Just("x".repeat(300)),
    ]
}

/// A config file's JSON: `servers` or `mcpServers` (or both, or neither) of hostile entries.
fn config_file() -> impl Strategy<Value = Value> {
    let servers = prop::collection::vec((server_name(), entry()), 0..4)
        .prop_map(|kv| Value::Object(kv.into_iter().collect()));
    (
        prop::sample::select(vec!["servers", "mcpServers", "both", "neither"]),
        servers,
        json_value(),
    )
        .prop_map(|(key, servers, other)| match key {
            "both" => json!({"servers": servers, "mcpServers": other}),
            "neither" => json!({"other": other}),
            k => json!({ k: servers }),
        })
}

fn config_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => config_file().prop_map(|v| v.to_string()),
        2 => mangled(config_file()),
        1 => mangled(json_value()),
        1 => any::<String>(),
        1 => Just("// a comment\n{\"servers\": {}}".to_owned()),
    ]
}

/// A `--mcp-client NAME:VALUE` value.
fn inline_flag() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        expandable(),
        mangled(entry()),
        prop::sample::select(vec![
            "http://",
            "https://",
            "//host",
            "http://h",
            "HTTPS://X",
            " ",
            "{",
            "cmd a b  c",
        ])
        .prop_map(str::to_owned),
    ];
    prop_oneof![
        (server_name(), value).prop_map(|(n, v)| format!("{n}:{v}")),
        hostile_string(),
    ]
}

/// A command line: known flags with hostile values, and strays.
fn command_line() -> impl Strategy<Value = Vec<String>> {
    // Every flag the server has (its help's groups), and strays.
    let mut flags: Vec<&'static str> = cideldill_server::config::FLAGS
        .iter()
        .flat_map(|group| group.flags.iter().map(|flag| flag.name))
        .collect();
    flags.extend(["--help", "--version", "-h", "--", "--nope"]);
    let flag = prop::sample::select(flags);
    let value = prop_oneof![
        prop::sample::select(vec![
            "0",
            "-1",
            "1",
            "65535",
            "65536",
            "1e308",
            "-0",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e-320",
            "0.0",
            "86400",
            "86400.5",
            "3600",
            "18446744073709551615",
            "18446744073709551616",
            "1048576",
            "1048577",
            "::1",
            "0.0.0.0",
            "localhost",
            "[::1]",
            "~",
            "~/x",
            "{",
            "{\"servers\":{}}",
            "*",
            "",
        ])
        .prop_map(str::to_owned),
        hostile_string(),
    ];
    prop::collection::vec(
        (flag, prop::option::of(value)).prop_map(|(f, v)| {
            let mut out = vec![f.to_owned()];
            out.extend(v);
            out
        }),
        0..8,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn any_config_file_text_parses_or_fails_cleanly(text in config_text()) {
        let parsed = bounded("parse_file", text.len(), || parse_file(&text, &env))?;
        match parsed {
            Ok(servers) => valid(&servers)?,
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn any_inline_flag_parses_or_fails_cleanly(flag in inline_flag()) {
        let parsed = bounded("parse_inline", flag.len(), || parse_inline(&flag, &env))?;
        match parsed {
            Ok(server) => valid(&[server])?,
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn any_connect_body_parses_or_fails_cleanly(body in entry(), name in prop::option::of(server_name())) {
        let mut body = match body {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        if let Some(n) = name {
            body.insert("name".into(), Value::String(n));
        }
        let len = Value::Object(body.clone()).to_string().len();
        let parsed = bounded("parse_runtime", len, || parse_runtime(&body, &env))?;
        match parsed {
            Ok(server) => valid(&[server])?,
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn expansion_is_bounded_by_its_variables(text in expandable()) {
        let out = bounded("expand_vars", text.len(), || expand_vars(&text, &env))?;
        if let Ok(out) = out {
            // Each `${…}` is at least 4 bytes and becomes at most ENV_VALUE_MAX bytes, or
            // its default, which is part of the text.
            let n_vars = text.matches("${").count();
            prop_assert!(
                out.len() <= text.len() + n_vars * ENV_VALUE_MAX,
                "{text:?} expanded to {} bytes",
                out.len()
            );
        }
    }

    #[test]
    fn tool_filter_globs_answer_quickly(pattern in "[a*?]{0,40}", name in "[ab]{0,200}") {
        bounded("glob_match", pattern.len() + name.len(), || glob_match(&pattern, &name))?;
    }

    #[test]
    fn any_command_line_resolves_or_fails_cleanly(argv in command_line()) {
        let len = argv.iter().map(|a| a.len() + 1).sum::<usize>();
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        let env_vars = Env {
            home: Some("/home/tester".into()),
            cideldill_home: None,
            cideldill_port_file: None,
            cideldill_mcp_clients_config: None,
            pid: 4711,
        };
        let resolved = bounded("the command line", len, || {
            Args::from_args(&["cideldill-server"], &words)
                .map(|args| Config::from_args(&args, &env_vars, 1_795_311_683.5).map(|c| (args, c)))
        })?;
        match resolved {
            Err(exit) => prop_assert!(!exit.output.is_empty()),
            Ok(Err(e)) => prop_assert!(!e.to_string().is_empty()),
            Ok(Ok((args, cfg))) => {
                prop_assert!(cfg.max_body_bytes >= 1 << 20);
                prop_assert!(!cfg.repl_timeout.is_zero() || args.repl_timeout_s < 1e-9);
                let flags: &ClientFlags = &cfg.mcp_clients;
                let _ = bounded("plan", len, || plan(flags, &env))?;
            }
        }
    }
}
