//! The supervisor thread: reacts to what peers report (connection lost, tool list changed),
//! pings connected servers and runs automatic reconnection with backoff.

use super::*;

/// The supervisor loop: notices, health pings and automatic reconnection.
pub(super) fn supervise(inner: &Arc<Inner>, rx: &Receiver<Event>) {
    let tick = Duration::from_millis(50);
    loop {
        match rx.recv_timeout(tick) {
            Ok(Event::Stop) => return,
            Ok(Event::Notice {
                name,
                gen,
                notice,
                queued,
            }) => {
                if let Some(q) = queued {
                    q.store(false, Ordering::SeqCst);
                }
                on_notice(inner, &name, gen, notice)
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        }
        if inner.shutting_down.load(Ordering::SeqCst) {
            continue;
        }
        let now = Instant::now();
        let mut pings = Vec::new();
        let mut retries = Vec::new();
        {
            let mut servers = lock(&inner.servers);
            for (name, slot) in servers.iter_mut() {
                if slot.status == Status::Connected && slot.next_ping.is_some_and(|t| t <= now) {
                    slot.next_ping = Some(now + inner.timing.ping_interval);
                    if let Some(live) = &slot.live {
                        pings.push((name.clone(), live.clone()));
                    }
                }
                if slot.retry_at.is_some_and(|t| t <= now) {
                    slot.retry_at = None;
                    slot.attempts += 1;
                    slot.gen += 1;
                    if std::mem::replace(&mut slot.status, Status::Connecting) != Status::Connecting
                    {
                        inner.status_changed(name, Status::Connecting);
                    }
                    retries.push((name.clone(), slot.gen, slot.attempts));
                }
            }
        }
        for (name, live) in pings {
            let timeout = inner.timing.ping_timeout;
            let _ = thread::Builder::new()
                .name(format!("upstream-{name}-ping"))
                .spawn(move || ping(&name, &live, timeout));
        }
        for (name, gen, attempt) in retries {
            let inner = inner.clone();
            let _ = thread::Builder::new()
                .name(format!("upstream-{name}-reconnect"))
                .spawn(move || auto_reconnect(&inner, &name, gen, attempt));
        }
    }
}

/// A health check: `ping` for a legacy server, `server/discover` for a modern one (the modern
/// revision has no `ping`).
pub(super) fn ping(name: &str, live: &Live, timeout: Duration) {
    let method = match live.init.era {
        Era::Legacy => "ping",
        Era::Modern => "server/discover",
    };
    match live.peer.request(method, json!({}), timeout) {
        Ok(_) => log::debug!("upstream {name}: {method} ok"),
        // An error answer still proves the server is alive (some servers lack ping).
        Err(Failure::Rpc { .. }) => {
            log::debug!("upstream {name}: {method} answered with an error")
        }
        Err(f) => {
            log::warn!("upstream {name}: health ping failed ({f}); dropping the connection");
            live.peer.shutdown(&format!("health ping failed: {f}"));
        }
    }
}

pub(super) fn auto_reconnect(inner: &Arc<Inner>, name: &str, gen: u64, attempt: u32) {
    let max = inner.timing.backoff.len() as u32;
    log::info!("upstream {name}: reconnecting (attempt {attempt} of {max})");
    match connect_slot(inner, name, gen) {
        Ok(_) => log::info!("upstream {name}: reconnected after {attempt} attempt(s)"),
        Err(e) => {
            let mut servers = lock(&inner.servers);
            let Some(slot) = servers.get_mut(name).filter(|s| s.gen == gen) else {
                return;
            };
            if attempt >= max {
                if std::mem::replace(&mut slot.status, Status::Failed) != Status::Failed {
                    inner.status_changed(name, Status::Failed);
                }
                slot.error = Some(format!(
                    "gave up after {max} reconnection attempts; last error: {}",
                    e.message()
                ));
                log::warn!("upstream {name}: gave up reconnecting after {max} attempts");
            } else {
                if std::mem::replace(&mut slot.status, Status::Disconnected) != Status::Disconnected
                {
                    inner.status_changed(name, Status::Disconnected);
                }
                slot.retry_at = Some(Instant::now() + inner.timing.backoff[attempt as usize]);
                log::info!(
                    "upstream {name}: attempt {attempt} failed ({}); next in {}",
                    e.message(),
                    show_duration(inner.timing.backoff[attempt as usize])
                );
            }
        }
    }
}

pub(super) fn on_notice(inner: &Arc<Inner>, name: &str, gen: u64, notice: Notice) {
    match notice {
        Notice::Closed(reason) => {
            let mut servers = lock(&inner.servers);
            let Some(slot) = servers.get_mut(name) else {
                return;
            };
            if slot.gen != gen || slot.status != Status::Connected {
                return;
            }
            slot.gen += 1;
            if std::mem::replace(&mut slot.status, Status::Disconnected) != Status::Disconnected {
                inner.status_changed(name, Status::Disconnected);
            }
            slot.error = Some(reason.clone());
            slot.live = None;
            slot.tools.clear();
            slot.skipped = Skipped::default();
            slot.connected_at = None;
            slot.next_ping = None;
            if slot.config.auto_reconnect
                && !inner.shutting_down.load(Ordering::SeqCst)
                && !inner.timing.backoff.is_empty()
            {
                slot.attempts = 0;
                slot.retry_at = Some(Instant::now() + inner.timing.backoff[0]);
                log::warn!(
                    "upstream {name}: connection lost ({reason}); reconnecting in {}",
                    show_duration(inner.timing.backoff[0])
                );
            } else {
                log::warn!("upstream {name}: connection lost ({reason})");
            }
        }
        Notice::ToolsChanged => {
            let live = {
                let mut servers = lock(&inner.servers);
                let slot = servers.get_mut(name).filter(|s| s.gen == gen);
                match slot {
                    Some(s) if s.status == Status::Connecting => {
                        s.changed_while_connecting = true;
                        None
                    }
                    Some(s) if s.status == Status::Connected => {
                        s.live.clone().map(|l| (l, s.config.timeout))
                    }
                    _ => None,
                }
            };
            let Some((live, timeout)) = live else {
                return;
            };
            {
                let mut relist = lock(&live.relist);
                if relist.running {
                    relist.again = true;
                    return;
                }
                relist.running = true;
            }
            let inner = inner.clone();
            let (thread_name, relister) = (name.to_owned(), live.clone());
            let spawned = thread::Builder::new()
                .name(format!("upstream-{name}-relist"))
                .spawn(move || relist(&inner, &thread_name, gen, &relister, timeout));
            if let Err(e) = spawned {
                log::warn!("upstream {name}: cannot start a thread to re-list its tools: {e}");
                *lock(&live.relist) = Relist::default();
            }
        }
        Notice::ResourcesChanged => log::debug!("upstream {name}: resource list changed"),
    }
}

/// Re-lists a connection's tools until no change came in meanwhile (the one relist thread of
/// a connection; see [`Relist`]).
pub(super) fn relist(inner: &Arc<Inner>, name: &str, gen: u64, live: &Live, timeout: Duration) {
    loop {
        match list_tools(name, &live.peer, timeout) {
            Ok(listed) => {
                let mut servers = lock(&inner.servers);
                if let Some(slot) = servers
                    .get_mut(name)
                    .filter(|s| s.gen == gen && s.status == Status::Connected)
                {
                    log::info!(
                        "upstream {name}: tool list changed ({} -> {} tools)",
                        slot.tools.len(),
                        listed.tools.len()
                    );
                    slot.tools = listed.tools;
                    slot.skipped = listed.skipped;
                }
            }
            Err(f) => log::warn!("upstream {name}: re-listing tools failed: {f}"),
        }
        let mut relist = lock(&live.relist);
        if relist.again && !live.peer.is_closed() {
            relist.again = false;
            continue;
        }
        *relist = Relist::default();
        return;
    }
}
