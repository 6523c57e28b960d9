// cideldill web UI: live updates from /api/events, actions through the REST API (POST only).
// No markup is built from strings here: fragments come from the server, parsed with DOMParser.
"use strict";

const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const pausingBanner = document.getElementById("pausing-banner");
const live = document.getElementById("live");

function post(path, body) { return send(path, "POST", body); }

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

// Whether a live region must wait: the person is typing in it (and the field is still there
// in the fresh version), or has a <details> of it open (unless the region carries it over).
// A focused switch (checkbox) waits only in a region that does not carry the focus over.
function busy(region, fresh, carrying) {
  if (!carrying && region.querySelector("details[open]")) return true;
  const a = document.activeElement;
  if (!a || !region.contains(a) || !/^(TEXTAREA|INPUT|SELECT)$/.test(a.tagName)) return false;
  // A switch holds nothing typed: a region that carries the focus over is replaced at once.
  if (carrying && (a.type === "checkbox" || a.type === "radio")) return false;
  return !a.id || fresh.querySelector("#" + CSS.escape(a.id)) !== null;
}

// A key or pointer button held down on an element of the page: that element must stay until
// it is released (a switch toggles on the key's release, a button on the pointer's), so a part
// holding the focus then waits; the release lets the waiting refresh run.
let held = 0;
addEventListener("keydown", () => { held |= 1; }, true);
addEventListener("pointerdown", () => { held |= 2; }, true);
const released = (bit) => () => { held &= ~bit; if (pending && !held) setTimeout(schedule, 0); };
addEventListener("keyup", released(1), true);
addEventListener("pointerup", released(2), true);
addEventListener("pointercancel", released(2), true);
addEventListener("blur", () => { held = 0; if (pending) setTimeout(schedule, 0); });

function pressing(part) {
  const a = document.activeElement;
  return held !== 0 && !!a && a !== document.body && part.contains(a);
}

// The forms of a part of the page, by where they send (API path and method).
function formsOf(root) {
  const forms = new Map();
  for (const f of root.querySelectorAll("form[data-api]")) {
    forms.set((f.dataset.method || "POST") + " " + f.dataset.api, f);
  }
  return forms;
}

const TEXT_FIELD = /^(text|search|url|email|number|password|tel|textarea)$/;

// Opens the <details> of the fresh version that are open in the old one (in document order).
function openLike(old, fresh) {
  const open = fresh.querySelectorAll("details");
  old.querySelectorAll("details").forEach((d, i) => { if (d.open && open[i]) open[i].open = true; });
}

// A region marked data-carry is replaced even while one of its <details> is open: what the
// person has in the old version carries over to the fresh one: open <details>, text typed and
// not saved (with its aria-invalid), a shown error and the focus, matched by form and field.
// `saved` is a form whose fields just went to the server: they take the server's values.
// Answers what to do once the fresh version is in the page (give back the focus).
function carry(old, fresh, saved) {
  openLike(old, fresh);
  const twins = formsOf(fresh);
  const active = document.activeElement;
  let focus = null;
  // A focused <summary> (a disclosure such as a run's Delete…) keeps the focus too.
  const at = Array.from(old.querySelectorAll("summary")).indexOf(active);
  const summary = at >= 0 ? fresh.querySelectorAll("summary")[at] : null;
  if (summary) focus = { el: summary, start: null, end: null };
  for (const [key, form] of formsOf(old)) {
    const twin = twins.get(key);
    if (!twin) continue;
    const buttons = Array.from(form.querySelectorAll("button"));
    for (const el of form.querySelectorAll("input, select, textarea, button")) {
      const other = el.name
        ? twin.querySelector(el.tagName + '[name="' + CSS.escape(el.name) + '"]')
        : twin.querySelectorAll("button")[buttons.indexOf(el)];
      if (!other) continue;
      if (form !== saved && TEXT_FIELD.test(el.type) && el.value !== el.defaultValue) {
        other.value = el.value;
        if (el.hasAttribute("aria-invalid")) other.setAttribute("aria-invalid", "true");
      }
      if (el === active) focus = { el: other, start: el.selectionStart, end: el.selectionEnd };
    }
    const error = form.querySelector(".error");
    const place = twin.querySelector(".error");
    if (form !== saved && error && place && error.textContent.trim()) place.replaceWith(error);
  }
  return () => {
    if (!focus) return;
    focus.el.focus();
    try {
      if (focus.start !== null) focus.el.setSelectionRange(focus.start, focus.end);
    } catch (_) { /* a field without a text selection */ }
  };
}

// Attributes the page sets on its own (an open <details>, what a list or a time already shows):
// a fresh version from the server never has them, and does not take them away.
const OWN_ATTRS = new Set(["open", "data-seen", "data-shown", "title"]);

// Makes `old` like `fresh` in place and answers the node now in the page: nodes that did not
// change stay as they are (a text selection, a focus, a scroll position in them go on); a node
// of another kind, tag or key is replaced. Dynamic text is first made alike (`settleTimes`).
function morph(old, fresh) {
  if (old.nodeType !== fresh.nodeType || old.nodeName !== fresh.nodeName ||
      (old.nodeType === 1 && old.dataset.key !== fresh.dataset.key)) {
    old.replaceWith(fresh);
    return fresh;
  }
  if (old.nodeType !== 1) {
    if (old.nodeValue !== fresh.nodeValue) old.nodeValue = fresh.nodeValue;
    return old;
  }
  if (old.isEqualNode(fresh)) return old;
  for (const a of Array.from(old.attributes)) {
    if (!fresh.hasAttribute(a.name) && !OWN_ATTRS.has(a.name)) old.removeAttribute(a.name);
  }
  for (const a of Array.from(fresh.attributes)) {
    if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
  }
  morphChildren(old, fresh);
  return old;
}

function morphChildren(old, fresh) {
  const have = Array.from(old.childNodes);
  const want = Array.from(fresh.childNodes);
  want.forEach((node, i) => { if (i < have.length) morph(have[i], node); else old.appendChild(node); });
  for (const node of have.slice(want.length)) node.remove();
}

// Gives the times of a fresh version what the page shows of them now, so that comparing it
// with the page finds only real changes.
function settleTimes(root) {
  tick(root);
  localTimes(root);
}

// Replaces a live region's content with its fresh version. A region marked data-keyed is
// merged child by child (children carry data-key): a child the person is busy in stays as it
// is while it still exists, the others are replaced, added or removed in the fresh order.
// `saved`: the form whose change caused this refresh; the part holding it is replaced even
// while its field has the focus (the focus carries over in a data-carry region).
function update(region, fresh, saved) {
  const carrying = region.dataset.carry !== undefined;
  const mustWait = (part, twin) => pressing(part) ||
    (!(saved && carrying && part.contains(saved)) && busy(part, twin, carrying));
  if (region.dataset.keyed === undefined) {
    if (mustWait(region, fresh)) return false;
    if (!carrying) { morphChildren(region, fresh); return true; }
    const done = carry(region, fresh, saved);
    region.replaceChildren(...Array.from(fresh.childNodes));
    done();
    return true;
  }
  const old = new Map();
  for (const child of region.children) if (child.dataset.key) old.set(child.dataset.key, child);
  let whole = true;
  const after = [];
  const next = Array.from(fresh.childNodes).map((child) => {
    const key = child.dataset && child.dataset.key;
    const mine = key && old.get(key);
    if (mine && mustWait(mine, child)) { whole = false; return mine; }
    if (mine && carrying) {
      // A part that did not change stays as it is (a click or a selection in it goes on).
      openLike(mine, child);
      if (mine.isEqualNode(child)) return mine;
      after.push(carry(mine, child, saved));
    } else if (mine) {
      // Only what changed in it changes.
      return morph(mine, child);
    }
    return child;
  });
  // Insert around the kept children without detaching them (that would drop the focus).
  const keep = new Set(next);
  for (const child of Array.from(region.childNodes)) if (!keep.has(child)) child.remove();
  let cursor = region.firstChild;
  for (const node of next) {
    if (node === cursor) { cursor = cursor.nextSibling; continue; }
    region.insertBefore(node, cursor);
  }
  for (const done of after) done();
  return whole;
}

// Scrolled lists marked data-stick="bottom" (the log) keep to their newest line at the
// bottom, unless the person scrolled up in them, which a refresh keeps.
function scrolls(regions) {
  const was = new Map();
  for (const region of regions) {
    for (const list of region.querySelectorAll('[data-stick="bottom"]')) {
      const bottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
      was.set(region.id + " " + list.className, bottom ? null : list.scrollTop);
    }
  }
  return () => {
    for (const region of regions) {
      for (const list of region.querySelectorAll('[data-stick="bottom"]')) {
        const top = was.get(region.id + " " + list.className);
        list.scrollTop = top === undefined || top === null ? list.scrollHeight : top;
      }
    }
  };
}

// `only`: the id of the one region to refresh (the poll times), leaving the others as they are.
async function refresh(saved, only) {
  if (!only) pending = false;
  const regions = Array.from(main.querySelectorAll("[data-live][id]")).filter((r) => !only || r.id === only);
  const focused = document.activeElement && document.activeElement.closest &&
    document.activeElement.closest("[data-pause-id]");
  const focusedId = focused ? focused.dataset.pauseId : null;
  const url = new URL(location.href);
  url.searchParams.set("fragment", "1");
  let doc;
  try {
    const r = await fetch(url, { headers: { Accept: "text/html" } });
    if (!r.ok) return;
    doc = new DOMParser().parseFromString(await r.text(), "text/html");
  } catch (_) {
    // The server went away mid-refresh: the stream's reconnection refreshes again.
    pending = true;
    return;
  }
  const before = noticed();
  const status = doc.getElementById("frag-status");
  if (status) {
    statusLine.textContent = status.textContent;
    const paused = /(\d+) paused/.exec(status.textContent);
    const n = paused ? Number(paused[1]) : 0;
    document.title = (n > 0 ? "(" + n + " paused) " : "") + document.body.dataset.title;
  }
  // The banner of every page while pausing is off.
  const banner = doc.getElementById("frag-pausing");
  if (banner && pausingBanner) {
    const now = Array.from(pausingBanner.childNodes);
    const fresh = Array.from(banner.childNodes);
    const same = now.length === fresh.length && fresh.every((n, i) => n.isEqualNode(now[i]));
    if (!same) pausingBanner.replaceChildren(...fresh);
  }
  const stick = scrolls(regions);
  settleTimes(doc);
  for (const region of regions) {
    const fresh = doc.getElementById(region.id);
    if (fresh && !update(region, fresh, saved)) pending = true;
  }
  stick();
  if (focusedId && !editing()) {
    const again = main.querySelector('[data-pause-id="' + CSS.escape(focusedId) + '"]');
    if (again && again !== document.activeElement && !again.contains(document.activeElement)) again.focus();
  }
  tick();
  localTimes();
  scrollTranscript();
  settle();
  announceChanges(before);
}

// --- what changed, said to screen readers (#announce is a polite live region) ---
function announce(text) {
  const el = document.getElementById("announce");
  if (!el || !text) return;
  // The same words again are announced again only if the region changes in between.
  el.textContent = "";
  setTimeout(() => { el.textContent = text; }, 30);
}

// What the page shows that a person should hear about when it changes: the pauses (ids and
// names), how many calls are paused, and the REPL transcript's length.
function noticed() {
  const cards = new Map();
  for (const c of main.querySelectorAll("[data-pause-id]")) {
    const fn = c.querySelector(".fn");
    cards.set(c.dataset.pauseId, (fn ? fn.textContent.trim() : "a call") +
      (c.dataset.when === "after" ? ", after the call" : ", before the call"));
  }
  const paused = /(\d+) paused/.exec(statusLine.textContent);
  const transcript = main.querySelector("ol.transcript");
  return { cards, paused: paused ? Number(paused[1]) : 0,
           answers: transcript ? transcript.children.length : 0 };
}

function announceChanges(before) {
  const after = noticed();
  const fresh = Array.from(after.cards.keys()).filter((id) => !before.cards.has(id));
  if (fresh.length === 1) announce("Paused: " + after.cards.get(fresh[0]));
  else if (fresh.length > 1) announce(fresh.length + " new paused calls");
  else if (after.paused !== before.paused) {
    announce(after.paused === 0 ? "No call is paused" : after.paused + (after.paused === 1 ? " call" : " calls") + " paused");
  }
  if (after.answers > before.answers) {
    const last = main.querySelector("ol.transcript").lastElementChild;
    const out = last && (last.querySelector(".out") || last.querySelector(".stdout"));
    announce("REPL: " + ((out || last).textContent || "").trim().slice(0, 300));
  }
}

// --- the log's Clear: the page shows only newer lines (?log_after=N; the lines stay recorded) ---
document.addEventListener("click", (ev) => {
  const b = ev.target.closest && ev.target.closest("button[data-clear-log]");
  if (!b) return;
  const url = new URL(location.href);
  url.searchParams.set("log_after", b.dataset.clearLog);
  history.replaceState(null, "", url);
  refresh();
});

// --- Copy buttons (button[data-copy]): the whole text to the clipboard, said on the button ---
// The clipboard API where the page is a secure context (localhost is); else a selected,
// off-screen textarea and the copy command. No dialog either way.
async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try { await navigator.clipboard.writeText(text); return true; } catch (_) { /* fall back */ }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch (_) { ok = false; }
  area.remove();
  return ok;
}
document.addEventListener("click", async (ev) => {
  const b = ev.target.closest && ev.target.closest("button[data-copy]");
  if (!b) return;
  const ok = await copyText(b.dataset.copy);
  b.dataset.copied = ok ? "yes" : "no";
  announce(ok ? "Copied" : "Could not copy: select the text in the tooltip instead");
  setTimeout(() => { delete b.dataset.copied; }, 1500);
});

// --- the keyboard help: ? or the header's Keys button ---
function showHelp() {
  const d = document.getElementById("help");
  if (d && !d.open) d.showModal();
}
document.addEventListener("click", (ev) => {
  if (ev.target.closest && ev.target.closest("[data-help]")) showHelp();
});
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "?" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const a = document.activeElement;
  if (a && /^(TEXTAREA|INPUT|SELECT)$/.test(a.tagName)) return;
  showHelp();
  ev.preventDefault();
});

// Controls that depend on what the page shows.
function settle() {
  const all = main.querySelector('[data-act="continue-all"]');
  if (all) all.disabled = !main.querySelector("[data-pause-id]");
}

// A refresh starts at once on an event when none started in the last 80 ms, else 80 ms after
// the one before started, however many events follow (a timer restarted by every event never
// fired while another program kept calling), and never two at once: events during one ask for
// one more after it.
const REFRESH_GAP_MS = 80;
let refreshing = false;
let again = false;
let lastRefresh = 0;
function schedule() {
  if (timer) return;
  const wait = Math.max(0, lastRefresh + REFRESH_GAP_MS - Date.now());
  timer = setTimeout(async () => {
    timer = null;
    if (refreshing) { again = true; return; }
    refreshing = true;
    lastRefresh = Date.now();
    try { await refresh(); } finally {
      refreshing = false;
      if (again) { again = false; schedule(); }
    }
  }, wait);
}

// The events this page shows something of (`data-events` on <main>; all when absent): the
// others cost it nothing.
const concerns = main.dataset.events ? new Set(main.dataset.events.split(" ")) : null;

main.addEventListener("focusout", () => { if (pending) setTimeout(schedule, 0); });
main.addEventListener("toggle", () => { if (pending && !openDetails()) schedule(); }, true);

// One event stream per browser: every tab of this server shares the SharedWorker's
// EventSource (a browser allows about six connections per host, and each stream holds one).
// Where SharedWorker is missing, the tab opens its own stream.
// A page of one process (`data-process`, the call tree) ignores the calls of the others.
const processShown = (main.querySelector("[data-process]") || { dataset: {} }).dataset.process;

function concerned(msg) {
  if (msg.event === "resync") return true;
  if (concerns && !concerns.has(msg.event)) return false;
  if (processShown && msg.event === "call_completed" && msg.data) {
    try {
      const key = JSON.parse(msg.data).process_key;
      if (key !== processShown) return false;
    } catch (_) { /* not JSON: refresh */ }
  }
  return true;
}

// The call tree of a run that was deleted has nothing left to show: it goes to the list.
function deletedHere(msg) {
  if (!processShown || msg.event !== "run_deleted" || !msg.data) return false;
  try { return JSON.parse(msg.data).run_id === processShown; } catch (_) { return false; }
}

function onStream(msg) {
  if (deletedHere(msg)) { location.href = "/call-tree"; return; }
  if (msg.state === "live") { live.textContent = "live"; schedule(); }
  else if (msg.state === "reconnecting") { live.textContent = "reconnecting…"; }
  else if (msg.event && concerned(msg)) { schedule(); }
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
  for (const name of EVENTS) es.addEventListener(name, (ev) => onStream({ event: name, data: ev.data }));
}

const EVENTS = ["execution_paused", "execution_resumed", "call_completed", "breakpoints_changed",
                "functions_changed", "repl_session", "repl_output", "external_server", "log", "origins_changed", "run_deleted", "run_changed", "resync"];

// --- "paused 5 s ago", in the browser's own clock ---
function ago(seconds) {
  if (seconds < 60) return Math.max(0, Math.floor(seconds)) + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min";
  return Math.floor(seconds / 3600) + " h";
}

// When a paused program last polled: the Paused page's hidden #polls region holds the times
// (refetched every POLL_REFRESH_S while something is paused, so that a card does not change at
// each refresh); each card's [data-last-poll] says it.
const POLL_REFRESH_S = 2;
let pollsFetched = Date.now() / 1000;

// Writes the relative times of `root` (the page, or a fresh version of it before it is
// compared with the page).
function tick(root = document) {
  const now = Date.now() / 1000;
  for (const el of root.querySelectorAll("[data-since]")) {
    const at = Number(el.dataset.since);
    el.textContent = "paused " + ago(now - at) + " ago";
    el.title = new Date(at * 1000).toLocaleString();
  }
  const polls = (root.getElementById ? root : document).getElementById("polls");
  if (!polls) return;
  for (const el of root.querySelectorAll("[data-last-poll]")) {
    const source = polls.querySelector('[data-poll-of="' + CSS.escape(el.dataset.lastPoll) + '"]');
    if (!source) continue;
    const at = Number(source.dataset.polled);
    const when = "last polled " + ago(now - at) + " ago";
    el.textContent = el.dataset.gone !== undefined ? "program gone: " + when : when;
    el.title = new Date(at * 1000).toLocaleString();
  }
  if (root === document && polls.children.length && now - pollsFetched >= POLL_REFRESH_S) {
    pollsFetched = now;
    refreshPolls();
  }
}

// Refetches the poll times alone (a card keeps what is typed or shown in it); the cards too
// when a program went away or came back.
async function refreshPolls() {
  await refresh(undefined, "polls");
  for (const s of document.querySelectorAll("#polls [data-poll-of]")) {
    const el = main.querySelector('[data-last-poll="' + CSS.escape(s.dataset.pollOf) + '"]');
    if (el && (el.dataset.gone !== undefined) !== (s.dataset.gone !== undefined)) { schedule(); return; }
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
      const box = card.querySelector('[name="modified"]');
      if (box.value === box.defaultValue) return modifyByField(card);
      const m = JSON.parse(box.value);
      const shown = JSON.parse(box.dataset.shown || "{}");
      const items = JSON.parse(box.dataset.items || "{}");
      // An argument left as it was goes back as its item: the client then uses the original
      // object (a tuple stays a tuple, an int stays exact).
      const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
      const args = (m.args || []).map((v, i) =>
        shown.args && i < shown.args.length && same(v, shown.args[i]) ? items.args[i] : v);
      const kwargs = {};
      for (const [k, v] of Object.entries(m.kwargs || {})) {
        kwargs[k] = shown.kwargs && k in shown.kwargs && same(v, shown.kwargs[k]) ? items.kwargs[k] : v;
      }
      return { action: "modify", modified_args: args, modified_kwargs: kwargs };
    }
    case "replace": return { action: "continue", replacement_function: field(card, "replacement_function") };
  }
  throw new Error("unknown action " + act);
}

// Modify from the per-argument fields: a field left as it started (or empty, for a value JSON
// cannot hold) sends the argument's own item, so the client uses the original object.
function modifyByField(card) {
  const value = (el) => {
    const text = el.value.trim();
    if (text === "" || text === el.dataset.start.trim()) return JSON.parse(el.dataset.item);
    try { return JSON.parse(text); }
    catch (e) { throw new SyntaxError(el.closest("label").querySelector(".arg-name").textContent + ": " + e.message); }
  };
  const args = Array.from(card.querySelectorAll("textarea[data-arg]"))
    .sort((a, b) => Number(a.dataset.arg) - Number(b.dataset.arg)).map(value);
  const kwargs = {};
  for (const el of card.querySelectorAll("textarea[data-kwarg]")) kwargs[el.dataset.kwarg] = value(el);
  return { action: "modify", modified_args: args, modified_kwargs: kwargs };
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
    const path = "/api/paused/" + encodeURIComponent(card.dataset.pauseId);
    if (action === "dismiss") await post(path + "/dismiss", {});
    else await post(path + "/continue", bodyFor(action, card));
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

// --- forms that call the REST API: <form data-api="/api/..." data-method="POST|DELETE"> ---
// The body is a JSON object of the form's named fields (a field with data-json is parsed as
// JSON; an empty one with data-optional is left out). data-then: "refresh" (refetch the live
// regions), "go:/path/{field}" (open a page named by a field of the answer), "open:<field>"
// (open the http(s) URL a field of the answer holds), or "show:<id>"
// (write the answer into that element). A field with data-path fills its {name} in data-api
// (URL-encoded) instead of going into the body. A refusal naming a field marks it (aria-invalid, the
// cursor at the mistake); in a form with data-check, the error beside it is the server's
// rendering of that field's mistake (/breakpoints/check), its position marked in the text.
function formBody(form) {
  const body = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled || el.dataset.path !== undefined) continue;
    if (el.type === "checkbox") { body[el.name] = el.checked; continue; }
    if (el.value.trim() === "" && el.dataset.optional !== undefined) continue;
    if (el.dataset.json !== undefined) {
      const text = el.value.trim();
      try { body[el.name] = JSON.parse(text); }
      catch (e) { throw new Error(el.name + ": not valid JSON (" + e.message + ")"); }
    } else {
      body[el.name] = el.value;
    }
  }
  return body;
}

// Writes an answer into an element as text. An external tool's failure (a result with
// isError: true) reads as one: marked failed, its error text first, then the whole answer.
function showAnswer(out, data) {
  const result = data && data.result;
  const failed = !!(result && typeof result === "object" && result.isError === true);
  out.classList.toggle("failed", failed);
  out.replaceChildren();
  if (!failed) { out.textContent = JSON.stringify(data, null, 2); return; }
  const head = document.createElement("strong");
  head.className = "error-text";
  head.textContent = "Failed: the tool answered with an error (isError)";
  const texts = (Array.isArray(result.content) ? result.content : [])
    .filter((c) => c && c.type === "text" && typeof c.text === "string").map((c) => c.text);
  const message = document.createElement("span");
  message.className = "error-text tool-error";
  message.textContent = texts.join("\n") || "(the tool gave no error text)";
  const rest = document.createElement("span");
  rest.className = "rest";
  rest.textContent = "The whole answer:\n" + JSON.stringify(data, null, 2);
  out.append(head, "\n", message, "\n\n", rest);
}

async function submitForm(form) {
  const near = form.closest("[data-pause-id], section, main");
  const err = form.querySelector(".error") || (near && near.querySelector(".error"));
  const buttons = Array.from(form.querySelectorAll("button"));
  let data;
  try {
    const body = formBody(form);
    buttons.forEach((b) => { b.disabled = true; });
    if (form.dataset.busy && err) err.textContent = "";
    if (form.dataset.busy) form.classList.add("busy");
    const api = form.dataset.api.replace(/\{(\w+)\}/g, (_, k) =>
      encodeURIComponent(form.elements[k] ? form.elements[k].value : ""));
    data = await send(api, form.dataset.method || "POST", body);
    if (err) err.textContent = "";
  } catch (e) {
    if (err) err.textContent = e.message;
    buttons.forEach((b) => { b.disabled = false; });
    form.classList.remove("busy");
    // A switch that could not be changed shows what the server still has.
    for (const box of form.querySelectorAll('input[type="checkbox"][data-submit]')) box.checked = box.defaultChecked;
    if (e.data && e.data.field) await markField(form, e.data, err);
    return;
  }
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  buttons.forEach((b) => { b.disabled = false; });
  form.classList.remove("busy");
  const then = form.dataset.then || "refresh";
  if (then.startsWith("open:")) {
    // A URL the answer names (an authorization server's page): http(s) only.
    const url = String(data[then.slice(5)] || "");
    if (/^https?:\/\//i.test(url)) location.href = url;
  } else if (then.startsWith("go:")) {
    location.href = then.slice(3).replace(/\{(\w+)\}/g, (_, k) => encodeURIComponent(data[k]));
  } else if (then.startsWith("show:")) {
    const out = document.getElementById(then.slice(5));
    if (out) { showAnswer(out, data); out.hidden = false; }
  } else {
    if (form.dataset.reset !== undefined) form.reset();
    pending = false;
    refresh(form);
  }
}

// Marks the field a refusal names, and shows the mistake's position: the server renders the
// message with the text around it marked (a fragment, like live updates), and the cursor goes
// to that character.
async function markField(form, data, err) {
  const el = form.querySelector('[name="' + CSS.escape(data.field) + '"]');
  if (!el || !TEXT_FIELD.test(el.type)) return;
  el.setAttribute("aria-invalid", "true");
  const column = data.position && Number(data.position.column);
  if (!column) return;
  if (form.dataset.check !== undefined && err) {
    const url = "/breakpoints/check?fragment=1&field=" + encodeURIComponent(data.field) +
      "&text=" + encodeURIComponent(el.value);
    try {
      const r = await fetch(url, { headers: { Accept: "text/html" } });
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      const shown = doc.getElementById("check-result");
      if (r.ok && shown && shown.childNodes.length) err.replaceChildren(...Array.from(shown.childNodes));
    } catch (_) { /* the message alone stays */ }
  }
  // The column counts characters from 1; the field counts UTF-16 units.
  const at = Array.from(el.value).slice(0, column - 1).join("").length;
  el.focus();
  el.setSelectionRange(at, at);
}

async function send(path, method, body) {
  const r = await fetch(path, {
    method,
    headers: { "Content-Type": "application/json" },
    body: method === "GET" ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = data && (data.message || data.error) || ("HTTP " + r.status);
    const e = new Error(msg);
    e.data = data;
    throw e;
  }
  return data;
}

document.addEventListener("submit", (ev) => {
  const form = ev.target.closest("form[data-api]");
  if (!form) return;
  ev.preventDefault();
  submitForm(form);
});

// /docs: each operation's form sends its request from this page (this server's own origin, so
// the same trust rules as every page) and shows the status and the answer. Path parameters
// fill the braces of the path; query parameters left empty are not sent; the body must be JSON.
document.addEventListener("submit", async (ev) => {
  const form = ev.target.closest("form[data-try]");
  if (!form) return;
  ev.preventDefault();
  const out = form.nextElementSibling;
  const show = (status, text, failed) => {
    out.hidden = false;
    out.classList.toggle("failed", failed);
    const head = document.createElement("strong");
    head.textContent = status;
    const pre = document.createElement("pre");
    pre.className = "value";
    pre.textContent = text;
    out.replaceChildren(head, pre);
  };
  let path = form.dataset.path;
  const query = new URLSearchParams();
  let body;
  for (const el of form.querySelectorAll("[data-in]")) {
    const where = el.dataset.in;
    if (where === "path") path = path.replace("{" + el.dataset.name + "}", encodeURIComponent(el.value));
    else if (where === "query" && el.value !== "") query.append(el.dataset.name, el.value);
    else if (where === "body" && el.value.trim() !== "") {
      try { JSON.parse(el.value); } catch (e) {
        el.setAttribute("aria-invalid", "true");
        show("Not sent", "The request body is not JSON: " + e.message, true);
        return;
      }
      el.removeAttribute("aria-invalid");
      body = el.value;
    }
  }
  const url = path + (query.toString() ? "?" + query : "");
  const method = form.dataset.method;
  const button = form.querySelector("button");
  button.disabled = true;
  try {
    const headers = body === undefined ? {} : { "Content-Type": "application/json" };
    const r = await fetch(url, { method, headers, body });
    const type = r.headers.get("Content-Type") || "";
    let text = await r.text();
    if (type.includes("json")) { try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* as sent */ } }
    show(method + " " + url + ": " + r.status + " " + r.statusText, text, !r.ok);
  } catch (e) {
    show(method + " " + url + ": not answered", String(e), true);
  } finally {
    button.disabled = false;
  }
});

// A choice applies at once when made with the pointer. Arrow keys on a closed select pass
// through every value on the way: those apply only on Enter or when the select loses the
// focus, so that a live program gets the one value chosen, not each one passed.
let keyed = null;
document.addEventListener("keydown", (ev) => {
  const el = ev.target;
  if (!el.matches || !el.matches("select[data-submit]")) return;
  if (ev.key === "Enter") {
    if (el.dataset.keyed) {
      delete el.dataset.keyed;
      applyChoice(el);
    }
    ev.preventDefault();
  } else if (ev.key !== "Tab") {
    keyed = el;
  }
}, true);
document.addEventListener("keyup", () => { keyed = null; }, true);
document.addEventListener("focusout", (ev) => {
  const el = ev.target;
  if (el.matches && el.matches("select[data-submit]") && el.dataset.keyed) {
    delete el.dataset.keyed;
    applyChoice(el);
  }
}, true);

document.addEventListener("change", (ev) => {
  const el = ev.target;
  if (el.matches && el.matches('select[data-submit], input[type="checkbox"][data-submit]')) {
    if (el === keyed) { el.dataset.keyed = "1"; return; }
    applyChoice(el);
  }
});

// A choice applies its form: an API form through submitForm, a filter form (a GET, such as the
// Calls page's) by loading its address.
function applyChoice(el) {
  const form = el.closest("form");
  if (!form) return;
  if (form.matches("form[data-api]")) submitForm(form);
  else if (form.method === "get") form.requestSubmit();
}

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

// --- REPL: Enter runs, Shift+Enter adds a line, up/down recall earlier input ---
function scrollTranscript() {
  const t = main.querySelector(".transcript");
  if (t && t.lastElementChild && t.dataset.seen !== String(t.children.length)) {
    t.dataset.seen = String(t.children.length);
    t.lastElementChild.scrollIntoView({ block: "nearest" });
  }
}

let recall = -1;
document.addEventListener("keydown", (ev) => {
  const box = ev.target;
  if (!box.matches || !box.matches("textarea[data-history]")) return;
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    if (box.value.trim()) { recall = -1; box.form.requestSubmit(); }
    return;
  }
  const past = Array.from(main.querySelectorAll("[data-expr]")).map((el) => el.dataset.expr);
  if (!past.length) return;
  const single = !box.value.includes("\n");
  if (ev.key === "ArrowUp" && (single || box.selectionStart === 0)) {
    recall = recall < 0 ? past.length - 1 : Math.max(0, recall - 1);
    box.value = past[recall];
    ev.preventDefault();
  } else if (ev.key === "ArrowDown" && recall >= 0 && (single || box.selectionEnd === box.value.length)) {
    recall += 1;
    box.value = recall < past.length ? past[recall] : "";
    if (recall >= past.length) recall = -1;
    ev.preventDefault();
  }
}, true);

// --- time stamps in the browser's own time zone ---
function localTimes(root = document) {
  const today = new Date().toDateString();
  for (const el of root.querySelectorAll("[data-time]")) {
    const at = new Date(Number(el.dataset.time) * 1000);
    if (isNaN(at.getTime()) || el.dataset.shown === el.dataset.time) continue;
    // Today: the time of day to the millisecond; other days with their date.
    const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit",
                                             fractionalSecondDigits: 3, hourCycle: "h23" });
    el.textContent = at.toDateString() === today ? time : at.toLocaleDateString() + " " + time;
    el.title = at.toString();
    el.dataset.shown = el.dataset.time;
  }
}

tick();
localTimes();
// Lists that keep to their newest line start there.
for (const list of main.querySelectorAll('[data-stick="bottom"]')) list.scrollTop = list.scrollHeight;
settle();
scrolls([main])();
setInterval(tick, 1000);
if (main.querySelector("[data-live]")) connect();

// --- Call tree, call stack and frame pages ---

// Incremental filter: an input[data-filter] hides the rows ([data-text], lowercase text) of
// the element it names that do not contain what is typed, and keeps it in the URL, so a
// reload or a live refresh (rendered by the server from ?filter=) shows the same rows.
function applyFilter(input) {
  const rows = document.getElementById(input.dataset.filter);
  if (!rows) return;
  const want = input.value.trim().toLowerCase();
  for (const row of rows.querySelectorAll("[data-text]")) {
    row.hidden = want !== "" && !row.dataset.text.includes(want);
  }
  const url = new URL(location.href);
  if (want) url.searchParams.set(input.name, input.value.trim());
  else url.searchParams.delete(input.name);
  history.replaceState(null, "", url);
}

document.addEventListener("input", (ev) => {
  const input = ev.target.closest && ev.target.closest("input[data-filter]");
  if (input) applyFilter(input);
});

// Links marked data-swap change only the call tree's regions: they are followed without a
// reload, by fetching the address's fragment and swapping the page's live regions (the
// address goes into the history, and back and forward swap again).
async function swapTo(href, push) {
  const url = new URL(href, location.href);
  const frag = new URL(url);
  frag.searchParams.set("fragment", "1");
  let doc;
  try {
    const r = await fetch(frag, { headers: { Accept: "text/html" } });
    if (!r.ok) { location.assign(url); return; }
    doc = new DOMParser().parseFromString(await r.text(), "text/html");
  } catch (_) {
    location.assign(url);
    return;
  }
  if (push) history.pushState(null, "", url);
  for (const region of main.querySelectorAll("[data-live][id]")) {
    const fresh = doc.getElementById(region.id);
    if (fresh) region.replaceChildren(...Array.from(fresh.childNodes));
  }
  localTimes();
  const current = main.querySelector("ul.tree [aria-current]");
  if (current) current.scrollIntoView({ block: "nearest" });
}

document.addEventListener("click", (ev) => {
  const link = ev.target.closest && ev.target.closest("a[data-swap]");
  if (!link || ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
  ev.preventDefault();
  swapTo(link.href, true);
});
window.addEventListener("popstate", () => {
  if (main.querySelector("#tree-nodes")) swapTo(location.href, false);
});

// Step through the calls of a call tree: j next, k previous.
document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || editing()) return;
  if (ev.key !== "j" && ev.key !== "k") return;
  const link = main.querySelector(ev.key === "j" ? 'a[data-step="next"]' : 'a[data-step="prev"]');
  if (!link) return;
  ev.preventDefault();
  if (link.dataset.swap !== undefined) swapTo(link.href, true);
  else location.assign(link.href);
});

const selectedCall = main.querySelector("ul.tree [aria-current]");
if (selectedCall) selectedCall.scrollIntoView({ block: "nearest" });
const highlighted = location.hash ? null : main.querySelector("pre.src .line.hl");
if (highlighted && !main.querySelector(".stack")) highlighted.scrollIntoView({ block: "center" });
