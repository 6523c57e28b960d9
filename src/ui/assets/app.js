// cideldill web UI: live updates from /api/events, actions through the REST API (POST only).
// No markup is built from strings here: fragments come from the server, parsed with DOMParser.
"use strict";

const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const live = document.getElementById("live");

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  let data = null;
  try { data = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = data && (data.message || data.error) || ("HTTP " + r.status);
    throw new Error(msg);
  }
  return data;
}

// --- live refresh of the page's data-live regions ---
let pending = false;
let timer = null;

function editing() {
  const a = document.activeElement;
  return a && main.contains(a) && /^(TEXTAREA|INPUT|SELECT)$/.test(a.tagName);
}

function openDetails() {
  return Array.from(main.querySelectorAll("details[open]")).length > 0;
}

async function refresh() {
  if (editing() || openDetails()) { pending = true; return; }
  pending = false;
  const regions = Array.from(main.querySelectorAll("[data-live][id]"));
  const focused = document.activeElement && document.activeElement.closest &&
    document.activeElement.closest("[data-pause-id]");
  const focusedId = focused ? focused.dataset.pauseId : null;
  const url = new URL(location.href);
  url.searchParams.set("fragment", "1");
  const r = await fetch(url, { headers: { Accept: "text/html" } });
  if (!r.ok) return;
  const doc = new DOMParser().parseFromString(await r.text(), "text/html");
  const status = doc.getElementById("frag-status");
  if (status) statusLine.textContent = status.textContent;
  for (const region of regions) {
    const fresh = doc.getElementById(region.id);
    if (fresh) region.replaceChildren(...Array.from(fresh.childNodes));
  }
  if (focusedId) {
    const again = main.querySelector('[data-pause-id="' + CSS.escape(focusedId) + '"]');
    if (again) again.focus();
  }
  tick();
  localTimes();
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(refresh, 80);
}

main.addEventListener("focusout", () => { if (pending) setTimeout(schedule, 0); });
main.addEventListener("toggle", () => { if (pending && !openDetails()) schedule(); }, true);

// One event stream per browser: every tab of this server shares the SharedWorker's
// EventSource (a browser allows about six connections per host, and each stream holds one).
// Where SharedWorker is missing, the tab opens its own stream.
function onStream(msg) {
  if (msg.state === "live") { live.textContent = "live"; schedule(); }
  else if (msg.state === "reconnecting") { live.textContent = "reconnecting…"; }
  else if (msg.event) { schedule(); }
}

function connect() {
  if (typeof SharedWorker === "function") {
    try {
      const worker = new SharedWorker("/ui/events-worker.js", { name: "cideldill-events" });
      worker.port.onmessage = (ev) => onStream(ev.data);
      worker.port.start();
      addEventListener("pagehide", () => worker.port.postMessage("bye"));
      return;
    } catch (_) { /* fall back to a stream of this tab's own */ }
  }
  const es = new EventSource("/api/events");
  es.onopen = () => onStream({ state: "live" });
  es.onerror = () => onStream({ state: "reconnecting" });
  for (const name of EVENTS) es.addEventListener(name, () => onStream({ event: name }));
}

const EVENTS = ["execution_paused", "execution_resumed", "call_completed", "breakpoints_changed",
                "functions_changed", "repl_output", "external_server", "resync"];

// --- "paused 5 s ago", in the browser's own clock ---
function ago(seconds) {
  if (seconds < 60) return Math.max(0, Math.floor(seconds)) + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min";
  return Math.floor(seconds / 3600) + " h";
}

function tick() {
  const now = Date.now() / 1000;
  for (const el of document.querySelectorAll("[data-since]")) {
    const at = Number(el.dataset.since);
    el.textContent = "paused " + ago(now - at) + " ago";
    el.title = new Date(at * 1000).toLocaleString();
  }
}

// --- actions ---
function field(card, name) {
  const el = card.querySelector('[name="' + name + '"]');
  return el ? el.value : "";
}

function bodyFor(act, card) {
  switch (act) {
    case "continue": return { action: "continue" };
    case "skip": return { action: "skip", fake_result: JSON.parse(field(card, "fake_result")) };
    case "raise": return { action: "raise", exception_type: field(card, "exception_type"),
                           exception_message: field(card, "exception_message") };
    case "modify": {
      const m = JSON.parse(field(card, "modified"));
      return { action: "modify", modified_args: m.args || [], modified_kwargs: m.kwargs || {} };
    }
    case "replace": return { action: "continue", replacement_function: field(card, "replacement_function") };
  }
  throw new Error("unknown action " + act);
}

async function act(button) {
  const action = button.dataset.act;
  if (action === "continue-all") {
    const err = document.getElementById("page-error");
    try { await post("/api/paused/continue-all", {}); err.textContent = ""; }
    catch (e) { err.textContent = e.message; }
    pending = false;
    return refresh();
  }
  const card = button.closest("[data-pause-id]");
  const err = card.querySelector(".error");
  button.disabled = true;
  try {
    await post("/api/paused/" + encodeURIComponent(card.dataset.pauseId) + "/continue",
               bodyFor(action, card));
    card.remove();
    if (document.activeElement === document.body) {
      const next = main.querySelector("[data-pause-id]");
      if (next) next.focus();
    }
  } catch (e) {
    err.textContent = e instanceof SyntaxError ? "Not valid JSON: " + e.message : e.message;
    button.disabled = false;
    return;
  }
  pending = false;
  refresh();
}

document.addEventListener("click", (ev) => {
  const b = ev.target.closest && ev.target.closest("button[data-act]");
  if (b) act(b);
});

// Keyboard: c continues the focused card, j / k move between cards.
document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || editing()) return;
  const cards = Array.from(main.querySelectorAll("[data-pause-id]"));
  if (!cards.length) return;
  const here = document.activeElement && document.activeElement.closest &&
    document.activeElement.closest("[data-pause-id]");
  const i = cards.indexOf(here);
  if (ev.key === "j") { cards[Math.min(cards.length - 1, i + 1)].focus(); ev.preventDefault(); }
  else if (ev.key === "k") { cards[Math.max(0, i - 1)].focus(); ev.preventDefault(); }
  else if (ev.key === "c" && here) {
    const b = here.querySelector('button[data-act="continue"]');
    if (b) { act(b); ev.preventDefault(); }
  }
});

tick();
setInterval(tick, 1000);
if (main.querySelector("[data-live]")) connect();

// --- Calls page: [data-time] elements (epoch seconds) shown in the browser's local time ---
function localTimes() {
  const today = new Date().toDateString();
  for (const el of document.querySelectorAll("[data-time]")) {
    const at = new Date(Number(el.dataset.time) * 1000);
    if (isNaN(at.getTime())) continue;
    const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit",
                                             fractionalSecondDigits: 3, hourCycle: "h23" });
    el.textContent = at.toDateString() === today ? time : at.toLocaleDateString() + " " + time;
    el.title = at.toString();
  }
}
localTimes();
