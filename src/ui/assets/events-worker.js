// cideldill web UI: the one /api/events stream shared by every tab of this browser.
// Each tab connects a port; the worker forwards the stream's state and every event (its type
// and data).
"use strict";

const ports = new Set();
let source = null;
let state = "reconnecting";

const EVENTS = ["execution_paused", "execution_resumed", "call_completed", "breakpoints_changed",
                "functions_changed", "repl_session", "repl_output", "external_server", "log", "origins_changed", "run_deleted", "run_changed", "resync"];

function broadcast(msg) {
  for (const port of ports) port.postMessage(msg);
}

function open() {
  source = new EventSource("/api/events");
  source.onopen = () => { state = "live"; broadcast({ state }); };
  source.onerror = () => { state = "reconnecting"; broadcast({ state }); };
  for (const name of EVENTS) {
    source.addEventListener(name, (ev) => broadcast({ event: name, id: ev.lastEventId, data: ev.data }));
  }
}

onconnect = (ev) => {
  const port = ev.ports[0];
  ports.add(port);
  port.onmessage = (m) => {
    if (m.data === "bye") {
      ports.delete(port);
      if (ports.size === 0 && source) { source.close(); source = null; }
    }
  };
  port.start();
  if (!source) open();
  else port.postMessage({ state });
};
