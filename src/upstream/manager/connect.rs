//! Connecting a server: the transport handshake (stdio, Streamable HTTP, legacy SSE),
//! `initialize`, the first tool list, and installing the connection in its slot.

use super::*;

/// Establishes a connection for `config` within the connect timeout.
pub(super) fn establish(
    inner: &Arc<Inner>,
    config: &ServerConfig,
    gen: u64,
) -> Result<(Arc<Live>, Listed), String> {
    let deadline = Instant::now() + inner.timing.connect_timeout;
    let remaining = || deadline.saturating_duration_since(Instant::now());
    let name = config.name.clone();
    let new_peer = || {
        let events = inner.events.clone();
        let name = name.clone();
        let tools_queued = Arc::new(AtomicBool::new(false));
        let resources_queued = Arc::new(AtomicBool::new(false));
        Peer::new(&config.name, move |notice| {
            let queued = match notice {
                Notice::ToolsChanged => Some(&tools_queued),
                Notice::ResourcesChanged => Some(&resources_queued),
                Notice::Closed(_) => None,
            };
            if queued.is_some_and(|q| q.swap(true, Ordering::SeqCst)) {
                // The same notice already waits for the supervisor.
                return;
            }
            let _ = events.send(Event::Notice {
                name: name.clone(),
                gen,
                notice,
                queued: queued.cloned(),
            });
        })
    };
    let timed_out = |step: &str| {
        format!(
            "no answer to {step} within the connect timeout of {}",
            show_duration(inner.timing.connect_timeout)
        )
    };
    // Every way initialize can fail ends the same: the connection is shut and the reason told
    // (a child that died explains itself better than the broken pipe).
    let failed = |peer: &Arc<Peer>, f: Failure, proc: Option<&Proc>| -> String {
        let why = match (
            &f,
            proc.and_then(|p| p.exit_report(Duration::from_millis(500))),
        ) {
            (Failure::Disconnected(_), Some(report)) => report,
            (Failure::Timeout(_), _) => timed_out("initialize"),
            (Failure::Invalid(why), _) => why.clone(),
            _ => f.to_string(),
        };
        peer.shutdown("initialize failed");
        format!("initialize failed: {why}")
    };
    let (peer, proc, transport, initialized) = match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let peer = new_peer();
            let spec = stdio::Spawn {
                command,
                args,
                env,
                cwd: cwd.as_deref(),
            };
            let proc = stdio::spawn(&peer, &spec, inner.timing.kill_grace)?;
            {
                let mut procs = lock(&inner.procs);
                procs.retain(|p| !p.is_done());
                procs.push(proc.clone());
            }
            match peer.handshake(remaining()) {
                Ok(i) => (peer, Some(proc), TransportKind::Stdio, i),
                Err(f) => return Err(failed(&peer, f, Some(&proc))),
            }
        }
        Transport::Sse { url, headers } => {
            let peer = new_peer();
            crate::upstream::sse::connect(&peer, url, headers, remaining())?;
            match peer.initialize(remaining()) {
                Ok(i) => (peer, None, TransportKind::Sse, i),
                Err(f) => return Err(failed(&peer, f, None)),
            }
        }
        Transport::Http { url, headers } | Transport::Auto { url, headers } => {
            let auto = matches!(config.transport, Transport::Auto { .. });
            let peer = new_peer();
            let auth = inner.auth.server(config);
            let first =
                crate::upstream::http::connect_authorized(&peer, url, headers, auth, remaining())
                    .map_err(Failure::Disconnected)
                    .and_then(|()| peer.handshake(remaining()));
            match first {
                Ok(i) => (peer, None, TransportKind::Http, i),
                // A plain 4xx (no JSON-RPC body): no Streamable HTTP endpoint here; a URL given
                // without a transport then tries legacy SSE (the MCP specification's
                // backwards-compatibility rule for clients of HTTP servers).
                Err(Failure::Http {
                    status,
                    mcp_error: false,
                    message,
                }) if auto && falls_back_to_sse(status) => {
                    peer.shutdown("falling back to legacy SSE");
                    log::info!(
                        "upstream {name}: Streamable HTTP refused (HTTP {status}: {message}); trying legacy HTTP+SSE"
                    );
                    let peer = new_peer();
                    crate::upstream::sse::connect(&peer, url, headers, remaining()).map_err(
                        |e| {
                            format!(
                            "Streamable HTTP answered HTTP {status}, and legacy SSE failed: {e}"
                        )
                        },
                    )?;
                    match peer.initialize(remaining()) {
                        Ok(i) => (peer, None, TransportKind::Sse, i),
                        Err(f) => return Err(failed(&peer, f, None)),
                    }
                }
                Err(f) => return Err(failed(&peer, f, None)),
            }
        }
    };
    let listed = if initialized.capabilities.contains_key("tools") {
        match list_tools(&name, &peer, remaining()) {
            Ok(t) => t,
            Err(Failure::Timeout(_)) => {
                peer.shutdown("tools/list timed out");
                return Err(timed_out("tools/list"));
            }
            Err(f) => {
                peer.shutdown("tools/list failed");
                return Err(format!("tools/list failed: {f}"));
            }
        }
    } else {
        Listed {
            tools: Vec::new(),
            skipped: Skipped::default(),
        }
    };
    // A modern server's list changes come on a `subscriptions/listen` request of ours.
    peer.listen(&initialized.capabilities);
    log::info!(
        "upstream {name}: connected over {transport} (protocol {}, {} era, {} tools)",
        initialized.protocol_version,
        initialized.era.as_str(),
        listed.tools.len()
    );
    Ok((
        Arc::new(Live {
            peer,
            proc,
            transport,
            init: initialized,
            relist: Mutex::new(Relist::default()),
        }),
        listed,
    ))
}

/// Connects slot `name` for generation `gen` and installs the connection if the slot still
/// wants it. Returns the visible catalog names.
pub(super) fn connect_slot(
    inner: &Arc<Inner>,
    name: &str,
    gen: u64,
) -> Result<Vec<String>, ApiError> {
    let config = {
        let mut servers = lock(&inner.servers);
        let Some(slot) = servers.get_mut(name) else {
            return Err(server_not_found(name));
        };
        if slot.gen != gen {
            return Err(superseded(name));
        }
        if std::mem::replace(&mut slot.status, Status::Connecting) != Status::Connecting {
            inner.status_changed(name, Status::Connecting);
        }
        slot.changed_while_connecting = false;
        slot.config.clone()
    };
    let established = establish(inner, &config, gen);
    let mut servers = lock(&inner.servers);
    let current = servers
        .get_mut(name)
        .filter(|s| s.gen == gen && !inner.shutting_down.load(Ordering::SeqCst));
    match (established, current) {
        (Ok((live, listed)), Some(slot)) => {
            if live.peer.is_closed() {
                // Lost between the handshake and now: the Closed notice was for this
                // generation and found no connected slot, so report it here.
                let why = live.peer.close_reason().unwrap_or_default();
                if std::mem::replace(&mut slot.status, Status::Error) != Status::Error {
                    inner.status_changed(name, Status::Error);
                }
                slot.error = Some(format!("connection lost right after connecting: {why}"));
                return Err(connect_failed(name, slot.error.as_deref().unwrap_or("")));
            }
            if std::mem::replace(&mut slot.status, Status::Connected) != Status::Connected {
                inner.status_changed(name, Status::Connected);
            }
            slot.error = None;
            slot.live = Some(live);
            slot.tools = listed.tools;
            slot.skipped = listed.skipped;
            if std::mem::take(&mut slot.changed_while_connecting) {
                let _ = inner.events.send(Event::Notice {
                    name: name.to_owned(),
                    gen,
                    notice: Notice::ToolsChanged,
                    queued: None,
                });
            }
            slot.connected_at = Some(ids::now());
            slot.attempts = 0;
            slot.retry_at = None;
            slot.next_ping = Some(Instant::now() + inner.timing.ping_interval);
            Ok(slot
                .visible_tools()
                .map(|(t, _)| catalog_name(name, t))
                .collect())
        }
        (Ok((live, _)), None) => {
            drop(servers);
            live.peer.shutdown("superseded");
            Err(superseded(name))
        }
        (Err(mut why), Some(slot)) => {
            if inner.auth.describe(name)["state"] == "required" {
                why.push_str(&format!(
                    " (the server needs authorization: Authorize on the MCP servers page, or \
                     POST /api/mcp-clients/{name}/authorize)"
                ));
            }
            if std::mem::replace(&mut slot.status, Status::Error) != Status::Error {
                inner.status_changed(name, Status::Error);
            }
            slot.error = Some(why.clone());
            Err(connect_failed(name, &why))
        }
        (Err(why), None) => Err(connect_failed(name, &why)),
    }
}

pub(super) fn connect_failed(name: &str, why: &str) -> ApiError {
    ApiError::new(
        502,
        "connect_failed",
        format!("cannot connect to upstream server {name:?}: {why}"),
    )
    .with("name", name)
}

pub(super) fn superseded(name: &str) -> ApiError {
    ApiError::new(
        502,
        "connect_failed",
        format!("the connection attempt to {name:?} was superseded (disconnected, reconnected or shutting down meanwhile)"),
    )
    .with("name", name)
}
