// ui_test.mjs: the web UI's checks in real headless Chromium (playwright-core), against the
// real binary and the demo program. scripts/ui_test.sh installs what this needs and runs it.
//
// Every check is independent: it starts its own server (--memory --port 0, CIDELDILL_HOME and
// CIDELDILL_PORT_FILE in a private temporary directory), its own browser context and, when it
// needs one, its own debugged program; all of them are stopped when the check ends. Every wait
// has a deadline. Screenshots go to target/ui-screenshots/<name>.png.
//
// Adding a page's checks: register them with check("page: what it shows", async (t) => ...),
// using t.server(), t.page(server), t.demo(server), waitFor(...) and t.shot(page, name).
//
// Usage: node scripts/ui_test.mjs [name substring ...]   (prints PASS/FAIL per check, then
// `ui: N passed, N failed`; exit 1 on any failure). Environment: CIDELDILL_SERVER_BIN,
// CIDELDILL_UI_CACHE (where playwright-core is installed), CIDELDILL_CHROMIUM,
// CIDELDILL_UI_TMP (a directory for this run's files), CIDELDILL_UI_DEADLINE_S (one wait's
// deadline, default 15), CIDELDILL_UI_DEBUG=1 (every page's console and requests on stderr),
// CIDELDILL_UI_RUST_LOG (the servers' log filter, default warn; a failed check prints the end
// of its servers' logs).

import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BIN = process.env.CIDELDILL_SERVER_BIN || path.join(ROOT, "target/debug/cideldill-server");
const CACHE = process.env.CIDELDILL_UI_CACHE || path.join(ROOT, ".cache/ui");
const CHROMIUM = process.env.CIDELDILL_CHROMIUM || "/usr/bin/chromium";
const SHOTS = path.join(ROOT, "target/ui-screenshots");
const DEADLINE_MS = Number(process.env.CIDELDILL_UI_DEADLINE_S || 15) * 1000;
/** How long one check may take in all. */
const CHECK_MS = 60_000;
/** How soon every open tab must show a change (a stream that is not live never shows it). */
const LIVE_MS = 8000;
/** CIDELDILL_UI_DEBUG=1: every page's console and requests go to stderr. */
const DEBUG = !!process.env.CIDELDILL_UI_DEBUG;
const t0 = Date.now();

const require = createRequire(path.join(CACHE, "package.json"));
const { chromium } = require("playwright-core");

const OWN_TMP = !process.env.CIDELDILL_UI_TMP;
const TMP = fs.mkdtempSync(path.join(process.env.CIDELDILL_UI_TMP || os.tmpdir(), "cideldill-ui-"));

// ---------------------------------------------------------------------------------------
// Processes: every child is tracked and killed when the check or the run ends.

const children = new Set();

function track(child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  return child;
}

function exited(child) {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Kills a child and waits for it to be gone (with a deadline). */
async function stop(child, signal = "SIGKILL") {
  if (exited(child)) return;
  const gone = new Promise((resolve) => child.once("exit", resolve));
  child.kill(signal);
  await Promise.race([gone, sleep(DEADLINE_MS)]);
  if (!exited(child)) child.kill("SIGKILL");
}

process.on("exit", () => {
  for (const child of children) {
    try { child.kill("SIGKILL"); } catch (_) { /* already gone */ }
  }
  if (OWN_TMP) fs.rmSync(TMP, { recursive: true, force: true });
});
process.on("SIGINT", () => process.exit(130));
process.on("SIGTERM", () => process.exit(143));

// ---------------------------------------------------------------------------------------
// Shared helpers

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Calls `fn` every `interval` ms until it returns something truthy, which is returned; fails
 * after `timeout` ms naming `what`. An exception from `fn` ends the wait at once.
 */
async function waitFor(fn, { what = "a condition", timeout = DEADLINE_MS, interval = 50 } = {}) {
  const until = Date.now() + timeout;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeout / 1000} s waiting for ${what}`);
    await sleep(interval);
  }
}

function assert(ok, message) {
  if (!ok) throw new Error(message);
}

/** One HTTP request without Origin (as scripts and the Python client send them). */
function request(url, { method = "GET", body, headers = {}, timeout = DEADLINE_MS } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    const rq = http.request(url, {
      method,
      headers: { ...(data ? { "Content-Type": "application/json", "Content-Length": data.length } : {}), ...headers },
      timeout,
    }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({
          status: res.statusCode,
          headers: res.headers,
          text,
          json() { return JSON.parse(text); },
        });
      });
      res.on("error", reject);
    });
    rq.on("timeout", () => rq.destroy(new Error(`${method} ${url}: no answer within ${timeout / 1000} s`)));
    rq.on("error", reject);
    rq.end(data);
  });
}

function tail(text, lines = 15) {
  return text.split("\n").slice(-lines).join("\n");
}

/**
 * Starts the server: `--memory --port <port>` (0 by default) with its home and port file in a
 * directory of this run. Answers {port, url, dir, log(), api(method, path, body), stop()}.
 */
async function startServer({ port = 0, args = [], dir } = {}) {
  dir = dir || fs.mkdtempSync(path.join(TMP, "server-"));
  const portFile = path.join(dir, "port");
  fs.rmSync(portFile, { force: true });
  const logPath = path.join(dir, `server-${Date.now()}.log`);
  const logFd = fs.openSync(logPath, "w");
  const child = track(spawn(BIN, ["--memory", "--port", String(port), ...args], {
    env: { ...process.env, CIDELDILL_HOME: dir, CIDELDILL_PORT_FILE: portFile, RUST_LOG: process.env.CIDELDILL_UI_RUST_LOG || "warn" },
    stdio: ["ignore", logFd, logFd],
  }));
  fs.closeSync(logFd);
  const log = () => fs.readFileSync(logPath, "utf8");
  const bound = await waitFor(() => {
    if (exited(child)) throw new Error(`the server exited early (${child.exitCode ?? child.signalCode}):\n${tail(log())}`);
    const text = fs.existsSync(portFile) ? fs.readFileSync(portFile, "utf8").trim() : "";
    return /^\d+$/.test(text) && Number(text);
  }, { what: "the server's port file" });
  const url = `http://127.0.0.1:${bound}`;
  return {
    port: bound,
    url,
    dir,
    child,
    log,
    async api(method, apiPath, body) {
      const r = await request(url + apiPath, { method, body });
      assert(r.status < 400, `${method} ${apiPath} answered ${r.status}: ${r.text.slice(0, 300)}`);
      return r.json();
    },
    stop: (signal) => stop(child, signal),
  };
}

/**
 * Starts a debugged program (scripts/demo_app.py by default) against `server`. Answers
 * {child, stdout(), stderr(), lines(), waitForLine(text or RegExp), waitForExit()}.
 */
function startDemo(server, { script = "scripts/demo_app.py", args = [] } = {}) {
  const child = track(spawn("python3", [path.join(ROOT, script), ...args], {
    env: { ...process.env, CIDELDILL_SERVER_URL: server.url, PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  }));
  let out = "";
  let err = "";
  let ended = "";
  const startedAt = Date.now();
  child.on("exit", (code, signal) => {
    ended = `${script} ended after ${((Date.now() - startedAt) / 1000).toFixed(1)} s with ${signal || `exit status ${code}`}`;
  });
  child.stdout.on("data", (c) => { out += c; });
  child.stderr.on("data", (c) => { err += c; });
  const demo = {
    child,
    stdout: () => out,
    stderr: () => err,
    /** How the program ended, or "" while it runs. */
    ended: () => ended,
    lines: () => out.split("\n").filter(Boolean),
    /** Waits for a line of stdout equal to `want` (a string) or matching it (a RegExp). */
    async waitForLine(want, timeout = DEADLINE_MS) {
      const match = (l) => (typeof want === "string" ? l === want : want.test(l));
      try {
        return await waitFor(() => demo.lines().find(match), { what: `the line ${JSON.stringify(String(want))}`, timeout });
      } catch (e) {
        throw new Error(`${e.message}\nstdout:\n${out}\nstderr (end):\n${tail(err, 8)}`);
      }
    },
    async waitForExit(timeout = DEADLINE_MS) {
      await waitFor(() => exited(child), { what: `${script} to exit`, timeout });
      return child.exitCode;
    },
  };
  return demo;
}

// ---------------------------------------------------------------------------------------
// The browser, and what every page of ours is watched for

let browser = null;

async function theBrowser() {
  if (!browser) {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  }
  return browser;
}

/** Runs in every page before its scripts: records Content-Security-Policy violations. */
function watchViolations() {
  window.__violations = [];
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__violations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline code"} (${e.sourceFile}:${e.lineNumber})`);
  });
}

/**
 * What a check gets: fresh servers, pages, programs and screenshots, all cleaned up when it
 * ends. `problems` collects what a page did wrong on its own (uncaught errors, dialogs, CSP
 * violations), which fails the check.
 */
function makeContext() {
  const cleanups = [];
  const problems = [];
  const pages = [];
  const servers = [];
  const programs = [];
  let context = null;
  const t = {
    problems,
    servers,
    programs,
    async server(options) {
      const s = await startServer(options);
      servers.push(s);
      cleanups.push(() => s.stop());
      return s;
    },
    demo(server, options) {
      const d = startDemo(server, options);
      programs.push(d);
      cleanups.push(() => stop(d.child));
      return d;
    },
    /** A new browser context for this check (one per check unless `fresh`). */
    async context(options = {}) {
      if (context && !options.fresh) return context;
      const b = await theBrowser();
      const c = await b.newContext({ viewport: { width: 1100, height: 800 }, ...options.context });
      c.setDefaultTimeout(DEADLINE_MS);
      await c.addInitScript(watchViolations);
      cleanups.push(() => c.close());
      if (!options.fresh) context = c;
      return c;
    },
    /** A new tab on `server`'s page `pagePath` (default `/`), watched for problems. */
    async page(server, pagePath = "/", options = {}) {
      const c = await t.context(options);
      const page = await c.newPage();
      t.watch(page, `${pagePath} tab ${pages.length + 1}`);
      pages.push(page);
      if (server) await page.goto(server.url + pagePath);
      return page;
    },
    watch(page, label) {
      if (DEBUG) {
        const at = () => ((Date.now() - t0) / 1000).toFixed(2);
        page.on("console", (m) => console.error(`[${at()}] ${label} console.${m.type()}: ${m.text()}`));
        page.on("requestfailed", (r) => console.error(`[${at()}] ${label} failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`));
        page.on("request", (r) => console.error(`[${at()}] ${label} request: ${r.method()} ${r.url()}`));
      }
      page.on("pageerror", (e) => problems.push(`${label}: uncaught ${e.name}: ${e.message}`));
      page.on("dialog", (d) => {
        problems.push(`${label}: a ${d.type()} dialog opened: ${d.message()}`);
        d.dismiss().catch(() => {});
      });
      page.on("console", (m) => {
        if (/Content Security Policy|Refused to (execute|load|apply)/.test(m.text())) {
          problems.push(`${label}: console: ${m.text()}`);
        }
      });
    },
    async shot(page, name) {
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
    },
    /** CSP violations the watched pages recorded. */
    async violations() {
      const all = [];
      for (const p of pages) {
        if (p.isClosed()) continue;
        all.push(...(await p.evaluate(() => window.__violations || []).catch(() => [])));
      }
      return all;
    },
    onCleanup(fn) { cleanups.push(fn); },
    async cleanup() {
      for (const fn of cleanups.reverse()) {
        try { await fn(); } catch (_) { /* best effort */ }
      }
    },
  };
  return t;
}

// ---------------------------------------------------------------------------------------
// The registry

const checks = [];

/** Registers a named check: `fn(t)` throws to fail. */
function check(name, fn) {
  checks.push({ name, fn });
}

// ---------------------------------------------------------------------------------------
// Paused page helpers

const CARD = "article.card";

/** Cards of pauses `when` (before/after) a call of the function named exactly `fn`. */
function pauseCard(page, fn, when) {
  const name = new RegExp(`^${fn.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
  return page.locator(`${CARD}[data-when="${when}"]`).filter({ has: page.locator(".fn", { hasText: name }) });
}

/** Waits until `page` shows the card (visible), and answers its pause id. */
async function cardShown(page, card, what) {
  try {
    await card.first().waitFor({ state: "visible", timeout: DEADLINE_MS });
  } catch (_) {
    const shown = await page.locator(CARD).allInnerTexts().catch(() => []);
    throw new Error(`no ${what} card within ${DEADLINE_MS / 1000} s; cards shown: ${JSON.stringify(shown).slice(0, 400)}`);
  }
  return card.first().getAttribute("data-pause-id");
}

/** Waits until the page no longer shows the card of pause `id`. */
async function cardGone(page, id, what = "the resumed card") {
  await page.locator(`${CARD}[data-pause-id="${id}"]`).waitFor({ state: "detached", timeout: DEADLINE_MS })
    .catch(() => { throw new Error(`${what} (${id}) still shown after ${DEADLINE_MS / 1000} s`); });
}

/** Opens the card's <details> whose summary says `summary` (again if a refresh closed it). */
async function openDetails(card, summary) {
  const details = card.locator("details").filter({ has: card.page().locator("summary", { hasText: summary }) });
  await waitFor(async () => {
    if (await details.evaluate((d) => d.open).catch(() => false)) return true;
    await details.locator("summary").click({ timeout: 2000 }).catch(() => {});
    return false;
  }, { what: `the "${summary}" section to open`, interval: 100 });
  return details;
}

/** Waits until the page's stream is up (the header says "live"). */
async function pageLive(page) {
  await page.locator("#live", { hasText: /^live$/ }).waitFor({ timeout: DEADLINE_MS })
    .catch(() => { throw new Error(`the page did not go live within ${DEADLINE_MS / 1000} s`); });
}

/** A paused page on a fresh server with the demo paused before add(2, y=3). */
async function demoPausedAtAdd(t) {
  const server = await t.server();
  const page = await t.page(server);
  await pageLive(page);
  const demo = t.demo(server);
  const id = await cardShown(page, pauseCard(page, "add", "before"), "add (before)");
  return { server, page, demo, card: page.locator(`${CARD}[data-pause-id="${id}"]`), id };
}

/** Checks the result on add's after-pause card, then continues it from the page. */
async function continueAfter(page, demo, expectResult) {
  const after = pauseCard(page, "add", "after");
  const id = await cardShown(page, after, "add (after)");
  const outcome = (await after.locator(".outcome").textContent()).replace(/\s+/g, " ").trim();
  assert(outcome.includes(`returned ${expectResult}`), `the after card says "${outcome}", expected "returned ${expectResult}"`);
  await after.locator('button[data-act="continue"]').click();
  await cardGone(page, id, "the after card");
}

// ---------------------------------------------------------------------------------------
// Checks: the Paused page

check("paused: the card of a new pause appears without a reload", async (t) => {
  const server = await t.server();
  const page = await t.page(server);
  await pageLive(page);
  const empty = await page.locator("#cards .empty").innerText();
  assert(empty.includes("Nothing is paused"), `the empty page says: ${empty}`);
  await t.shot(page, "paused-empty");
  await page.evaluate(() => { window.__sameDocument = true; });
  const demo = t.demo(server);
  const card = pauseCard(page, "add", "before");
  await cardShown(page, card, "add (before)");
  assert(await page.evaluate(() => window.__sameDocument === true), "the page was reloaded");
  const text = await card.innerText();
  for (const want of ["before the call", "2", "y", "3", "Continue"]) {
    assert(text.includes(want), `the card lacks "${want}": ${text}`);
  }
  const status = await page.locator("#status").innerText();
  assert(/\b1 paused\b/.test(status), `the status line says "${status}"`);
  await waitFor(async () => /^\(1 paused\) Paused/.test(await page.title()), { what: "the title to say (1 paused)" });
  await t.shot(page, "paused-before");
  assert(demo.lines().length === 0, `the demo went on: ${demo.stdout()}`);
});

check("paused: Continue runs the call, then the after-pause shows its result", async (t) => {
  const { page, demo, card, id } = await demoPausedAtAdd(t);
  await card.locator('button[data-act="continue"]').click();
  await cardGone(page, id, "the before card");
  await cardShown(page, pauseCard(page, "add", "after"), "add (after)");
  await t.shot(page, "paused-after");
  await continueAfter(page, demo, "5");
  await demo.waitForLine("add(2, y=3) -> 5");
  // The next call pauses in the same page.
  await cardShown(page, pauseCard(page, "greet", "before"), "greet (before)");
});

check("paused: Skip with a result returns it instead of running the call", async (t) => {
  const { page, demo, card } = await demoPausedAtAdd(t);
  const details = await openDetails(card, "Skip with a result");
  await details.locator('textarea[name="fake_result"]').fill("99");
  await details.locator('button[data-act="skip"]').click();
  await continueAfter(page, demo, "99");
  await demo.waitForLine("add(2, y=3) -> 99   [skipped: fake result from the server]");
});

check("paused: Modify runs the call with the new arguments", async (t) => {
  const { server, page, demo, card } = await demoPausedAtAdd(t);
  const details = await openDetails(card, "Modify arguments");
  const field = details.locator('textarea[name="modified"]');
  const start = JSON.parse(await field.inputValue());
  assert(Array.isArray(start.args) && start.args.length === 1 && start.kwargs && "y" in start.kwargs,
    `the Modify field starts with ${JSON.stringify(start)}`);
  await field.fill(JSON.stringify({ args: [10], kwargs: { y: 20 } }));
  await details.locator('button[data-act="modify"]').click();
  // The after card says what ran, who changed it, and lists the arguments that ran.
  const after = pauseCard(page, "add", "after");
  await cardShown(page, after, "add (after)");
  const said = (await after.locator(".resolution").textContent()).replace(/\s+/g, " ").trim();
  assert(said === "modified through the web UI: ran as add(10, y=20), called as add(2, y=3)",
    `the after card's resolution says "${said}"`);
  const args = await after.locator("dl.args dd").allInnerTexts();
  assert(/^10\b/.test(args[0]) && /^20\b/.test(args[1]), `the after card lists ${JSON.stringify(args)}`);
  await t.shot(page, "paused-after-modify");
  await continueAfter(page, demo, "30");
  await demo.waitForLine("add(10, y=20) -> 30   [arguments modified by the server; original call: add(2, y=3)]");
  // The calls page marks the call the same way.
  await page.goto(`${server.url}/calls?function=add`);
  const row = (await page.locator("table.calls .resolution").first().textContent()).replace(/\s+/g, " ").trim();
  assert(row.startsWith("modified through the web UI: ran as add(10, y=20)"), `the calls page says "${row}"`);
  await t.shot(page, "calls-modified");
});

check("paused: Raise makes the call raise the chosen exception", async (t) => {
  const { page, demo, card, id } = await demoPausedAtAdd(t);
  const details = await openDetails(card, "Raise");
  await details.locator('select[name="exception_type"]').selectOption("ValueError");
  await details.locator('input[name="exception_message"]').fill("boom from the page");
  await details.locator('button[data-act="raise"]').click();
  await cardGone(page, id, "the raised card");
  await demo.waitForLine("add(2, y=3) raised ValueError: boom from the page   [raised on request of the server]");
  // A raising call does not pause after it (default behavior): the next call pauses.
  await cardShown(page, pauseCard(page, "greet", "before"), "greet (before)");
});

check("paused: Replace with runs the other function of the same signature", async (t) => {
  const { page, demo, card } = await demoPausedAtAdd(t);
  const details = await openDetails(card, "Replace with");
  await details.locator('select[name="replacement_function"]').selectOption("multiply");
  await details.locator('button[data-act="replace"]').click();
  await continueAfter(page, demo, "6");
  await demo.waitForLine("add(2, y=3) -> 6   [replaced by multiply]");
});

check("paused: bad JSON in Skip is reported on the card, the pause stays", async (t) => {
  const { server, page, demo, card, id } = await demoPausedAtAdd(t);
  const details = await openDetails(card, "Skip with a result");
  await details.locator('textarea[name="fake_result"]').fill("{not json");
  await details.locator('button[data-act="skip"]').click();
  const error = card.locator("p.error");
  await waitFor(async () => (await error.innerText()).includes("Not valid JSON"), { what: "the card's JSON error" });
  const paused = (await server.api("GET", "/api/paused")).paused.map((p) => p.id);
  assert(paused.includes(id), "the pause is gone");
  assert(demo.lines().length === 0, `the demo went on: ${demo.stdout()}`);
});

check("paused: Continue all lets the demo finish", async (t) => {
  const server = await t.server();
  const page = await t.page(server);
  await pageLive(page);
  const demo = t.demo(server);
  const all = page.locator('button[data-act="continue-all"]');
  let clicks = 0;
  await waitFor(async () => {
    if (exited(demo.child)) return true;
    if (await page.locator(CARD).count()) {
      await all.click();
      clicks += 1;
    }
    return false;
  }, { what: "the demo to finish", timeout: 30_000, interval: 100 });
  assert(demo.child.exitCode === 0, demo.ended());
  const lines = demo.lines();
  const want = ["add(2, y=3) -> 5", "greet('world') -> 'Hello, world!'"];
  for (const w of want) assert(lines.includes(w), `the demo did not print ${w}: ${demo.stdout()}`);
  for (const fn of ["summarize(", "describe(", "divide(1, 0) raised ZeroDivisionError"]) {
    assert(lines.some((l) => l.startsWith(fn)), `no line for ${fn}: ${demo.stdout()}`);
  }
  assert(lines.length === 5, `the demo printed ${lines.length} lines: ${demo.stdout()}`);
  await page.locator("#cards .empty").waitFor({ timeout: DEADLINE_MS });
  assert(clicks >= 1, "Continue all was never clicked");
});

check("paused: c continues the focused card, j and k move between cards", async (t) => {
  const { page, demo, card, id } = await demoPausedAtAdd(t);
  await card.focus();
  await page.keyboard.press("j");
  assert(await card.evaluate((c) => c === document.activeElement), "j moved the focus off the only card");
  await page.keyboard.press("c");
  await cardGone(page, id, "the card continued with c");
  const after = pauseCard(page, "add", "after");
  await cardShown(page, after, "add (after)");
  await waitFor(() => after.evaluate((c) => c === document.activeElement || document.activeElement === document.body),
    { what: "the focus to settle" });
  await after.focus();
  await page.keyboard.press("c");
  await demo.waitForLine("add(2, y=3) -> 5");
});

check("paused: Modify starts from the values; an argument left as it is keeps its own", async (t) => {
  const { page, demo, card } = await demoPausedAtAdd(t);
  const details = await openDetails(card, "Modify arguments");
  const field = details.locator('textarea[name="modified"]');
  const start = JSON.parse(await field.inputValue());
  assert(JSON.stringify(start) === JSON.stringify({ args: [2], kwargs: { y: 3 } }),
    `the Modify field starts with the plain values: ${JSON.stringify(start)}`);
  await field.fill(JSON.stringify({ args: [10], kwargs: { y: 3 } }));
  await details.locator('button[data-act="modify"]').click();
  await continueAfter(page, demo, "13");
  await demo.waitForLine(/^add\(10, y=3\) -> 13/);
});

check("paused: an open panel on one card does not hold back the page", async (t) => {
  const { server, page, card, id } = await demoPausedAtAdd(t);
  await openDetails(card, "Skip with a result");
  // Resumed elsewhere (a script): the card goes, the after-pause comes, the status follows.
  await server.api("POST", `/api/paused/${id}/continue`, { action: "continue" });
  await cardGone(page, id, "the card resumed by a script");
  await cardShown(page, pauseCard(page, "add", "after"), "add (after)");
  await waitFor(async () => /\b1 paused\b/.test(await page.locator("#status").textContent()),
    { what: "the status line to say 1 paused" });
});

// Hostile values: what scripts/ui/hostile_app.py sends (name, arguments, keyword, result).
const HOSTILE = {
  name: "<img src=x onerror=alert(5)>",
  texts: [
    "</script><img src=x onerror=alert(1)>",
    "\"><svg onload=alert(2)>",
    "><iframe srcdoc=\"<script>alert(3)</script>\"></iframe>",
    "<b onmouseover=alert(6)>key</b>",
    "<a href=\"javascript:alert(4)\">click</a>",
  ],
  result: "<script>alert(7)</script><style>body{display:none}</style>",
};

/** Asserts that `card` shows `texts` as text and holds no element they could have made. */
async function assertInert(card, texts, where) {
  const text = await card.innerText();
  for (const want of texts) assert(text.includes(want), `${where}: the card does not show ${JSON.stringify(want)} as text: ${text.slice(0, 600)}`);
  // The card's own links (call site, objects, REPL sessions) point into this server; any other
  // link, or any element of the hostile strings' kinds, was made from program data.
  const made = await card.evaluate((c) =>
    Array.from(c.querySelectorAll("img, svg, iframe, script, style, b, a, [onerror], [onload], [onmouseover]"))
      .filter((e) => !(e.tagName === "A" && /^\/(object|callstack|repl)\/[^<>"]*$/.test(e.getAttribute("href") || "")
                       && e.children.length === 0))
      .map((e) => e.outerHTML.slice(0, 80)));
  assert(made.length === 0, `${where}: the card holds elements made from program data: ${made.join(" | ")}`);
}

check("paused: hostile strings from the program are shown as text and never run", async (t) => {
  const server = await t.server();
  const page = await t.page(server);
  await pageLive(page);
  const program = t.demo(server, { script: "scripts/ui/hostile_app.py" });
  const before = pauseCard(page, HOSTILE.name, "before");
  const id = await cardShown(page, before, "hostile (before)");
  const all = [HOSTILE.name, ...HOSTILE.texts];
  await assertInert(before, all, "live update");
  await t.shot(page, "hostile");
  // The same card rendered by the server at load time.
  await page.reload();
  await assertInert(pauseCard(page, HOSTILE.name, "before"), all, "after a reload");
  // Its Modify field holds the keyword as JSON text, not markup.
  const modify = await before.locator('textarea[name="modified"]').inputValue();
  assert(modify.includes(HOSTILE.texts[3]), `the Modify field lacks the keyword: ${modify.slice(0, 300)}`);
  await pageLive(page);
  await before.locator('button[data-act="continue"]').click();
  await cardGone(page, id, "the hostile before card");
  const after = pauseCard(page, HOSTILE.name, "after");
  await cardShown(page, after, "hostile (after)");
  await assertInert(after, [...all, HOSTILE.result], "the after card");
  assert(await page.locator("body").isVisible(), "the page's body was hidden by program data");
  await t.shot(page, "hostile-after");
  await after.locator('button[data-act="continue"]').click();
  await program.waitForLine(/ -> '<script>alert\(7\)<\/script>/);
  const violations = await t.violations();
  assert(violations.length === 0, `CSP violations: ${violations.join("; ")}`);
});

// ---------------------------------------------------------------------------------------
// Checks: the trust boundary, seen from a browser

/** Served by a page on another origin: tries the guarded endpoints, then the client ones. */
const OTHER_ORIGIN_JS = String.raw`"use strict";
async function tryFetch(url, init) {
  try {
    const r = await fetch(url, init);
    let text = "";
    try { text = await r.text(); } catch (_) { /* unreadable */ }
    return { status: r.status, type: r.type, text: text.slice(0, 200) };
  } catch (e) {
    return { error: String(e) };
  }
}
// A form with enctype text/plain sends name=value: the name carries the JSON up to a
// padding string that swallows the "=".
function postForm(url, body) {
  return new Promise((resolve) => {
    const name = "f" + Math.random().toString(36).slice(2);
    const frame = document.createElement("iframe");
    frame.name = name;
    document.body.append(frame);
    const form = document.createElement("form");
    form.method = "POST";
    form.action = url;
    form.enctype = "text/plain";
    form.target = name;
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = JSON.stringify(body).slice(0, -1) + ',"pad":"';
    input.value = '"}';
    form.append(input);
    document.body.append(form);
    const done = () => resolve("submitted");
    frame.addEventListener("load", done, { once: true });
    setTimeout(done, 3000);
    form.submit();
  });
}
window.attack = async (base, targets) => {
  const out = {};
  for (const [name, [path, body]] of Object.entries(targets)) {
    const text = JSON.stringify(body);
    out[name + " fetch json"] = await tryFetch(base + path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: text });
    out[name + " fetch text/plain"] = await tryFetch(base + path, {
      method: "POST", headers: { "Content-Type": "text/plain" }, body: text });
    out[name + " fetch no-cors"] = await tryFetch(base + path, {
      method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: text });
    out[name + " beacon"] = navigator.sendBeacon(base + path, new Blob([text], { type: "text/plain" }));
    out[name + " form"] = await postForm(base + path, body);
  }
  return out;
};
window.clientCalls = async (base, pauseId) => {
  const poll = await fetch(base + "/api/poll/" + encodeURIComponent(pauseId));
  const registered = await fetch(base + "/api/functions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ function_name: "registered_by_another_origin", signature: "(x)" }) });
  return { poll: { status: poll.status, body: await poll.json() },
           functions: { status: registered.status, body: await registered.json() } };
};
`;

/** A tiny site on another loopback port: `/` (HTML) and `/other.js`. Answers its origin. */
async function startOtherOrigin(t) {
  const site = http.createServer((rq, res) => {
    if (rq.url === "/other.js") {
      res.writeHead(200, { "Content-Type": "text/javascript" });
      res.end(OTHER_ORIGIN_JS);
    } else {
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end('<!doctype html><title>Another site</title><p>Another site</p><script src="/other.js"></script>');
    }
  });
  await new Promise((resolve) => site.listen(0, "127.0.0.1", resolve));
  t.onCleanup(() => new Promise((resolve) => { site.closeAllConnections(); site.close(resolve); }));
  return `http://127.0.0.1:${site.address().port}`;
}

check("security: a page on another origin cannot resume, start a REPL or add a breakpoint", async (t) => {
  const server = await t.server();
  const demo = t.demo(server);
  const pauseId = await waitFor(async () => (await server.api("GET", "/api/paused")).paused[0]?.id,
    { what: "the demo's first pause" });
  const other = await startOtherOrigin(t);
  const context = await t.context();
  const page = await context.newPage();
  await page.goto(other + "/");
  await page.waitForFunction(() => typeof window.attack === "function", null, { timeout: DEADLINE_MS });
  const targets = {
    continue: [`/api/paused/${encodeURIComponent(pauseId)}/continue`, { action: "continue" }],
    "repl start": ["/api/repl/start", { pause_id: pauseId }],
    breakpoint: ["/api/breakpoints", { function_name: "added_by_another_origin" }],
  };
  const results = await page.evaluate(([base, tg]) => window.attack(base, tg), [server.url, targets]);
  // No answer may be readable by the other origin.
  for (const [name, r] of Object.entries(results)) {
    if (typeof r === "object" && r.status !== undefined && r.type !== "opaque") {
      throw new Error(`${name}: the other origin read an answer: ${JSON.stringify(r)}`);
    }
  }
  // Whatever reached the server was refused: the state is as it was.
  await sleep(300);
  const paused = (await server.api("GET", "/api/paused")).paused.map((p) => p.id);
  assert(paused.includes(pauseId), "the pause was resumed by another origin");
  const poll = await server.api("GET", `/api/poll/${pauseId}`);
  assert(poll.status === "waiting", `the pause's poll says ${JSON.stringify(poll)}`);
  const sessions = (await server.api("GET", "/api/repl/sessions")).sessions;
  assert(sessions.length === 0, `another origin started a REPL session: ${JSON.stringify(sessions)}`);
  const breakpoints = (await server.api("GET", "/api/breakpoints")).breakpoints;
  assert(!JSON.stringify(breakpoints).includes("added_by_another_origin"), `another origin added a breakpoint: ${JSON.stringify(breakpoints)}`);
  assert(demo.lines().length === 0, `the demo went on: ${demo.stdout()}`);
  // The server refused each attempt on its origin (not for its body): its log says so.
  const log = server.log();
  for (const [name, [p]] of Object.entries(targets)) {
    const refusals = log.split("\n").filter((l) => l.includes("refused") && l.includes(p) && l.includes(other)).length;
    assert(refusals >= 4, `the server logged ${refusals} origin refusals for ${name} (${p}), expected at least 4 (text/plain, no-cors, beacon, form):\n${tail(log)}`);
  }
  // The browser-client endpoints answer a page nobody allowed readably, with a refusal, and its
  // request waits in the web UI.
  const refused = await page.evaluate(([base, id]) => window.clientCalls(base, id), [server.url, pauseId]);
  assert(refused.poll.status === 403 && refused.poll.body.error === "origin_not_allowed",
    `GET /api/poll from an origin nobody allowed: ${JSON.stringify(refused.poll)}`);
  assert(refused.functions.status === 403, `POST /api/functions from an origin nobody allowed: ${JSON.stringify(refused.functions)}`);
  let functions = (await server.api("GET", "/api/functions")).functions;
  assert(!JSON.stringify(functions).includes("registered_by_another_origin"), `an origin nobody allowed registered a function`);
  const pending = (await server.api("GET", "/api/origins")).pending.map((p) => p.origin);
  assert(pending.includes(other), `the refused origin is not pending: ${JSON.stringify(pending)}`);
  // Allowed, the page reports its own calls, but still cannot poll the program's pause.
  await server.api("POST", "/api/origins", { origin: other, decision: "allow" });
  const allowed = await page.evaluate(([base, id]) => window.clientCalls(base, id), [server.url, pauseId]);
  assert(allowed.functions.status === 200, `POST /api/functions from an allowed origin: ${JSON.stringify(allowed.functions)}`);
  assert(allowed.poll.status === 403 && allowed.poll.body.error === "not_owner",
    `GET /api/poll of the program's pause from an allowed page: ${JSON.stringify(allowed.poll)}`);
  functions = (await server.api("GET", "/api/functions")).functions;
  assert(JSON.stringify(functions).includes("registered_by_another_origin"), `the function registered from the allowed origin is missing: ${JSON.stringify(functions).slice(0, 300)}`);
  assert(demo.lines().length === 0, `the demo went on: ${demo.stdout()}`);
});

// ---------------------------------------------------------------------------------------
// Checks: the browser debug client (GET /api/debug-client.js), imported by a page of another
// origin and driven through the REST API as a person would from the web UI.

/** The module of the page under debug; SERVER_URL is the debug server's. */
const CLIENT_PAGE_JS = String.raw`import * as client from "SERVER_URL/api/debug-client.js";
client.withDebug("ON");
window.client = client;
window.add = client.withDebug(function add(a, b) { return a + b; });
window.addSync = client.withDebugSync(["add_sync", function (a, b) { return a + b; }]);
client.registerReplacement("mul", function mul(a, b) { return a * b; });
client.registerReplacement("neg", (a) => -a);
window.results = {};
// Starts a call in the background; its value or error lands in results[key].
window.start = (key, call) => {
  results[key] = { pending: true };
  setTimeout(async () => {
    try { results[key] = { value: await call() }; }
    catch (e) { results[key] = { error: { name: e.name, message: e.message, isError: e instanceof Error } }; }
  });
};
// A call made by the page's own code (its call site is this file).
window.addLater = (key, a, b) => window.start(key, () => window.add(a, b));
window.pageReady = true;
`;

/**
 * A site on another loopback port whose page imports the debug client from the server given
 * to `use(server)` (the site starts first, so that the server can be told its origin).
 * `csp` is the page's Content-Security-Policy, if any. Answers {origin, use(server)}.
 */
async function startClientSite(t, { csp } = {}) {
  let serverUrl = null;
  const site = http.createServer((rq, res) => {
    if (rq.url === "/page.js") {
      res.writeHead(200, { "Content-Type": "text/javascript", "Cache-Control": "no-store" });
      res.end(CLIENT_PAGE_JS.replace("SERVER_URL", serverUrl));
      return;
    }
    res.writeHead(200, { "Content-Type": "text/html", ...(csp ? { "Content-Security-Policy": csp } : {}) });
    res.end('<!doctype html><title>A page under debug</title><h1>A page under debug</h1><script type="module" src="/page.js"></script>');
  });
  await new Promise((resolve) => site.listen(0, "127.0.0.1", resolve));
  t.onCleanup(() => new Promise((resolve) => { site.closeAllConnections(); site.close(resolve); }));
  return { origin: `http://127.0.0.1:${site.address().port}`, use(server) { serverUrl = server.url; } };
}

/** A page of `site` with the client loaded (a tab that is not watched for CSP reports). */
async function clientPage(t, site) {
  const page = await (await t.context()).newPage();
  page.on("pageerror", (e) => t.problems.push(`the page under debug: uncaught ${e.name}: ${e.message}`));
  if (DEBUG) page.on("console", (m) => console.error(`page under debug console.${m.type()}: ${m.text()}`));
  await page.goto(site.origin + "/");
  await page.waitForFunction(() => window.pageReady === true, null, { timeout: DEADLINE_MS })
    .catch(() => { throw new Error(`the page under debug did not load the client within ${DEADLINE_MS / 1000} s`); });
  return page;
}

/** The server's pause `when` (before/after) a call of `name`. */
function pauseOf(server, name, when) {
  return waitFor(async () => (await server.api("GET", "/api/paused")).paused
    .find((p) => p.call_data.method_name === name && p.when === when), { what: `a pause ${when} ${name}` });
}

async function resume(server, pause, body = { action: "continue" }) {
  await server.api("POST", `/api/paused/${encodeURIComponent(pause.id)}/continue`, body);
}

/** The outcome of the page's background call `key`: {value} or {error}. */
function outcomeOf(page, key) {
  return waitFor(() => page.evaluate((k) => !window.results[k].pending && window.results[k], key),
    { what: `the page's call "${key}" to return` });
}

/** Evaluates `expr` in the program paused at `pause` through the REPL endpoints. */
async function replEval(server, pause, expr) {
  const { session_id: sid } = await server.api("POST", "/api/repl/start", { pause_id: pause.id });
  return server.api("POST", `/api/repl/${encodeURIComponent(sid)}/eval`, { expr });
}

async function sha512(text) {
  const { createHash } = await import("node:crypto");
  return createHash("sha512").update(Buffer.from(text, "utf8")).digest("hex");
}

check("debug client: a page on another origin is paused, modified and continued like a program", async (t) => {
  const site = await startClientSite(t);
  const server = await t.server({ args: ["--allow-origin", site.origin] });
  site.use(server);
  const ui = await t.page(server);
  await pageLive(ui);
  const page = await clientPage(t, site);
  const names = ["withDebug", "withDebugSync", "debugCall", "debugCallSync", "configure", "registerReplacement"];
  const exported = await page.evaluate((n) => n.filter((k) => typeof window.cideldill?.[k] === "function"
    && window.cideldill[k] === window.client[k]), names);
  assert(exported.length === names.length, `window.cideldill holds ${exported.join(", ")} of ${names.join(", ")}`);
  // The page's SHA-512 against known vectors and node's: empty, "abc", non-ASCII, several blocks.
  const inputs = ["", "abc", "héllo wörld ✓ 日本 😀", "x".repeat(300), "a".repeat(111), "a".repeat(112)];
  const hashes = await page.evaluate((ins) => ins.map((s) => window.cideldill.sha512Hex(s)), inputs);
  const known = {
    "": "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
    abc: "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
  };
  for (const [i, s] of inputs.entries()) {
    const want = known[s] || await sha512(s);
    assert(hashes[i] === want, `sha512Hex(${JSON.stringify(s).slice(0, 20)}) = ${hashes[i]}, expected ${want}`);
  }

  // The client registers the functions it wraps but adds no breakpoint (as the original):
  // a person sets it. The server's default behaviour (stop) applies only where one is set.
  await waitFor(async () => (await server.api("GET", "/api/functions")).functions.includes("add"),
    { what: "the page to register add" });
  const none = (await server.api("GET", "/api/breakpoints")).breakpoints;
  assert(none.length === 0, `the page added breakpoints: ${JSON.stringify(none)}`);
  await server.api("POST", "/api/breakpoints", { function_name: "add", keep_signature: true });
  await page.evaluate(() => window.addLater("add", 1, 2));
  const before = await pauseOf(server, "add", "before");
  const d = before.call_data;
  assert(JSON.stringify(d.pretty_args) === "[1,2]", `pretty_args: ${JSON.stringify(d.pretty_args)}`);
  assert(d.page_url === site.origin + "/", `page_url: ${d.page_url}`);
  assert(d.process_pid === 0 && d.preferred_format === "json", `process_pid ${d.process_pid}, preferred_format ${d.preferred_format}`);
  for (const item of d.args) {
    assert(item.serialization_format === "json" && item.cid === await sha512(item.data), `an argument item: ${JSON.stringify(item)}`);
  }
  const card = pauseCard(ui, "add", "before");
  await cardShown(ui, card, "add (before)");
  const text = await card.innerText();
  for (const want of [`page ${site.origin}/`, `${site.origin}/page.js:`, "a", "b", "1", "2"]) {
    assert(text.includes(want), `the card lacks "${want}": ${text}`);
  }
  await t.shot(ui, "debug-client-before");
  await resume(server, before, { action: "modify", modified_args: [10, 20] });
  const after = await pauseOf(server, "add", "after");
  assert(after.call_data.pretty_result === 30, `the after-pause shows ${JSON.stringify(after.call_data.pretty_result)}`);
  await cardShown(ui, pauseCard(ui, "add", "after"), "add (after)");
  await t.shot(ui, "debug-client-after");
  await resume(server, after);
  const got = await outcomeOf(page, "add");
  assert(got.value === 30, `the page got ${JSON.stringify(got)}`);
  const records = (await server.api("GET", "/api/call-records?function=add")).calls;
  assert(records.length === 1 && records[0].status === "success", `call records: ${JSON.stringify(records).slice(0, 300)}`);
  // A string is shown as JSON text, so "1" and 1 differ; a function is sent as the original
  // sends it, the string "[Function name]".
  await page.evaluate(() => window.start("strings", () => window.add("1", [2, () => 3])));
  const strings = pauseCard(ui, "add", "before");
  await cardShown(ui, strings, "add (before) with a string");
  const args = await strings.locator("dl.args dd code").allInnerTexts();
  assert(args[0] === '"1"' && args[1] === '[2,"[Function anonymous]"]',
    `the card shows the arguments as ${JSON.stringify(args)}`);
  await t.shot(ui, "debug-client-strings");
  await resume(server, await pauseOf(server, "add", "before"));
  const after2 = pauseCard(ui, "add", "after");
  await cardShown(ui, after2, "add (after) with a string");
  const outcome = await after2.locator(".outcome").innerText();
  assert(outcome.replace(/\s+/g, " ").includes('returned "12,() => 3"'), `the after card says ${outcome}`);
  await resume(server, await pauseOf(server, "add", "after"));
  assert((await outcomeOf(page, "strings")).value === "12,() => 3", "the call with a string did not return its concatenation");
});

check("debug client: skip, raise, replace, debugCall, the REPL, and the blocking variant", async (t) => {
  const site = await startClientSite(t);
  const server = await t.server({ args: ["--allow-origin", site.origin] });
  site.use(server);
  const page = await clientPage(t, site);
  // The breakpoints are set here (no Origin, as a script would): the page adds none.
  for (const name of ["add", "twice", "add_sync"]) {
    await server.api("POST", "/api/breakpoints", { function_name: name, keep_signature: true });
  }
  // Skip with a fake result.
  await page.evaluate(() => window.start("skip", () => window.add(5, 6)));
  await resume(server, await pauseOf(server, "add", "before"), { action: "skip", fake_result: { fake: [99] } });
  await resume(server, await pauseOf(server, "add", "after"));
  const skipped = await outcomeOf(page, "skip");
  assert(JSON.stringify(skipped.value) === '{"fake":[99]}', `skip gave ${JSON.stringify(skipped)}`);
  // Raise: a JS Error with the name and message (a call that raises does not pause after
  // it under the default global behavior).
  await page.evaluate(() => window.start("raise", () => window.add(1, 1)));
  await resume(server, await pauseOf(server, "add", "before"),
    { action: "raise", exception_type: "ValueError", exception_message: "nope" });
  const raised = await outcomeOf(page, "raise");
  assert(raised.error?.isError && raised.error.name === "ValueError" && raised.error.message === "nope", `raise gave ${JSON.stringify(raised)}`);
  const [record] = (await server.api("GET", "/api/call-records?function=add&status=exception")).calls;
  assert(JSON.stringify(record?.exception).includes("ValueError: nope"), `the record of the raised call: ${JSON.stringify(record).slice(0, 400)}`);
  // The REPL evaluates in the page, with the call's parameters by name and $args, before
  // and after the call (as the original: no other names are bound).
  await page.evaluate(() => window.start("repl", () => window.add(2, 3)));
  const paused = await pauseOf(server, "add", "before");
  const sum = await replEval(server, paused, "$args[0] * 100 + b");
  assert(sum.output === "203" && !sum.is_error, `$args[0] * 100 + b gave ${JSON.stringify(sum)}`);
  const href = await replEval(server, paused, "location.href");
  assert(href.output === site.origin + "/", `location.href gave ${JSON.stringify(href)}`);
  const thrown = await replEval(server, paused, "nosuchname");
  assert(thrown.is_error && thrown.output.includes("ReferenceError"), `nosuchname gave ${JSON.stringify(thrown)}`);
  await resume(server, paused);
  const afterRepl = await pauseOf(server, "add", "after");
  const result = await replEval(server, afterRepl, "[a, b, typeof result, typeof args]");
  assert(result.output === '[2,3,"undefined","undefined"]', `[a, b, typeof result, typeof args] gave ${JSON.stringify(result)}`);
  await resume(server, afterRepl);
  assert((await outcomeOf(page, "repl")).value === 5, "the REPL'd call did not return 5");
  // Replace: a registered replacement of the same arity runs instead; another one is an error.
  await page.evaluate(() => window.start("mul", () => window.add(6, 7)));
  await resume(server, await pauseOf(server, "add", "before"), { action: "continue", replacement_function: "mul" });
  await resume(server, await pauseOf(server, "add", "after"));
  assert((await outcomeOf(page, "mul")).value === 42, "the replacement mul did not give 42");
  await page.evaluate(() => window.start("neg", () => window.add(6, 7)));
  await resume(server, await pauseOf(server, "add", "before"), { action: "continue", replacement_function: "neg" });
  const neg = await outcomeOf(page, "neg");
  assert(neg.error?.name === "DebugProtocolError" && /neg takes 1/.test(neg.error.message), `replacing with neg gave ${JSON.stringify(neg)}`);
  // debugCall: one call through the debugger, named by its first argument.
  await page.evaluate(() => window.start("once", () => window.client.debugCall("twice", (x) => x * 2, 21)));
  await resume(server, await pauseOf(server, "twice", "before"));
  await resume(server, await pauseOf(server, "twice", "after"));
  assert((await outcomeOf(page, "once")).value === 42, "debugCall did not give 42");
  // The blocking variant: the page waits, frozen, until the call is let go.
  await page.evaluate(() => window.start("sync", () => window.addSync(3, 4)));
  await resume(server, await pauseOf(server, "add_sync", "before"));
  await resume(server, await pauseOf(server, "add_sync", "after"));
  const sync = await outcomeOf(page, "sync");
  assert(sync.value === 7, `withDebugSync gave ${JSON.stringify(sync)}`);
});

check("debug client: an origin granted through the REST API goes through; a restart is survived; eval forbidden or server gone are errors", async (t) => {
  const site = await startClientSite(t, { csp: "default-src 'self'; script-src 'self' http://127.0.0.1:*; connect-src http://127.0.0.1:*" });
  const server = await t.server();
  site.use(server);
  // Granted as the web UI's Allow button does (POST /api/origins), not with --allow-origin.
  await server.api("POST", "/api/origins", { origin: site.origin, decision: "allow" });
  const page = await clientPage(t, site);
  // No breakpoint is set (the page adds none), so the call runs and is recorded.
  await page.evaluate(() => window.start("free", () => window.add(1, 2)));
  assert((await outcomeOf(page, "free")).value === 3, "the call without a breakpoint did not return 3");
  const records = (await server.api("GET", "/api/call-records?function=add")).calls;
  assert(records.length === 1, `call records: ${JSON.stringify(records).slice(0, 300)}`);
  // A breakpoint added by a person makes it pause; the page's CSP forbids eval: an error, no hang.
  await server.api("POST", "/api/breakpoints", { function_name: "add", keep_signature: true });
  await page.evaluate(() => window.start("paused", () => window.add(1, 2)));
  const paused = await pauseOf(server, "add", "before");
  const denied = await replEval(server, paused, "1 + 1");
  assert(denied.is_error && /EvalError/.test(denied.output), `eval under a strict CSP gave ${JSON.stringify(denied)}`);
  await resume(server, paused);
  await resume(server, await pauseOf(server, "add", "after"));
  assert((await outcomeOf(page, "paused")).value === 3, "the paused call did not return 3");
  // A restarted server lacks the values the page sent before without their data: the page
  // resends them when the server asks (cid_not_found).
  await server.stop("SIGTERM");
  const again = await t.server({ port: server.port, dir: server.dir });
  // A --memory server keeps no grants: the origin is granted again.
  await again.api("POST", "/api/origins", { origin: site.origin, decision: "allow" });
  const starts = [];
  page.on("response", (r) => { if (r.url().endsWith("/api/call/start")) starts.push(r.status()); });
  await page.evaluate(() => window.start("resent", () => window.add(1, 2)));
  assert((await outcomeOf(page, "resent")).value === 3, "the call after the restart did not return 3");
  await waitFor(() => starts.join() === "400,200", { what: "call starts answered 400, then 200" })
    .catch(() => { throw new Error(`call starts after the restart answered ${starts.join()}, expected 400 (cid_not_found), then 200`); });
  const [resent] = (await again.api("GET", "/api/call-records?function=add")).calls;
  assert(JSON.stringify(resent?.pretty_args) === "[1,2]", `the restarted server recorded ${JSON.stringify(resent).slice(0, 300)}`);
  // A server that is gone: the call fails at once with a clear error.
  await again.stop();
  await page.evaluate(() => window.start("gone", () => window.add(1, 2)));
  const gone = await outcomeOf(page, "gone");
  assert(gone.error?.name === "DebugServerError" && gone.error.message.includes("Failed to contact breakpoint server"),
    `with the server gone the call gave ${JSON.stringify(gone)}`);
  await page.evaluate(() => window.start("goneSync", () => window.addSync(1, 2)));
  const goneSync = await outcomeOf(page, "goneSync");
  assert(goneSync.error?.name === "DebugServerError", `withDebugSync with the server gone gave ${JSON.stringify(goneSync)}`);
});

/** The page's call records, oldest first: [{method_name, status, pretty_result, ...}]. */
async function recordsOf(server) {
  return (await server.api("GET", "/api/call-records?limit=1000")).calls.slice().reverse();
}

check("debug client: a wrapped object converts as its own; nothing pauses without a breakpoint; [alias, object], null, undefined", async (t) => {
  const site = await startClientSite(t);
  const server = await t.server({ args: ["--allow-origin", site.origin] });
  site.use(server);
  const page = await clientPage(t, site);
  const behavior = (await server.api("GET", "/api/behavior")).behavior;
  assert(behavior === "stop", `the server's default behaviour is ${behavior}, this check needs stop`);
  const got = await page.evaluate(async () => {
    const { withDebug, withDebugSync, debugCall } = window.client;
    const obj = {
      base: 40,
      toString() { return "obj"; },
      valueOf() { return 42; },
      toJSON() { return { as: "json" }; },
      plus(a, b) { return this.base + a + b; },
    };
    const p = withDebug(obj);
    const ts = p.toString();
    const prim = withDebug(["prim", { [Symbol.toPrimitive](hint) { return hint === "number" ? 7 : `seven:${hint}`; } }]);
    window.thing = withDebug(["thing", obj]);
    const started = performance.now();
    const sum = await debugCall(function add(a, b) { return a + b; }, 1, 2);
    const tookMs = performance.now() - started;
    const plus = p.plus(1, 1);
    // The blocking variant debugs every method, conversions too, and answers their values.
    const ps = withDebugSync(["sync", obj]);
    const sync = { template: `${ps}`, plusOne: ps + 1, plus: ps.plus(1, 1) };
    return {
      toStringType: typeof ts, toString: ts, template: `${p}`, plusOne: p + 1, concat: "x" + p,
      json: JSON.stringify(p), nested: JSON.stringify({ p }), base: p.base,
      number: +prim, templatePrim: `${prim}`,
      isNull: withDebug(null) === null, isUndefined: withDebug(undefined) === undefined,
      five: withDebug(5), text: withDebug("text"), on: withDebug("ON"),
      sum, tookMs, plusIsPromise: plus instanceof Promise, plus: await plus,
      thingBase: window.thing.base, thingString: `${window.thing}`, sync,
    };
  });
  const want = {
    toStringType: "string", toString: "obj", template: "obj", plusOne: 43, concat: "x42",
    json: '{"as":"json"}', nested: '{"p":{"as":"json"}}', base: 40, number: 7, templatePrim: "seven:string",
    isNull: true, isUndefined: true, five: 5, text: "text", on: { enabled: true, serverUrl: server.url },
    sum: 3, plusIsPromise: true, plus: 42, thingBase: 40, thingString: "obj",
    sync: { template: "obj", plusOne: 43, plus: 42 },
  };
  for (const [k, v] of Object.entries(want)) {
    assert(JSON.stringify(got[k]) === JSON.stringify(v), `${k}: the page got ${JSON.stringify(got[k])}, expected ${JSON.stringify(v)}`);
  }
  // With the default "stop" and no breakpoint the calls ran without a pause; the client
  // registered the functions and added no breakpoint.
  assert(got.tookMs < 3000, `debugCall without a breakpoint took ${got.tookMs} ms`);
  const bps = (await server.api("GET", "/api/breakpoints")).breakpoints;
  assert(bps.length === 0, `breakpoints after the calls: ${JSON.stringify(bps)}`);
  assert((await server.api("GET", "/api/paused")).paused.length === 0, "something paused without a breakpoint");
  const functions = (await server.api("GET", "/api/functions")).functions;
  for (const name of ["add", "plus"]) assert(functions.includes(name), `${name} is not registered: ${JSON.stringify(functions)}`);
  // The conversions are recorded (named alias.property when wrapped with an alias), and so
  // are the calls.
  const wanted = ["toString", "valueOf", "toJSON", "prim.Symbol(Symbol.toPrimitive)", "add", "plus", "thing.toString",
    "sync.toString", "sync.valueOf", "sync.plus"];
  const records = await waitFor(async () => {
    const r = await recordsOf(server);
    return wanted.every((n) => r.some((x) => x.method_name === n && x.status === "success")) && r;
  }, { what: `records of ${wanted.join(", ")}` }).catch(async (e) => {
    throw new Error(`${e.message}: ${JSON.stringify((await recordsOf(server)).map((x) => [x.method_name, x.status]))}`);
  });
  const ts = records.find((x) => x.method_name === "toString");
  assert(JSON.stringify(ts.pretty_result) === '"obj"', `the toString record's result: ${JSON.stringify(ts.pretty_result)}`);
  // A method of [alias, object] is named alias.method; its breakpoint pauses it, and the
  // REPL there has its parameters, $args and $this (the object).
  await server.api("POST", "/api/breakpoints", { function_name: "thing.plus" });
  await page.evaluate(() => window.start("thing", () => window.thing.plus(1, 2)));
  const paused = await pauseOf(server, "thing.plus", "before");
  const evals = {
    "a + b": "3", "$args": "[1,2]", "$this.base": "40", "$this.base + a + b": "43",
    "let x = a * 10; x + b": "12",
  };
  for (const [expr, output] of Object.entries(evals)) {
    const r = await replEval(server, paused, expr);
    assert(r.output === output && !r.is_error, `${expr} gave ${JSON.stringify(r)}, expected ${output}`);
  }
  await resume(server, paused);
  await resume(server, await pauseOf(server, "thing.plus", "after"));
  const thing = await outcomeOf(page, "thing");
  assert(thing.value === 43, `thing.plus(1, 2) gave ${JSON.stringify(thing)}`);
});

check("debug client: argument values are sent as the original client serializes them", async (t) => {
  const site = await startClientSite(t);
  const server = await t.server({ args: ["--allow-origin", site.origin] });
  site.use(server);
  const page = await clientPage(t, site);
  await server.api("POST", "/api/breakpoints", { function_name: "shapes" });
  await page.evaluate(() => window.start("shapes", () => {
    const deep = {};
    let at = deep;
    for (let i = 0; i < 60; i++) { at.child = {}; at = at.child; }
    const shared = { x: 1 };
    const cycle = { name: "cycle" };
    cycle.self = cycle;
    const args = [/abc/i, new Map([["a", 1], ["b", { c: 2 }]]), new Set([1, 2]), NaN, Infinity, -Infinity,
      new Uint8Array([1, 2, 3]), new Error("boom"), deep, () => 1, 10n, new Date(0), undefined,
      { a: shared, b: shared }, cycle, { n: NaN, f: function named() {} }];
    return window.client.debugCall("shapes", function shapes(...all) { return new Map([["count", all.length]]); }, ...args);
  }));
  const before = await pauseOf(server, "shapes", "before");
  const items = before.call_data.args;
  for (const item of items) {
    assert(typeof item.data === "string" && item.serialization_format === "json" && item.cid === await sha512(item.data),
      `an argument item: ${JSON.stringify(item).slice(0, 300)}`);
  }
  const data = items.map((i) => i.data);
  const want = [
    '"/abc/i"', '[["a",1],["b",{"c":2}]]', "[1,2]", '"NaN"', '"Infinity"', '"-Infinity"',
    "[1,2,3]", null, null, '"[Function anonymous]"', '"10"', '"1970-01-01T00:00:00.000Z"', "null",
    '{"a":{"x":1},"b":"[Circular]"}', '{"name":"cycle","self":"[Circular]"}', '{"n":"NaN","f":"[Function named]"}',
  ];
  assert(data.length === want.length, `${data.length} arguments: ${JSON.stringify(data).slice(0, 500)}`);
  for (const [i, w] of want.entries()) {
    if (w !== null) assert(data[i] === w, `argument ${i} was sent as ${data[i]}, expected ${w}`);
  }
  // An Error: {name, message, stack}.
  const error = JSON.parse(data[7]);
  assert(JSON.stringify(Object.keys(error)) === '["name","message","stack"]' && error.name === "Error"
    && error.message === "boom" && error.stack.includes("boom"), `the Error was sent as ${data[7].slice(0, 300)}`);
  // Deeper than 50 levels: a placeholder in place of the 51st object.
  let node = JSON.parse(data[8]);
  for (let i = 0; i < 50; i++) {
    assert(node && typeof node.child === "object" && !node.__cideldill_placeholder__, `level ${i} of the deep object: ${JSON.stringify(node).slice(0, 200)}`);
    node = node.child;
  }
  const placeholder = '{"__cideldill_placeholder__":true,"type_name":"Object","repr_text":"[object Object]","serialization_error":"Max depth 50 exceeded","serialization_format":"json"}';
  assert(JSON.stringify(node) === placeholder, `the 51st level was sent as ${JSON.stringify(node)}`);
  // The result (a Map) too, and the call completes.
  await resume(server, before);
  const after = await pauseOf(server, "shapes", "after");
  assert(JSON.stringify(after.call_data.pretty_result) === '[["count",16]]', `the result: ${JSON.stringify(after.call_data.pretty_result)}`);
  await resume(server, after);
  const got = await outcomeOf(page, "shapes");
  assert(JSON.stringify(got) === "{\"value\":{}}", `the page got ${JSON.stringify(got)}`);
  const [record] = (await server.api("GET", "/api/call-records?function=shapes")).calls;
  assert(record?.status === "success" && JSON.stringify(record.pretty_args?.[0]) === '"/abc/i"',
    `the record: ${JSON.stringify(record).slice(0, 400)}`);
});

check("debug client: every queued REPL evaluation is answered before the next poll", async (t) => {
  const site = await startClientSite(t);
  const server = await t.server({ args: ["--allow-origin", site.origin] });
  site.use(server);
  const page = await clientPage(t, site);
  await server.api("POST", "/api/breakpoints", { function_name: "add" });
  await page.evaluate(() => window.start("add", () => window.client.debugCall(function add(a, b) { return a + b; }, 1, 2)));
  const paused = await pauseOf(server, "add", "before");
  // The call's scope: its parameters by name, $args, and $this (null for debugCall).
  for (const [expr, output] of [["a + b", "3"], ["$args", "[1,2]"], ["$this", "null"]]) {
    const r = await replEval(server, paused, expr);
    assert(r.output === output && !r.is_error, `${expr} gave ${JSON.stringify(r)}, expected ${output}`);
  }
  // The page's REPL polls are held while three evaluations are queued, then let go.
  let open = null;
  const gate = new Promise((resolve) => { open = resolve; });
  let held = 0;
  await page.route(/\/api\/poll-repl\//, async (route) => {
    held += 1;
    await gate;
    await route.continue();
  });
  await waitFor(() => held > 0, { what: "the page's next REPL poll" });
  const requests = [];
  page.on("request", (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));
  const { session_id: sid } = await server.api("POST", "/api/repl/start", { pause_id: paused.id });
  const exprs = ["1", "1 + 1", "[1, 2].length + 1"];
  const evals = exprs.map((expr) => server.api("POST", `/api/repl/${encodeURIComponent(sid)}/eval`, { expr }));
  await sleep(500);
  open();
  const outputs = (await Promise.all(evals)).map((r) => r.output);
  assert(JSON.stringify(outputs) === '["1","2","3"]', `the evaluations gave ${JSON.stringify(outputs)}`);
  const results = requests.flatMap((r, i) => (r === "POST /api/call/repl-result" ? [i] : []));
  assert(results.length === 3, `the page posted ${results.length} REPL results: ${requests.join(", ")}`);
  const between = requests.slice(results[0], results[2]).filter((r) => r.startsWith("GET /api/poll/"));
  assert(between.length === 0, `the page polled its pause between the REPL results: ${requests.join(", ")}`);
  await page.unroute(/\/api\/poll-repl\//);
  await resume(server, paused);
  await resume(server, await pauseOf(server, "add", "after"));
  assert((await outcomeOf(page, "add")).value === 3, "the call did not return 3");
  return `requests after the gate: ${requests.slice(0, 12).join(", ")}`;
});

// ---------------------------------------------------------------------------------------
// Checks: live updates

/**
 * How many event streams the browser holds: the server refuses streams past MAX_STREAMS
 * (src/http/events.rs), so the streams this script can still open tell how many are taken.
 * Answers null when the limit cannot be read.
 */
async function browserStreams(server) {
  const source = fs.readFileSync(path.join(ROOT, "src/http/events.rs"), "utf8");
  const m = source.match(/pub const MAX_STREAMS: usize = (\d+);/);
  if (!m) return null;
  const max = Number(m[1]);
  const held = [];
  let opened = 0;
  try {
    for (let i = 0; i <= max; i++) {
      const status = await new Promise((resolve, reject) => {
        const rq = http.get(server.url + "/api/events", { timeout: DEADLINE_MS }, (res) => {
          held.push(rq);
          resolve(res.statusCode);
          res.resume();
        });
        rq.on("timeout", () => rq.destroy(new Error("no answer from /api/events")));
        rq.on("error", reject);
      });
      if (status !== 200) break;
      opened += 1;
    }
  } finally {
    for (const rq of held) rq.destroy();
  }
  return max - opened;
}

check("debug client: a page of an origin nobody granted waits in the web UI; Allow lets its calls through, Deny keeps refusing", async (t) => {
  const site = await startClientSite(t);
  const other = await startClientSite(t);
  const server = await t.server();
  site.use(server);
  other.use(server);
  const ui = await t.page(server);
  await pageLive(ui);
  const page = await clientPage(t, site);
  // Refused, with an error the page can read and act on.
  await page.evaluate(() => window.start("refused", () => window.add(1, 2)));
  const refused = await outcomeOf(page, "refused");
  assert(refused.error?.name === "DebugServerError" && refused.error.message.includes("403")
    && refused.error.message.includes("--allow-origin") && refused.error.message.includes("web UI"),
    `the call of a page nobody granted gave ${JSON.stringify(refused)}`);
  // The request waits on the Paused page, live.
  const request = ui.locator(`.origin-request[data-origin="${site.origin}"]`);
  await request.waitFor({ timeout: DEADLINE_MS });
  const text = await request.innerText();
  assert(text.includes(`${site.origin} wants to report calls to this debugger`), `the request reads ${JSON.stringify(text)}`);
  assert((await ui.locator("#status").innerText()).includes("asking to report calls"), "the status line does not tell of the request");
  await t.shot(ui, "origin-request");
  await request.locator('button[data-origin-decision="allow"]').click();
  await request.waitFor({ state: "detached", timeout: DEADLINE_MS });
  const granted = (await server.api("GET", "/api/origins")).granted;
  assert(granted.includes(site.origin), `granted: ${JSON.stringify(granted)}`);
  await page.evaluate(() => window.start("allowed", () => window.add(1, 2)));
  assert((await outcomeOf(page, "allowed")).value === 3, "the call after Allow did not return 3");
  const [record] = (await server.api("GET", "/api/call-records?function=add")).calls;
  assert(record?.origin === site.origin, `the record's origin: ${JSON.stringify(record?.origin)}`);
  // Another origin, denied: refused, then and later, and not asked again.
  const otherPage = await clientPage(t, other);
  await otherPage.evaluate(() => window.start("first", () => window.add(1, 2)));
  assert((await outcomeOf(otherPage, "first")).error?.name === "DebugServerError", "the other origin was not refused");
  const otherRequest = ui.locator(`.origin-request[data-origin="${other.origin}"]`);
  await otherRequest.waitFor({ timeout: DEADLINE_MS });
  await otherRequest.locator('button[data-origin-decision="deny"]').click();
  await otherRequest.waitFor({ state: "detached", timeout: DEADLINE_MS });
  await otherPage.evaluate(() => window.start("again", () => window.add(1, 2)));
  const again = await outcomeOf(otherPage, "again");
  assert(again.error?.name === "DebugServerError" && again.error.message.includes("403"), `after Deny the call gave ${JSON.stringify(again)}`);
  const origins = await server.api("GET", "/api/origins");
  assert(origins.pending.length === 0 && origins.denied.includes(other.origin), `origins after Deny: ${JSON.stringify(origins)}`);
  assert(await ui.locator(".origin-request").count() === 0, "a denied origin is asked again");
  // The first page's calls still go through.
  await page.evaluate(() => window.start("still", () => window.add(2, 2)));
  assert((await outcomeOf(page, "still")).value === 4, "the granted page's call stopped working");
  // The allowed origin is listed, and Revoke refuses its calls again.
  const allowed = ui.locator(`.granted-origin[data-origin="${site.origin}"]`);
  await allowed.waitFor({ timeout: DEADLINE_MS });
  await t.shot(ui, "origin-granted");
  await allowed.locator('button[data-origin-decision="revoke"]').click();
  await allowed.waitFor({ state: "detached", timeout: DEADLINE_MS });
  await page.evaluate(() => window.start("revoked", () => window.add(2, 2)));
  const revoked = await outcomeOf(page, "revoked");
  assert(revoked.error?.name === "DebugServerError" && revoked.error.message.includes("403"), `after Revoke the call gave ${JSON.stringify(revoked)}`);
});

check("live: 8 tabs stay live on one shared event stream", async (t) => {
  const server = await t.server();
  const tabs = [];
  for (let i = 0; i < 8; i++) tabs.push(await t.page(server));
  await Promise.all(tabs.map(pageLive));
  const demo = t.demo(server);
  const started = Date.now();
  const ids = await Promise.all(tabs.map((p) => cardShown(p, pauseCard(p, "add", "before"), "add (before) in every tab")));
  assert(new Set(ids).size === 1, `the tabs show different pauses: ${ids}`);
  const shownIn = Date.now() - started;
  assert(shownIn < LIVE_MS, `the last tab showed the card after ${shownIn} ms`);
  await t.shot(tabs[7], "eight-tabs");
  // Resumed from the first tab: the card leaves every tab.
  await tabs[0].locator(`${CARD}[data-pause-id="${ids[0]}"] button[data-act="continue"]`).click();
  await Promise.all(tabs.map((p) => cardGone(p, ids[0], "the resumed card in every tab")));
  await Promise.all(tabs.map((p) => cardShown(p, pauseCard(p, "add", "after"), "add (after) in every tab")));
  const streams = await browserStreams(server);
  assert(streams === null || streams === 1, `the browser holds ${streams} event streams for 8 tabs, expected 1`);
  assert(demo.lines().length === 0, `the demo went on: ${demo.stdout()}`);
  return `cards in all tabs after ${(shownIn / 1000).toFixed(1)} s${streams === null ? "; stream count not checked" : "; 1 stream"}`;
});

check("live: the page reconnects after the server restarts", async (t) => {
  const first = await t.server();
  const page = await t.page(null);
  // The refresh that follows "live" is let finish first: a refresh cut off by the server's
  // exit ends in an uncaught "Failed to fetch" (app.js's refresh() does not catch it).
  const refreshed = page.waitForResponse((r) => r.url().includes("fragment=1"), { timeout: DEADLINE_MS });
  await page.goto(first.url + "/");
  await pageLive(page);
  await refreshed;
  await first.stop("SIGTERM");
  await page.locator("#live", { hasText: "reconnecting" }).waitFor({ timeout: DEADLINE_MS })
    .catch(() => { throw new Error("the page did not say it is reconnecting"); });
  const second = await t.server({ port: first.port, dir: first.dir });
  await pageLive(page);
  t.demo(second);
  await cardShown(page, pauseCard(page, "add", "before"), "add (before) after the restart");
});

check("live: a new pause is on screen within 250 ms (p99) while another program makes calls", async (t) => {
  const server = await t.server();
  const page = await t.page(server);
  await pageLive(page);
  await server.api("POST", "/api/breakpoints", { function_name: "watched" });
  const call = (method, pid) => ({ method_name: method, args: [], kwargs: {},
    call_site: { timestamp: Date.now() / 1000 }, process_pid: pid, process_start_time: 5 });
  // The other program: calls of an unwatched function, back to back on four connections.
  let stop = false;
  let made = 0;
  const noise = async () => {
    while (!stop) {
      const started = await server.api("POST", "/api/call/start", call("noise", 77));
      await server.api("POST", "/api/call/complete", { call_id: started.call_id,
        timestamp: Date.now() / 1000, status: "success", process_pid: 77, process_start_time: 5 });
      made += 1;
    }
  };
  const loops = [noise(), noise(), noise(), noise()];
  const began = Date.now();
  const delays = [];
  try {
    await new Promise((r) => setTimeout(r, 500));
    for (let k = 0; k < 20; k++) {
      const at = Date.now();
      const action = await server.api("POST", "/api/call/start", call("watched", 88));
      assert(action.action === "poll", `the watched call was not paused: ${JSON.stringify(action)}`);
      const id = action.poll_url.split("/").pop();
      await page.locator(`${CARD}[data-pause-id="${id}"]`).waitFor({ state: "visible", timeout: DEADLINE_MS });
      delays.push(Date.now() - at);
      await resume(server, { id });
      await cardGone(page, id);
    }
  } finally {
    stop = true;
    await Promise.all(loops);
  }
  const rate = made / ((Date.now() - began) / 1000);
  delays.sort((a, b) => a - b);
  const p50 = delays[Math.floor(delays.length / 2)];
  const p99 = delays[Math.min(delays.length - 1, Math.ceil(delays.length * 0.99) - 1)];
  const note = `pause to card p50 ${p50} ms, p99 ${p99} ms over ${delays.length} pauses, the other program at ${Math.round(rate)} calls/s`;
  assert(p99 < 250, note);
  return note;
});

check("dark: every page follows the system's dark theme", async (t) => {
  const server = await t.server();
  const page = await t.page(server, "/", { context: { colorScheme: "dark" } });
  await pageLive(page);
  t.demo(server);
  await cardShown(page, pauseCard(page, "add", "before"), "add (before)");
  // Luminance of a computed color: the background dark, the text light.
  const luminance = (c) => {
    const [r, g, b] = c.match(/\d+/g).slice(0, 3).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  for (const [where, name] of [["/", "dark-paused"], ["/calls", "dark-calls"], ["/breakpoints", "dark-breakpoints"], ["/call-tree", "dark-call-tree"]]) {
    if (where !== "/") await page.goto(server.url + where);
    const [bg, fg, card] = await page.evaluate(() => {
      const style = (el) => el && getComputedStyle(el);
      const body = style(document.body);
      const c = style(document.querySelector("article.card, table, header"));
      return [body.backgroundColor, body.color, c.backgroundColor];
    });
    assert(luminance(bg) < 0.2, `${where}: background ${bg} is not dark`);
    assert(luminance(fg) > 0.7, `${where}: text ${fg} is not light`);
    assert(luminance(card) < 0.3 || card === "rgba(0, 0, 0, 0)", `${where}: a panel is ${card}`);
    await t.shot(page, name);
  }
});

check("paused: a narrow window (480 px) shows the cards without sideways scrolling", async (t) => {
  const server = await t.server();
  const page = await t.page(server, "/", { context: { viewport: { width: 480, height: 900 } } });
  await pageLive(page);
  t.demo(server);
  // Resume add and greet (before and after) from the API, up to summarize's richer card.
  await waitFor(async () => {
    const paused = (await server.api("GET", "/api/paused")).paused;
    if (paused[0]?.call_data?.method_name === "summarize") return true;
    if (paused[0]) await server.api("POST", `/api/paused/${paused[0].id}/continue`, { action: "continue" });
    return false;
  }, { what: "the summarize pause", interval: 100 });
  const card = pauseCard(page, "summarize", "before");
  await cardShown(page, card, "summarize (before)");
  await openDetails(card, "Modify arguments");
  await t.shot(page, "paused-narrow");
  const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: window.innerWidth }));
  assert(widths.page <= widths.window, `the page is ${widths.page} px wide in a ${widths.window} px window`);
});

// ---------------------------------------------------------------------------------------
// The run

// ---------------------------------------------------------------------------------------
// Checks: the other pages

check("breakpoints: a breakpoint added through the form is hit", async (t) => {
  const server = await t.server();
  const page = await t.page(server, "/breakpoints");
  await pageLive(page);
  // Let everything run, then stop before divide only.
  await globalGo(page, server);
  await page.locator('input[name="function_name"]').fill("divide");
  await page.getByRole("button", { name: "Add breakpoint" }).click();
  const row = page.locator('tr[data-breakpoint="divide"]');
  await row.waitFor();
  await row.locator('select[name="behavior"]').first().selectOption("stop");
  await waitFor(async () => (await server.api("GET", "/api/breakpoints")).breakpoint_behaviors.divide === "stop",
    { what: "divide's before-behavior to be stop" });
  await t.shot(page, "breakpoints");
  const home = await t.page(server, "/");
  const demo = t.demo(server);
  const id = await cardShown(home, pauseCard(home, "divide", "before"), "divide (before)");
  assert(demo.lines().some((l) => l.startsWith("add(2, y=3) -> 5")), `add ran without pausing:\n${demo.stdout()}`);
  await home.locator(`${CARD}[data-pause-id="${id}"] button[data-act="continue"]`).click();
  await demo.waitForLine(/^divide\(1, 0\) raised ZeroDivisionError/);
});

check("breakpoints: every row's Replace with is one width; every header cell has a name (axe, every impact)", async (t) => {
  const server = await t.server();
  // Functions whose replacements are named short and long, and one with none.
  const functions = { f: "(a)", g: "(a)", a_replacement_with_a_much_longer_name: "(a)", h: "(b, c)" };
  for (const [name, signature] of Object.entries(functions)) {
    await server.api("POST", "/api/functions", { function_name: name, signature });
    await server.api("POST", "/api/breakpoints", { function_name: name, signature });
  }
  const page = await t.page(server, "/breakpoints", { fresh: true, context: { viewport: SIZES.desktop } });
  await page.locator('tr[data-breakpoint="h"]').waitFor();
  const widths = await page.evaluate(() => Array.from(document.querySelectorAll('select[name="replacement_function"]'))
    .map((s) => [s.closest("tr").dataset.breakpoint, s.options.length, s.getBoundingClientRect().width]));
  assert(widths.length === 4, `four Replace with choices: ${JSON.stringify(widths)}`);
  assert(new Set(widths.map((w) => w[2])).size === 1, `Replace with widths differ: ${JSON.stringify(widths)}`);
  assert(new Set(widths.map((w) => w[1])).size > 1, `the choices offer different functions: ${JSON.stringify(widths)}`);
  await t.shot(page, "breakpoints-replace-width");
  await page.evaluate(AXE_SOURCE);
  const found = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ["violations"] }))
    .violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`));
  assert(!found.some((v) => /^empty-table-header|\((serious|critical)\)/.test(v)), `axe on /breakpoints:\n  ${found.join("\n  ")}`);
  return found.length ? `other axe findings: ${found.join("; ")}` : "no axe violation of any impact";
});

check("breakpoints: a name made of dots or escaped dots changes only its own row, never the global default", async (t) => {
  const server = await t.server();
  // `.` and `..` are refused (a browser resolves them in a URL path, even as %2E%2E); names
  // that only look like them stay names, encoded so the browser does not resolve them.
  for (const name of [".", ".."]) {
    const r = await fetch(`${server.url}/api/breakpoints`, { method: "POST",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ function_name: name }) });
    assert(r.status === 400, `a breakpoint named ${name}: ${r.status}`);
  }
  await server.api("POST", "/api/breakpoints", { function_name: "%2E%2E" });
  await server.api("POST", "/api/breakpoints", { function_name: "..." });
  const page = await t.page(server, "/breakpoints");
  await pageLive(page);
  for (const name of ["%2E%2E", "..."]) {
    await page.locator(`tr[data-breakpoint="${name}"] select[name="behavior"]`).first().selectOption("go");
    await waitFor(async () => (await server.api("GET", "/api/breakpoints")).breakpoint_behaviors[name] === "go",
      { what: `${name}'s before-behavior to be go` });
  }
  const global = (await server.api("GET", "/api/behavior")).behavior;
  assert(global === "stop", `the global default is unchanged: ${global}`);
});

/** The breakpoint's part of the Breakpoints table: its row and its options row. */
function breakpointGroup(page, name) {
  return page.locator("tbody.bp", { has: page.locator(`tr[data-breakpoint="${name}"]`) });
}

/** Adds a breakpoint through the Breakpoints page's form (with a condition when given). */
/** Sets the global default behavior to go through the Breakpoints page's form. */
async function globalGo(page, server) {
  await page.locator('select[name="behavior"]').first().selectOption("go");
  await waitFor(async () => (await server.api("GET", "/api/behavior")).behavior === "go",
    { what: "the global behavior to be go" });
}

async function addBreakpoint(page, name, condition) {
  await page.locator('form.add input[name="function_name"]').fill(name);
  if (condition !== undefined) await page.locator('form.add input[name="condition"]').fill(condition);
  await page.getByRole("button", { name: "Add breakpoint" }).click();
  const group = breakpointGroup(page, name);
  await group.waitFor();
  return group;
}

/** Opens a breakpoint's options panel (again if a refresh closed it). */
async function openOptions(group) {
  const details = group.locator("details.bp-options");
  await waitFor(async () => {
    if (await details.evaluate((d) => d.open).catch(() => false)) return true;
    await details.locator("summary").click({ timeout: 2000 }).catch(() => {});
    return false;
  }, { what: "the options panel to open", interval: 100 });
  return details;
}

/** The text of a shown error before its mark, the mark's text and class. */
function markedError(error) {
  return error.locator("code.error-at").evaluate((code) => {
    const mark = code.querySelector("mark");
    const nodes = Array.from(code.childNodes);
    return {
      before: nodes.slice(0, nodes.indexOf(mark)).map((n) => n.textContent).join(""),
      mark: mark.textContent,
      end: mark.classList.contains("end"),
    };
  });
}

const ODD_EARLY = 'kwargs["label"].startswith("item-00") and args[0] % 2 == 1';

check("breakpoints: arrow keys on a behavior choice send nothing until Enter", async (t) => {
  const server = await t.server();
  const page = await t.page(server, "/breakpoints");
  await pageLive(page);
  await server.api("POST", "/api/breakpoints", { function_name: "arrowed" });
  const select = page.locator('select[aria-label="Before arrowed"]');
  await select.waitFor();
  const posts = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/api\/breakpoints\/arrowed\/behavior$/.test(r.url())) posts.push(r.postData());
  });
  const before = await select.inputValue();
  // The page settles first (the new row came with a refresh); `yield` is the last choice.
  await new Promise((r) => setTimeout(r, 300));
  await select.press("ArrowUp");
  await select.press("ArrowUp");
  await new Promise((r) => setTimeout(r, 500));
  assert(posts.length === 0, `the arrow keys sent ${posts.length} changes: ${posts.join(", ")}`);
  const chosen = await select.inputValue();
  assert(chosen !== before, `the arrow keys did not move the choice (still ${before})`);
  await page.keyboard.press("Enter");
  await waitFor(() => posts.length === 1, { what: "one change sent on Enter" });
  assert(JSON.parse(posts[0]).behavior === chosen, `sent ${posts[0]}, chosen ${chosen}`);
  await waitFor(async () => (await server.api("GET", "/api/breakpoints")).breakpoint_behaviors.arrowed === chosen,
    { what: `the breakpoint's behavior to become ${chosen}` });
  await new Promise((r) => setTimeout(r, 300));
  assert(posts.length === 1, `${posts.length} changes were sent: ${posts.join(", ")}`);
});

check("breakpoints: a bad condition shows the server's error at its position beside the field; a good one is saved", async (t) => {
  const server = await t.server();
  const page = await t.page(server, "/breakpoints");
  await pageLive(page);
  const group = await addBreakpoint(page, "resize");
  const options = await openOptions(group);
  const field = options.locator('input[name="condition"]');
  const conditions = async () => (await server.api("GET", "/api/breakpoints")).breakpoint_conditions;
  // A first condition, saved with Enter, shows in the row's summary line.
  await field.fill("args[0] > 1");
  await field.press("Enter");
  await waitFor(async () => (await conditions()).resize === "args[0] > 1", { what: "the first condition to be saved" });
  await group.locator("summary .opt", { hasText: "args[0] > 1" }).waitFor();
  // A condition that does not parse: the server's message beside the field, the mistake marked.
  await field.fill("args[0] > (1");
  await field.press("Enter");
  const error = options.locator("form.condition .error");
  await error.locator("code.error-at mark").waitFor();
  const message = await error.locator(".error-msg").innerText();
  assert(message.includes("expected ')' at column 13"), `the error says: ${message}`);
  const marked = await markedError(error);
  assert(marked.before === "args[0] > (1" && marked.end, `the mark is not after the text's end: ${JSON.stringify(marked)}`);
  assert(await field.inputValue() === "args[0] > (1", `the field lost the text: ${await field.inputValue()}`);
  assert(await field.getAttribute("aria-invalid") === "true", "the field is not marked invalid");
  assert(await field.evaluate((f) => document.activeElement === f && f.selectionStart === 12),
    "the cursor is not at the mistake");
  const fieldBox = await field.boundingBox();
  const errorBox = await error.boundingBox();
  assert(errorBox.y >= fieldBox.y + fieldBox.height && errorBox.y - (fieldBox.y + fieldBox.height) < 80 &&
    Math.abs(errorBox.x - fieldBox.x) < 40, `the error is not beside the field: ${JSON.stringify({ fieldBox, errorBox })}`);
  assert((await conditions()).resize === "args[0] > 1", `the condition changed: ${JSON.stringify(await conditions())}`);
  assert(await group.locator("summary .opt", { hasText: "args[0] > 1" }).count() === 1, "the summary changed");
  // A bad log message too, then another change makes the table refresh: the error, the text
  // and the open panel stay.
  const log = options.locator('input[name="log_message"]');
  await log.fill("scale={kwargs['scale'] +}");
  await log.press("Enter");
  const logError = options.locator("form.log_message .error");
  await logError.locator("code.error-at mark").waitFor();
  const logMarked = await markedError(logError);
  assert(logMarked.before === "scale={kwargs['scale'] +" && logMarked.mark === "}", `log message mark: ${JSON.stringify(logMarked)}`);
  await page.locator("h1").click();
  await server.api("POST", "/api/breakpoints", { function_name: "other", condition: `${ODD_EARLY} and args[0] != 7 and kwargs["scale"] == 2 and len(kwargs) == 2` });
  await page.locator('tr[data-breakpoint="other"]').waitFor();
  assert(await options.evaluate((d) => d.open), "the open panel closed on a refresh");
  assert(await field.inputValue() === "args[0] > (1", "a refresh lost the typed condition");
  assert(await error.locator("code.error-at mark").count() === 1, "a refresh lost the condition's error");
  assert(await logError.locator("code.error-at mark").count() === 1, "a refresh lost the log message's error");
  await t.shot(page, "breakpoints-condition-error");
  // A good condition is saved and shown; its error goes, the log message's stays.
  await field.fill('kwargs["label"] == "item-003"');
  await field.press("Enter");
  await waitFor(async () => (await conditions()).resize === 'kwargs["label"] == "item-003"', { what: "the good condition to be saved" });
  await group.locator("summary .opt", { hasText: 'kwargs["label"] == "item-003"' }).waitFor();
  await waitFor(async () => (await error.textContent()) === "", { what: "the condition's error to go" });
  assert(await field.getAttribute("aria-invalid") === null, "the field is still marked invalid");
  assert(await logError.locator("code.error-at mark").count() === 1, "saving the condition lost the log message's error");
  assert(await log.inputValue() === "scale={kwargs['scale'] +}", "saving the condition lost the typed log message");
  await t.shot(page, "breakpoints-condition-saved");
  // A narrow window: no sideways scrolling, the long condition wraps.
  await page.setViewportSize({ width: 480, height: 900 });
  await openOptions(breakpointGroup(page, "other"));
  const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(wide <= 0, `the narrow page scrolls sideways by ${wide} px`);
  await t.shot(page, "breakpoints-options-narrow");
});

check("breakpoints: a condition set through the page pauses only the calls it holds for, and counts them", async (t) => {
  const server = await t.server();
  const page = await t.page(server, "/breakpoints");
  await pageLive(page);
  await globalGo(page, server);
  const group = await addBreakpoint(page, "resize", ODD_EARLY);
  await group.locator('tr[data-breakpoint="resize"] select[name="behavior"]').first().selectOption("stop");
  await waitFor(async () => {
    const b = await server.api("GET", "/api/breakpoints");
    return b.breakpoint_behaviors.resize === "stop" && b.breakpoint_conditions.resize === ODD_EARLY;
  }, { what: "resize to stop on its condition" });
  await group.locator("summary .opt", { hasText: ODD_EARLY }).waitFor();
  const hits = group.locator("td.hits .count");
  const home = await t.page(server, "/");
  await pageLive(home);
  const demo = t.demo(server, { args: ["--items", "20"] });
  for (const [i, x] of [1, 3, 5, 7, 9].entries()) {
    const id = await cardShown(home, pauseCard(home, "resize", "before"), `resize (before) x=${x}`);
    const card = home.locator(`${CARD}[data-pause-id="${id}"]`);
    const shown = await card.locator("dl.args dt", { hasText: /^x$/ }).evaluate((dt) => dt.nextElementSibling.querySelector("code").textContent);
    assert(shown === String(x), `the card shows x = ${shown}, expected ${x}`);
    const cause = (await card.locator(".cause").innerText()).replace(/\s+/g, " ");
    assert(cause.includes(`Condition ${ODD_EARLY} held`) && cause.includes(`hit count ${i + 1}`), `the card says: ${cause}`);
    await hits.filter({ hasText: new RegExp(`^${i + 1}$`) }).waitFor().catch(async () => {
      throw new Error(`the Breakpoints page shows ${await hits.innerText()} hits, expected ${i + 1}`);
    });
    if (x === 1) {
      await t.shot(home, "paused-condition");
      await t.shot(page, "breakpoints-hits");
    }
    await card.locator('button[data-act="continue"]').click();
    await cardGone(home, id);
  }
  await demo.waitForLine("resize(19, label='item-019', scale=2) -> 38");
  const ran = demo.lines().filter((l) => l.startsWith("resize("));
  assert(ran.length === 20, `the demo ran ${ran.length} calls:\n${demo.stdout()}`);
  assert((await server.api("GET", "/api/paused")).paused.length === 0, "something is still paused");
  await hits.filter({ hasText: /^5$/ }).waitFor();
  await group.getByRole("button", { name: "Reset the hit count of resize" }).click();
  await hits.filter({ hasText: /^0$/ }).waitFor();
  assert((await server.api("GET", "/api/breakpoints")).breakpoint_hit_counts.resize === 0, "the hit count was not reset");
});

check("breakpoints: a logpoint set through the page writes its lines to the home page's log, live", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  const page = await t.page(server, "/breakpoints");
  await pageLive(page);
  const group = await addBreakpoint(page, "resize");
  const options = await openOptions(group);
  const message = "scale={kwargs['scale']} -> {result}";
  const field = options.locator('input[name="log_message"]');
  await field.fill(message);
  await options.locator("form.log_message").getByRole("button", { name: "Save" }).click();
  await waitFor(async () => (await server.api("GET", "/api/breakpoints")).breakpoint_log_messages.resize === message,
    { what: "the log message to be saved" });
  await group.locator("summary .opt", { hasText: message }).waitFor();
  const home = await t.page(server, "/");
  await pageLive(home);
  await home.evaluate(() => { window.__sameDocument = true; });
  assert(!(await home.locator("#log").isVisible()), "the log shows before any line");
  const demo = t.demo(server, { args: ["--items", "20"] });
  const lines = home.locator("#log ol.log-lines li");
  await waitFor(async () => (await lines.count()) === 20, { what: "20 log lines on the home page" });
  const texts = await lines.locator("code.msg").allInnerTexts();
  const want = Array.from({ length: 20 }, (_, i) => `scale=2 -> ${2 * i}`);
  assert(JSON.stringify(texts) === JSON.stringify(want), `the log shows ${JSON.stringify(texts)}`);
  assert((await lines.first().locator(".fn").innerText()) === "resize", "a log line does not name its function");
  assert(await home.evaluate(() => window.__sameDocument === true), "the home page was reloaded");
  await demo.waitForLine("resize(19, label='item-019', scale=2) -> 38");
  assert(demo.lines().filter((l) => l.startsWith("resize(")).length === 20, `the demo paused or failed:\n${demo.stdout()}`);
  assert((await server.api("GET", "/api/paused")).paused.length === 0, "a logpoint paused a call");
  const bottom = await home.locator("#log ol.log-lines").evaluate((l) => l.scrollTop + l.clientHeight >= l.scrollHeight - 4);
  assert(bottom, "the log does not show its newest line");
  await t.shot(home, "paused-log");
  // Clear empties the page's log, keeps it cleared across a reload, and Show brings it back.
  await home.getByRole("button", { name: "Clear" }).click();
  await waitFor(async () => (await lines.count()) === 0, { what: "the cleared log" });
  await home.reload();
  await home.locator("#log", { hasText: "since it was cleared" }).waitFor();
  assert((await lines.count()) === 0, "a reload showed the cleared lines");
  await home.getByRole("link", { name: "Show the earlier lines" }).click();
  await waitFor(async () => (await lines.count()) === 20, { what: "the 20 lines shown again" });
  await group.locator("td.hits .count", { hasText: /^20$/ }).waitFor();
  const calls = await t.page(server, "/calls?function=resize&limit=5");
  await calls.locator("tr[data-call-id] .logline", { hasText: "scale=2 -> 38" }).waitFor();
  await t.shot(calls, "calls-log");
});

check("breakpoints: a switched-off breakpoint lets the demo's call run; the master switch stops every pause and the banner turns it back on", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  await server.api("POST", "/api/breakpoints", { function_name: "divide", behavior: "stop" });
  // A table of 28 breakpoints, as a real program makes: most run, some stop, log or are off.
  for (let i = 0; i < 27; i++) {
    const name = `service.module_${String(i).padStart(2, "0")}.handler`;
    const body = { function_name: name, signature: "(request, *, timeout=30)" };
    if (i % 5 === 0) body.behavior = "stop";
    if (i % 7 === 3) body.log_message = "request={args[0]}";
    if (i % 9 === 4) body.condition = "args[0] > 100";
    await server.api("POST", "/api/breakpoints", body);
    if (i % 6 === 5) await server.api("POST", `/api/breakpoints/${encodeURIComponent(name)}/enabled`, { enabled: false });
  }
  const page = await t.page(server, "/breakpoints", { context: { viewport: { width: 1400, height: 900 } } });
  await pageLive(page);
  const summary = page.locator("#pausing-summary");
  const pausing = async () => (await server.api("GET", "/api/pausing"));
  const before = await pausing();
  assert((await summary.innerText()).includes(`${before.will_pause} of 28 breakpoints will pause`),
    `the summary says: ${await summary.innerText()} (the server: ${JSON.stringify(before)})`);
  await t.shot(page, "breakpoints-28");
  // Compact rows: the 28 breakpoints fit in well under the 2,929 px they took.
  const rows = await page.locator("#breakpoint-table").evaluate((tb) => tb.getBoundingClientRect().height);
  assert(rows / 28 <= 64, `a breakpoint takes ${(rows / 28).toFixed(0)} px`);
  // The switch of divide, by its name, toggled with the keyboard.
  const divide = page.getByRole("switch", { name: "divide", exact: true });
  assert(await divide.isChecked(), "divide's switch is not on");
  await divide.focus();
  await page.keyboard.press("Space");
  await waitFor(async () => (await server.api("GET", "/api/breakpoints")).breakpoint_enabled.divide === false,
    { what: "divide to be switched off" });
  await page.locator('tbody.bp.off tr[data-breakpoint="divide"]').waitFor();
  await summary.filter({ hasText: `${before.will_pause - 1} of 28 breakpoints will pause` }).waitFor();
  assert(await page.locator('tr[data-breakpoint="divide"] select[name="behavior"]').first().inputValue() === "stop",
    "switching divide off changed its behavior");
  const opacity = await page.locator('tr[data-breakpoint="divide"] th').evaluate((th) => Number(getComputedStyle(th).opacity));
  assert(opacity < 0.8, `the row of a breakpoint switched off is not muted (opacity ${opacity})`);
  await t.shot(page, "breakpoints-switches");
  const demo = t.demo(server);
  await demo.waitForLine(/^divide\(1, 0\) raised ZeroDivisionError/);
  assert((await server.api("GET", "/api/paused")).paused.length === 0, "a call paused with divide switched off");
  await demo.waitForExit();

  // divide on again, then nothing pauses with the master switch off.
  await divide.click();
  await waitFor(async () => (await server.api("GET", "/api/breakpoints")).breakpoint_enabled.divide === true,
    { what: "divide to be switched on" });
  // The page shows it (its refresh has landed) before the next switch is pressed.
  await page.locator('tbody.bp.off tr[data-breakpoint="divide"]').waitFor({ state: "detached" });
  const master = page.getByRole("switch", { name: "Pause at breakpoints" });
  await master.focus();
  await page.keyboard.press("Space");
  await waitFor(async () => (await pausing()).pausing === false, { what: "pausing to be off" });
  await page.locator("#pausing-banner", { hasText: "Pausing is off" }).waitFor();
  await summary.filter({ hasText: "Pausing is off: no call pauses." }).waitFor();
  assert(!(await master.isChecked()), "the master switch still shows on");
  await t.shot(page, "breakpoints-pausing-off");
  const again = t.demo(server);
  await again.waitForLine(/^divide\(1, 0\) raised ZeroDivisionError/);
  assert((await server.api("GET", "/api/paused")).paused.length === 0, "a call paused with pausing off");
  await again.waitForExit();

  // Every page says so: the home page's banner turns pausing on again, and the next call of
  // divide pauses.
  const home = await t.page(server, "/");
  await pageLive(home);
  const banner = home.locator("#pausing-banner");
  await banner.getByText("Pausing is off").waitFor();
  await t.shot(home, "paused-pausing-off");
  await banner.getByRole("button", { name: "Turn pausing on" }).click();
  await waitFor(async () => (await pausing()).pausing === true, { what: "pausing to be on" });
  await waitFor(async () => (await banner.innerText()).trim() === "", { what: "the banner to go" });
  await waitFor(() => master.isChecked(), { what: "the Breakpoints page's master switch to show on" });
  const last = t.demo(server);
  const id = await cardShown(home, pauseCard(home, "divide", "before"), "divide (before)");
  await home.locator(`${CARD}[data-pause-id="${id}"] button[data-act="continue"]`).click();
  await last.waitForLine(/^divide\(1, 0\) raised ZeroDivisionError/);

  // A phone: no sideways scrolling, the switches still there.
  await page.setViewportSize({ width: 390, height: 844 });
  const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(wide <= 0, `the narrow page scrolls sideways by ${wide} px`);
  await t.shot(page, "breakpoints-switches-narrow");
  await page.getByRole("switch", { name: "Pause at breakpoints" }).click();
  await page.locator("#pausing-banner", { hasText: "Pausing is off" }).waitFor();
  // What the phone's screen shows (the whole page is in the full-page shots).
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(SHOTS, "breakpoints-pausing-off-390x844.png") });
  await page.evaluate(() => window.scrollTo(0, document.querySelector("tbody.bp.off").getBoundingClientRect().top + window.scrollY - 300));
  await page.screenshot({ path: path.join(SHOTS, "breakpoints-rows-390x844.png") });
  const rowHeight = await page.locator("#breakpoint-table").evaluate((tb) => tb.getBoundingClientRect().height / 28);
  assert(rowHeight <= 200, `on a phone a breakpoint takes ${rowHeight.toFixed(0)} px`);

});

check("repl: open a REPL from a card, evaluate, and see it close when the call goes on", async (t) => {
  const { server, page, card, id } = await demoPausedAtAdd(t);
  await card.getByRole("button", { name: "Open REPL" }).click();
  await page.waitForURL(/\/repl\//);
  await pageLive(page);
  const input = page.locator("#expr");
  await input.fill("6 * 7");
  await input.press("Enter");
  await page.locator("ol.transcript li", { hasText: "42" }).waitFor();
  await input.fill("print('from the page'); 1/0");
  await input.press("Enter");
  await page.locator("ol.transcript .stdout", { hasText: "from the page" }).waitFor();
  await page.locator("ol.transcript .error-text", { hasText: "ZeroDivisionError" }).waitFor();
  // Up recalls the last input.
  await input.fill("");
  await input.press("ArrowUp");
  assert((await input.inputValue()).startsWith("print("), `ArrowUp recalled ${await input.inputValue()}`);
  await t.shot(page, "repl");
  await server.api("POST", `/api/paused/${id}/continue`, { action: "continue" });
  await page.locator(".closed-note").waitFor();
  assert(await page.locator("#expr").count() === 0, "the input is gone once the pause is resumed");
  await t.shot(page, "repl-closed");
  const list = await t.page(server, "/repls");
  await list.locator("table.grid a", { hasText: "add" }).waitFor();
  await t.shot(list, "repls");
});

check("repl: the card says when its program polled and shows its target; the REPL lists its scope and arguments; Modify one argument; a killed program is marked gone, refused a REPL and dismissed", async (t) => {
  const { server, page, demo, card, id } = await demoPausedAtAdd(t);
  await card.locator(".polled", { hasText: /^last polled \d+ s ago$/ }).waitFor();
  await card.locator("p.target a.obj").waitFor();
  // The REPL says what is in scope (the program's dir()) and shows the call's arguments.
  await card.getByRole("button", { name: "Open REPL" }).click();
  await page.waitForURL(/\/repl\//);
  await pageLive(page);
  await page.locator("#scope-names code", { hasText: /^args$/ }).waitFor();
  const side = (await page.locator("#repl-side dl.args").innerText()).replace(/\s+/g, " ");
  assert(side.includes("x args[0]") && side.includes("y kwargs"), `the REPL's side lists ${side}`);
  const input = page.locator("#expr");
  await input.fill("args[0] + kwargs['y']");
  await input.press("Enter");
  await page.locator("ol.transcript li", { hasText: "5" }).waitFor();
  await t.shot(page, "repl-scope");
  // Modify only y, from its own field; x goes back as it was.
  const cards = await t.page(server);
  await pageLive(cards);
  const again = cards.locator(`${CARD}[data-pause-id="${id}"]`);
  const details = await openDetails(again, "Modify arguments");
  const x = details.locator('textarea[data-arg="0"]');
  assert(await x.inputValue() === "2", `x starts as ${await x.inputValue()}`);
  await details.locator(".modify-arg", { hasText: "x" }).first().waitFor();
  await details.locator('textarea[data-kwarg="y"]').fill("40");
  await t.shot(cards, "paused-modify-fields");
  await details.locator('button[data-act="modify"]').click();
  await continueAfter(cards, demo, "42");
  await demo.waitForLine(/^add\(2, y=40\) -> 42/);
  // The next pause: its REPL shows what was evaluated at the previous one.
  const next = cards.locator(CARD).first();
  await next.waitFor();
  const nextId = await next.getAttribute("data-pause-id");
  const repl2 = await t.page(server);
  await pageLive(repl2);
  await repl2.locator(`${CARD}[data-pause-id="${nextId}"]`).getByRole("button", { name: "Open REPL" }).click();
  await repl2.waitForURL(/\/repl\//);
  await repl2.locator(".earlier li[data-expr]", { hasText: "args[0] + kwargs['y']" }).waitFor();
  await t.shot(repl2, "repl-earlier");
  // The program is killed: its card is marked gone within seconds, a REPL on it is refused at
  // once, and Dismiss removes it.
  demo.child.kill("SIGKILL");
  const gone = cards.locator(`${CARD}[data-pause-id="${nextId}"].gone`);
  await gone.waitFor({ timeout: DEADLINE_MS });
  await gone.locator(".polled", { hasText: /^program gone: last polled \d+ s ago$/ }).waitFor();
  await gone.getByRole("button", { name: "Open REPL" }).click();
  await gone.locator(".error", { hasText: "stopped polling" }).waitFor();
  await t.shot(cards, "paused-gone");
  await gone.locator('button[data-act="dismiss"]').click();
  await cardGone(cards, nextId, "the dismissed card");
});

check("call tree: the finished demo's calls are there, with the details of one", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  const demo = t.demo(server);
  // The demo adds its breakpoints as it starts; let each of them run through too.
  await demo.waitForLine(/^divide\(1, 0\) raised/, 30_000).catch(async (e) => {
    throw e;
  });
  const page = await t.page(server, "/call-tree");
  await page.locator("table a").first().click();
  await page.waitForURL(/\/call-tree\/.+/);
  for (const fn of ["add", "greet", "summarize", "describe", "divide"]) {
    await page.locator("ul.tree a.call", { hasText: new RegExp(`^${fn}\\b`) }).first().waitFor();
  }
  await page.locator("ul.tree a.call", { hasText: /^divide\b/ }).first().click();
  await page.locator(".details", { hasText: "ZeroDivisionError" }).waitFor();
  await t.shot(page, "call-tree");
  // The object view of an argument, from the details panel.
  await page.locator(".details a.obj").first().click();
  await page.waitForURL(/\/object\//);
  await page.locator("h2", { hasText: "Seen in" }).waitFor();
  await t.shot(page, "object");
  const functions = await t.page(server, "/functions");
  await functions.locator("code", { hasText: "summarize" }).first().waitFor();
  await t.shot(functions, "functions");
});

check("call tree: fold and unfold a node, step with j and k without a reload, client events hidden and counted", async (t) => {
  const server = await t.server();
  // A program whose outer call makes three calls, and the client's own registration event.
  const frame = (line, fn) => ({ filename: "/home/me/batch.py", lineno: line, function: fn });
  const proc = { process_pid: 31337, process_start_time: 1795311683.5 };
  const start = async (method, at, stack) => (await server.api("POST", "/api/call/start", {
    method_name: method, args: [], kwargs: {}, call_site: { timestamp: at, stack_trace: stack }, ...proc })).call_id;
  const finish = (id, at) => server.api("POST", "/api/call/complete",
    { call_id: id, timestamp: at, status: "success", ...proc });
  const outer = await start("outer", 100, [frame(10, "<module>")]);
  for (let i = 0; i < 3; i++) {
    const id = await start("inner", 100.1 + i, [frame(4, "outer"), frame(10, "<module>")]);
    await finish(id, 100.5 + i);
  }
  await finish(outer, 110);
  await server.api("POST", "/api/call/event", { method_name: "with_debug.register", status: "registered",
    timestamp: 111, event_id: "ev-register", call_site: { stack_trace: [] }, ...proc });
  const page = await t.page(server, "/call-tree");
  await page.locator("table a", { hasText: "batch.py" }).click();
  await page.waitForURL(/\/call-tree\/.+/);
  await page.locator("#tree-meta .client-count", { hasText: "1 client event hidden" }).waitFor();
  assert(await page.locator("ul.tree a.call", { hasText: "with_debug.register" }).count() === 0,
    "the client's event is hidden");
  // Loads of a document (a swap changes the address by the history API, which loads nothing).
  let navigations = 0;
  page.on("load", () => { navigations += 1; });
  await page.evaluate(() => { window.sameDocument = "yes"; });
  const rows = () => page.locator("ul.tree a.call").count();
  assert(await rows() === 4, `four calls shown, not ${await rows()}`);
  // Fold the outer call: its three calls go; unfold: they are back.
  await page.locator('ul.tree a.twist[aria-expanded="true"]').click();
  await waitFor(async () => await rows() === 1, { what: "the outer call folded" });
  await t.shot(page, "call-tree-folded");
  await page.locator('ul.tree a.twist[aria-expanded="false"]').click();
  await waitFor(async () => await rows() === 4, { what: "the outer call unfolded" });
  // Step: select the first call, then j and k.
  await page.locator("ul.tree a.call", { hasText: /^outer/ }).click();
  const current = () => page.locator("ul.tree a.call[aria-current]").textContent();
  await waitFor(async () => /^outer/.test(await current()), { what: "outer selected" });
  await page.keyboard.press("j");
  await waitFor(async () => /^inner/.test(await current()), { what: "j selects the next call" });
  await page.locator(".details", { hasText: "Called from" }).waitFor();
  await page.keyboard.press("k");
  await waitFor(async () => /^outer/.test(await current()), { what: "k selects the previous call" });
  assert(navigations === 0, `the page was loaded again ${navigations} time(s)`);
  assert(await page.evaluate(() => window.sameDocument) === "yes", "the page was reloaded");
  assert(/selected=/.test(page.url()), `the address follows the selection: ${page.url()}`);
  await t.shot(page, "call-tree-stepped");
});

check("call tree: another program's calls cost the page nothing; its own process's refresh it", async (t) => {
  const server = await t.server();
  const mine = { process_pid: 4100, process_start_time: 1795311683.5 };
  const other = { process_pid: 4200, process_start_time: 1795311690.5 };
  const call = async (method, proc) => {
    const id = (await server.api("POST", "/api/call/start", { method_name: method, args: [], kwargs: {},
      call_site: { timestamp: Date.now() / 1000, stack_trace: [{ filename: "/home/me/app.py", lineno: 3, function: "<module>" }] },
      ...proc })).call_id;
    await server.api("POST", "/api/call/complete", { call_id: id, timestamp: Date.now() / 1000, status: "success", ...proc });
  };
  await call("first", mine);
  const page = await t.page(server, "/call-tree");
  // Only the process page's own fragments count: the list page's refresh on going live may
  // still finish after this listener is attached.
  let fetched = 0;
  page.on("requestfinished", (r) => {
    if (r.url().includes("/call-tree/") && r.url().includes("fragment=1")) fetched += 1;
  });
  await page.locator(`table a[href*="4100"]`).first().click();
  await page.waitForURL(/\/call-tree\/.+/);
  await pageLive(page);
  // Going live refreshes the page once.
  await waitFor(() => fetched >= 1, { what: "the refresh on going live" });
  fetched = 0;
  for (let i = 0; i < 20; i++) await call(`elsewhere_${i}`, other);
  await sleep(400); // Five times the page's refresh delay after the last event: any refresh would have started.
  assert(fetched === 0, `${fetched} refreshes for another program's calls`);
  await call("second", mine);
  await page.locator("ul.tree a.call", { hasText: /^second/ }).waitFor();
  assert(fetched >= 1, "the page showed its process's new call without fetching it");
});

check("mcp servers: Connect a server with the form's default choices connects it", async (t) => {
  const fixture = path.join(path.dirname(BIN), "cideldill-fixture-mcp-server");
  const server = await t.server();
  const page = await t.page(server, "/mcp-servers");
  await pageLive(page);
  const form = page.locator('form[data-api="/api/mcp-clients/connect"]');
  await page.locator("details.panel > summary", { hasText: "Connect a server" }).click();
  await form.locator('input[name="name"]').fill("formfx");
  await form.locator('input[name="command"]').fill(fixture);
  await form.getByRole("button", { name: "Connect" }).click();
  await waitFor(async () => {
    const err = (await form.locator(".error").textContent()) || "";
    assert(!err.trim(), `the form says: ${err}`);
    const c = (await server.api("GET", "/api/mcp-clients")).clients.formfx;
    return c && c.status === "connected";
  }, { what: "the server connected through the form" });
  await page.locator("article.server", { hasText: "formfx" }).locator(".badge", { hasText: "connected" }).waitFor();
});

check("mcp servers: call an external tool from the page, disconnect and reconnect live", async (t) => {
  const fixture = path.join(path.dirname(BIN), "cideldill-fixture-mcp-server");
  const server = await t.server({ args: ["--mcp-client", `fx:${fixture}`] });
  await waitFor(async () => (await server.api("GET", "/api/mcp-clients")).clients.fx.status === "connected",
    { what: "the fixture server to connect" });
  const page = await t.page(server, "/mcp-servers");
  await pageLive(page);
  const tool = page.locator("details.tool").filter({ has: page.locator("summary code", { hasText: /^echo$/ }) });
  await tool.locator("summary").first().click();
  await tool.locator('textarea[name="arguments"]').fill(JSON.stringify({ text: "<b>hello</b> from the page" }));
  await tool.getByRole("button", { name: "Call" }).click();
  const result = tool.locator("pre[id^=tool-result]");
  await result.filter({ hasText: "<b>hello</b> from the page" }).waitFor();
  assert(await result.locator("b").count() === 0, "the tool's answer is shown as text");
  await t.shot(page, "mcp-servers");
  await tool.locator("summary").first().click();
  await page.getByRole("button", { name: "Disconnect" }).click();
  await page.locator(".badge", { hasText: "disconnected" }).waitFor();
  await page.getByRole("button", { name: "Reconnect" }).click();
  await page.locator(".badge", { hasText: /^connected$/ }).waitFor();
  assert(/1 external MCP server/.test(await page.locator("#status").textContent()), "the status line counts the server");
});

check("mcp servers: a server that needs authorization is authorized from the page, then its tool is called there", async (t) => {
  // A protected MCP server with its own authorization server (PKCE, resource, registration).
  const fx = track(spawn("python3", [path.join(ROOT, "tests/fixtures/oauth_mcp_server.py")],
    { stdio: ["pipe", "pipe", "ignore"] }));
  t.onCleanup(() => stop(fx));
  const port = await new Promise((resolve, reject) => {
    let out = "";
    fx.stdout.on("data", (d) => {
      out += d;
      const line = out.split("\n")[0];
      if (out.includes("\n")) resolve(Number(line.trim()));
    });
    fx.on("exit", () => reject(new Error("the authorization fixture exited")));
  });
  const server = await t.server({ args: ["--mcp-client", `prot:http://127.0.0.1:${port}/mcp`, "--mcp-connect-timeout-s", "5"] });
  await waitFor(async () => (await server.api("GET", "/api/mcp-clients")).clients.prot?.auth?.state === "required",
    { what: "the server to say it needs authorizing" });
  const page = await t.page(server, "/mcp-servers");
  await pageLive(page);
  await t.shot(page, "mcp-servers-needs-authorization");
  await page.getByRole("button", { name: "Authorize" }).click();
  // The authorization server approves at once and sends the browser to our callback page.
  await page.waitForURL(/\/oauth\/callback/);
  await page.locator("main", { hasText: "Authorized" }).waitFor();
  await t.shot(page, "oauth-callback");
  await page.getByRole("link", { name: /Back to the MCP servers/ }).click();
  await page.waitForURL(/\/mcp-servers/);
  await page.locator(".badge", { hasText: /^connected$/ }).waitFor();
  const tool = page.locator("details.tool").filter({ has: page.locator("summary code", { hasText: /^whoami$/ }) });
  await tool.locator("summary").first().click();
  await tool.locator('textarea[name="arguments"]').fill("{}");
  await tool.getByRole("button", { name: "Call" }).click();
  await tool.locator("pre[id^=tool-result]", { hasText: "whoami with scope mcp:read" }).waitFor();
  await t.shot(page, "mcp-servers-authorized");
});

check("calls: filter, search and export the calls of the finished demo", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  const demo = t.demo(server);
  await demo.waitForLine(/^divide\(1, 0\) raised/, 30_000);
  const page = await t.page(server, "/calls");
  await page.locator("table.calls").waitFor();
  await t.shot(page, "calls");
  // Search text that only divide's exception holds.
  await page.locator('input[name="search"]').fill("division by ZERO");
  await page.getByRole("button", { name: "Apply" }).click();
  await page.waitForURL(/search=division/);
  const rows = page.locator("table.calls tbody tr");
  await waitFor(async () => (await rows.count()) === 1, { what: "one row for the search" });
  assert(/divide/.test(await rows.first().innerText()), "the row found is divide's");
  // The export link carries the same filter, and its lines are the same selection.
  const href = await page.getByRole("link", { name: /Export JSON Lines/ }).getAttribute("href");
  assert(/format=jsonl/.test(href) && /search=division/.test(href), `export link ${href}`);
  const r = await request(server.url + href);
  const lines = r.text.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert(lines.length === 1 && lines[0].method_name === "divide", `export: ${r.text.slice(0, 300)}`);
  await t.shot(page, "calls-search");
});

check("calls: at 1,400 px a row is one line, its id shortened with a copy button that copies it whole", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  const demo = t.demo(server);
  await demo.waitForLine(/^divide\(1, 0\) raised/, 30_000);
  await demo.waitForExit();
  const proc = (await server.api("GET", "/api/call-records?function=add&limit=1")).calls[0];
  for (let i = 0; i < 30; i++) await recordCall(server, proc, "scale", [i, `item-${i}`]);
  const page = await t.page(server, "/calls", {
    fresh: true,
    context: { viewport: { width: 1400, height: 900 }, permissions: ["clipboard-read", "clipboard-write"] },
  });
  await page.locator("table.calls tbody tr").nth(36).waitFor();
  const rows = await page.evaluate(() => Array.from(document.querySelectorAll("table.calls tbody tr")).map((tr) => ({
    fn: tr.querySelector(".fn").textContent,
    height: tr.getBoundingClientRect().height,
    id: tr.dataset.callId,
    shown: tr.querySelector("code.id").textContent,
    title: tr.querySelector("code.id").title,
  })));
  const line = await page.evaluate(() => parseFloat(getComputedStyle(document.querySelector("table.calls td.when")).lineHeight) || 20);
  await t.shot(page, "calls-1400");
  // A call with short arguments and result is one line (its time, call, status, arguments
  // and result side by side, under two lines of text however they wrap).
  const short = rows.filter((r) => ["scale", "add", "greet"].includes(r.fn));
  assert(short.length === 32, `the short calls: ${short.length}`);
  const tall = short.filter((r) => r.height >= 48);
  assert(tall.length === 0, `rows 48 px or taller: ${JSON.stringify(tall)} (a line is ${line} px)`);
  for (const r of rows) {
    assert(r.shown.length <= 22 && r.shown.endsWith("…") && r.id.startsWith(r.shown.slice(0, -1)),
      `the id is a prefix with an ellipsis: ${r.shown} of ${r.id}`);
    assert(r.title === `call id ${r.id}`, `the whole id in the title: ${r.title}`);
  }
  // The copy button, from the keyboard: the whole id on the clipboard, no dialog.
  const first = page.locator("table.calls tbody tr").first();
  const copy = first.getByRole("button", { name: "Copy the call id" });
  await copy.focus();
  await page.keyboard.press("Enter");
  await waitFor(async () => (await copy.getAttribute("data-copied")) === "yes", { what: "the button to say copied" });
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert(copied === rows[0].id, `copied ${copied}, not ${rows[0].id}`);
  const total = rows.reduce((sum, r) => sum + r.height, 0);
  return `${rows.length} rows ${Math.round(total)} px tall, the short ones at most ${Math.max(...short.map((r) => r.height)).toFixed(1)} px`;
});

check("calls: the client's own events are hidden with a count, shown muted on request; the status is a choice; a long value stays in its row", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  const demo = t.demo(server);
  await demo.waitForLine(/^divide\(1, 0\) raised/, 30_000);
  // A call with a long argument, and one after it, so that a row follows the long one.
  const long = JSON.stringify(Array.from({ length: 400 }, (_, i) => `item-${i}`));
  const cid = await sha512(long);
  const record = async (method, args) => {
    const started = await server.api("POST", "/api/call/start", { method_name: method, args, kwargs: {},
      signature: "(values)", call_site: { timestamp: Date.now() / 1000 }, process_pid: 91, process_start_time: 5 });
    await server.api("POST", "/api/call/complete", { call_id: started.call_id, timestamp: Date.now() / 1000,
      status: "success", process_pid: 91, process_start_time: 5 });
  };
  await record("long_values", [{ cid, data: long, serialization_format: "json" }]);
  await record("after_long", []);
  const events = (await server.api("GET", "/api/call-records?client_events=only&limit=1")).total_count;
  assert(events > 0, "the demo sent no client events");

  // Hidden by default, with their count.
  const page = await t.page(server, "/calls?limit=100");
  const note = page.locator("p.client-events");
  await note.waitFor();
  const said = (await note.innerText()).replace(/\s+/g, " ");
  assert(said.includes(`${events.toLocaleString("en-US")} client events hidden`), `the note says "${said}"`);
  assert(await page.locator("table.calls tr.client").count() === 0, "a client event is listed");
  assert(!/_cideldill_alias_name/.test(await page.locator("table.calls").innerText()), "the alias probe is listed");

  // A long value is folded and stays inside its row, closed and opened.
  const longRow = page.locator("table.calls tbody tr", { hasText: "long_values" });
  const nextRow = longRow.locator("xpath=following-sibling::tr[1]");
  const stays = async (what) => {
    const values = await longRow.locator("td:nth-child(4) code.value").evaluateAll((els) =>
      els.filter((e) => e.checkVisibility()).map((e) => e.getBoundingClientRect().bottom));
    const row = await longRow.boundingBox();
    const next = await nextRow.boundingBox();
    assert(values.length > 0, `no value shown ${what}`);
    for (const bottom of values) {
      assert(bottom <= row.y + row.height + 0.5 && bottom <= next.y + 0.5,
        `${what}: a value ends at ${bottom}, its row at ${row.y + row.height}, the next row starts at ${next.y}`);
    }
  };
  await longRow.locator("details.more").waitFor();
  assert(/^values\b/.test(await longRow.locator("dl.args dt").first().innerText()), "the argument is not named from the signature");
  await stays("folded");
  await t.shot(page, "calls-client-hidden");
  await longRow.locator("details.more > summary").click();
  await longRow.locator("details.more[open]").waitFor();
  await stays("shown in full");
  assert(/item-399/.test(await longRow.locator("details.more[open]").innerText()), "the whole value is not shown");

  // The toggle shows them, muted: never the red of the program's exceptions.
  await note.getByRole("link", { name: "Show them" }).click();
  await page.waitForURL(/client_events=show/);
  assert(/limit=100/.test(page.url()), `the toggle lost the other parameters: ${page.url()}`);
  const probe = page.locator("table.calls tr.client", { hasText: "_cideldill_alias_name" }).first();
  await probe.waitFor();
  const failed = page.locator("table.calls tr:not(.client) .badge.failed").first();
  await failed.waitFor();
  const color = (l) => l.evaluate((e) => getComputedStyle(e).color);
  const red = await color(failed);
  const probeStatus = probe.locator("td.status .badge").first();
  assert((await color(probeStatus)) !== red, "a client event's status is red");
  assert((await color(probe.locator("td:nth-child(5) code.value").first())) !== red, "a client event's exception is red");
  await t.shot(page, "calls-client-shown");

  // The status is a choice, matched exactly; arrow keys apply it only on Enter.
  const loads = [];
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) loads.push(f.url()); });
  const status = page.locator('select[name="status"]');
  await status.selectOption("exception");
  await page.waitForURL(/status=exception/);
  assert(/client_events=show/.test(page.url()), `the status choice lost the client events: ${page.url()}`);
  const statuses = await page.locator("table.calls td.status .badge:first-child").allInnerTexts();
  assert(statuses.length > 0 && statuses.every((s) => s === "exception"), `statuses ${JSON.stringify(statuses)}`);
  await page.locator('select[name="status"]').focus();
  loads.length = 0;
  await page.locator('select[name="status"]').press("ArrowUp");
  await new Promise((r) => setTimeout(r, 500));
  assert(loads.length === 0, `an arrow key applied the choice: ${loads.join(", ")}`);
  const chosen = await page.locator('select[name="status"]').inputValue();
  assert(chosen === "success", `the arrow key chose ${chosen}`);
  await page.keyboard.press("Enter");
  await page.waitForURL(/status=success/);
  const after = await page.locator("table.calls td.status .badge:first-child").allInnerTexts();
  assert(after.length > 0 && after.every((s) => s === "success"), `statuses ${JSON.stringify(after)}`);
  await t.shot(page, "calls-status-choice");
});

check("calls: a failed external tool call reads as failed on the MCP servers page", async (t) => {
  const fixture = path.join(path.dirname(BIN), "cideldill-fixture-mcp-server");
  const server = await t.server({ args: ["--mcp-client", `fx:${fixture}`] });
  await waitFor(async () => (await server.api("GET", "/api/mcp-clients")).clients.fx.status === "connected",
    { what: "the fixture server to connect" });
  const page = await t.page(server, "/mcp-servers");
  const tool = page.locator("details.tool").filter({ has: page.locator("summary code", { hasText: /^fail$/ }) });
  await tool.locator("summary").first().click();
  await tool.getByRole("button", { name: "Call" }).click();
  const result = tool.locator("pre[id^=tool-result].failed");
  await result.waitFor();
  assert((await result.locator("strong.error-text").innerText()).startsWith("Failed"), "the result is not marked failed");
  assert((await result.locator(".tool-error").innerText()) === "it failed", "the error text is not shown first");
  assert(/"isError": true/.test(await result.locator(".rest").innerText()), "the whole answer is not shown");
  await t.shot(page, "mcp-servers-failed-call");
});

check("source: the call site of a card opens its call stack, and a frame its source", async (t) => {
  const { server, page, card, id } = await demoPausedAtAdd(t);
  await card.locator("a.site").click();
  await page.waitForURL(/\/callstack\//);
  await page.locator("pre.src .line.hl").first().waitFor();
  assert(/demo_app\.py/.test(await page.locator("main").innerText()), "the stack names the demo's file");
  await t.shot(page, "callstack");
  await page.locator('a[href^="/frame/"]').first().click();
  await page.waitForURL(/\/frame\//);
  await page.locator("pre.src .line.hl").waitFor();
  await t.shot(page, "frame");
  // A frame index outside the stack is a 404 page, not a file.
  const r = await request(`${server.url}/frame/${encodeURIComponent(id)}/99`,
    { headers: { Accept: "text/html" } });
  assert(r.status === 404, `frame 99 answered ${r.status}`);
  // The other lists, for the record.
  await server.api("POST", "/api/report-com-error", { summary: "POST /api/call/start failed: connection refused",
    method: "POST", path: "/api/call/start", process_pid: 4242, exception_type: "ConnectionRefusedError",
    exception_message: "[Errno 111] Connection refused", timestamp: Date.now() / 1000 });
  const errors = await t.page(server, "/com-errors");
  await errors.locator("article.card h2", { hasText: "connection refused" }).waitFor();
  await t.shot(errors, "com-errors");
  const history = await t.page(server, "/breakpoint/add/history");
  await history.locator("h1", { hasText: "History of" }).waitFor();
  await t.shot(history, "breakpoint-history");
});

/** A JSON item of `value`, with its data (the CID is the SHA-512 of the data). */
async function jsonItem(value) {
  const data = JSON.stringify(value);
  return { cid: await sha512(data), data, serialization_format: "json" };
}

/** Records a completed call of `method(...args)` in the run (process) `proc`. */
async function recordCall(server, proc, method, args, at = Date.now() / 1000) {
  const who = { process_pid: proc.process_pid, process_start_time: proc.process_start_time };
  const started = await server.api("POST", "/api/call/start", { method_name: method, args: await Promise.all(args.map(jsonItem)),
    kwargs: {}, call_site: { timestamp: at, stack_trace: [] }, ...who });
  await server.api("POST", "/api/call/complete", { call_id: started.call_id, timestamp: at + 0.001, status: "success", ...who });
}

check("compare runs: two runs of the demo side by side, the divergence marked, a value's object opened", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  for (let i = 0; i < 2; i++) {
    const demo = t.demo(server);
    await demo.waitForLine(/^divide\(1, 0\) raised/, 30_000);
    await demo.waitForExit();
  }
  const adds = (await server.api("GET", "/api/call-records?function=add&limit=10")).calls;
  const runs = [...new Map(adds.map((r) => [r.process_key, r])).values()]
    .sort((x, y) => x.process_start_time - y.process_start_time);
  assert(runs.length === 2, `two runs of the demo, not ${runs.length}`);
  // The demo cannot vary its calls: each run gets one more greet through the API, with a
  // different argument, and the second run an extra call before it.
  await recordCall(server, runs[0], "greet", ["world"]);
  await recordCall(server, runs[1], "log", ["extra"]);
  await recordCall(server, runs[1], "greet", ["there"]);
  // The first run is labelled: the pickers and the header name it so, its key beside it.
  await server.api("POST", `/api/runs/${encodeURIComponent(runs[0].process_key)}/label`, { label: "before the fix" });
  const page = await t.page(server, "/call-tree");
  await page.locator("a", { hasText: "Compare two runs" }).click();
  await page.waitForURL(/\/runs\/compare/);
  await page.selectOption('select[name="a"]', runs[0].process_key);
  await page.selectOption('select[name="b"]', runs[1].process_key);
  await page.locator("form.compare-pick button").click();
  await page.waitForURL(/[?&]b=/);
  await page.locator(".first-divergence a").waitFor();
  const header = await page.locator("p.runs").innerText();
  assert(header.startsWith(`Run A before the fix ${runs[0].process_key} (`), `the header names run A by its label: ${header}`);
  const option = await page.locator('select[name="a"] option:checked').innerText();
  assert(option.startsWith("before the fix · demo_app.py") && option.endsWith(runs[0].process_key), `run A's choice: ${option}`);
  assert(await page.locator('nav a[aria-current="page"]').innerText() === "Runs", "the navigation marks Runs");
  await page.locator("table.compare tr.diff", { hasText: "only in run B" }).filter({ hasText: "log" }).waitFor();
  const changed = page.locator("table.compare tr.diff", { hasText: "different arguments" }).filter({ hasText: "there" });
  await changed.waitFor();
  assert(await changed.locator(".diff-sign").count() === 1, "the pair carries a sign beside its word");
  assert(await changed.locator("code.value.changed").count() === 2, "both sides' changed argument are marked");
  const same = await page.locator("table.compare tr.same", { hasText: "summarize" }).count();
  assert(same === 1, `the demo's own calls pair up: summarize is same (${same})`);
  await t.shot(page, "compare-runs");
  await page.locator(".first-divergence a").click();
  await changed.locator("a.obj").last().click();
  await page.waitForURL(/\/object\//);
  await page.locator("main", { hasText: "there" }).waitFor();
  await t.shot(page, "compare-runs-object");
});

check("runs: label a run, add notes, see them on its call tree, note a call", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  for (let i = 0; i < 2; i++) {
    const demo = t.demo(server);
    await demo.waitForLine(/^divide\(1, 0\) raised/, 30_000);
  }
  await waitFor(async () => (await server.api("GET", "/api/runs")).total === 2, { what: "two runs" });
  const page = await t.page(server, "/runs");
  const rows = page.locator("table.runs tbody tr");
  await rows.nth(1).waitFor();
  const runId = await rows.first().getAttribute("data-run");
  const row = page.locator(`tr[data-run="${runId}"]`);
  await row.locator('input[name="label"]').fill("baseline");
  await row.getByRole("button", { name: "Save label" }).click();
  await row.locator(".badge.run-label", { hasText: "baseline" }).waitFor();
  await row.locator('textarea[name="notes"]').fill("before the fix\nsecond line");
  await row.getByRole("button", { name: "Save notes" }).click();
  await waitFor(async () => (await server.api("GET", "/api/runs")).runs[0].notes === "before the fix\nsecond line",
    { what: "the notes to be saved" });
  await page.reload();
  assert(await row.locator('textarea[name="notes"]').inputValue() === "before the fix\nsecond line", "the notes are not shown");
  await t.shot(page, "runs");
  await row.locator("a").first().click();
  await page.waitForURL(/\/call-tree\/.+/);
  await page.locator(".run-meta .badge.run-label", { hasText: "baseline" }).waitFor();
  await page.locator(".run-meta .run-notes", { hasText: "second line" }).waitFor();
  // A note on one call, from its details, shown on the Calls page and found by its search.
  await page.locator("ul.tree a.call", { hasText: /^divide\b/ }).first().click();
  const noteForm = page.locator(".details form.note-edit");
  await noteForm.locator("textarea").fill("divides by zero on purpose");
  await noteForm.getByRole("button", { name: "Save note" }).click();
  await waitFor(async () => (await server.api("GET", "/api/call-records?search=on%20purpose")).calls.length === 1,
    { what: "the note to be saved" });
  await t.shot(page, "call-tree-run-label");
  const calls = await t.page(server, "/calls?search=on+purpose");
  await calls.locator(".record-note", { hasText: "divides by zero on purpose" }).waitFor();
  await t.shot(calls, "calls-record-note");
});

check("replay: a recorded call is replayed from the call tree's details, with edited arguments", async (t) => {
  const server = await t.server();
  t.demo(server, { args: ["--items", "3"] });
  // resize(0) runs as is; the program then pauses before resize(1), and replays go through it.
  await resume(server, await pauseOf(server, "resize", "before"));
  await resume(server, await pauseOf(server, "resize", "after"));
  await waitFor(async () => (await server.api("GET", "/api/paused")).paused.find((p) =>
    p.call_data.method_name === "resize" && p.when === "before" && p.call_data.pretty_args[0] === "1"),
  { what: "the pause before resize(1)" });
  const record = (await server.api("GET", "/api/call-records?function=resize")).calls[0];
  assert(record.pretty_args[0] === "0", `the record of resize(0) first: ${JSON.stringify(record.pretty_args)}`);
  const tree = `/call-tree/${encodeURIComponent(record.process_key)}?selected=${encodeURIComponent(record.call_id)}`;
  const page = await t.page(server, tree);
  await page.locator("form.replay input[name=args]").fill("[7]");
  await page.locator("form.replay").getByRole("button", { name: "Replay" }).click();
  // The page opens the new call: it names the call it replays and what differs.
  await page.waitForURL((u) => u.searchParams.get("selected") && u.searchParams.get("selected") !== record.call_id);
  const table = page.locator("#tree-details table.differences");
  await table.waitFor();
  const text = (await table.innerText()).replace(/\s+/g, " ");
  // The argument is named from resize's signature (x, label, scale=2).
  assert(/\bx 0 7/.test(text) && /result 0 14/.test(text), `the differences: ${text}`);
  const facts = await page.locator("#tree-details dl.facts").innerText();
  assert(/Replay of/.test(facts) && facts.includes(record.call_id), `the replayed call names its source: ${facts}`);
  assert(/14/.test(await page.locator("#tree-details").innerText()), "the replay's result is shown");
  await t.shot(page, "replay-edited");
  // The recorded arguments again, from the source's details: the same outcome, said so.
  await page.goto(server.url + tree);
  await page.locator("form.replay").getByRole("button", { name: "Replay" }).click();
  await page.locator("#tree-details p.same").waitFor();
  await t.shot(page, "replay-same");
  // From the Calls page: a row's Replay, with the recorded arguments, opens the new call too.
  const calls = await t.page(server, "/calls?function=resize");
  const row = calls.locator(`tr[data-call-id="${record.call_id}"]`);
  await t.shot(calls, "replay-calls-rows");
  await row.locator("form.row-replay").getByRole("button", { name: "Replay" }).click();
  await calls.waitForURL(/\/call-tree\//);
  await calls.locator("#tree-details p.same").waitFor();
  // Nothing is left paused but the program's own call.
  const left = (await server.api("GET", "/api/paused")).paused;
  assert(left.length === 1, `pauses left: ${left.length}`);
});

check("runs: a new run, and a label set elsewhere, appear on the open Runs page without a reload", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  const page = await t.page(server, "/runs");
  await page.locator("main .empty", { hasText: "No runs recorded yet" }).waitFor();
  let loads = 0;
  page.on("load", () => { loads += 1; });
  await page.evaluate(() => { window.sameDocument = "yes"; });
  const demo = t.demo(server);
  await demo.waitForExit();
  const rows = page.locator("table.runs tbody tr[data-run]");
  await rows.first().waitFor({ timeout: 10_000 });
  const listed = (await server.api("GET", "/api/runs")).runs;
  await page.locator("table.runs tbody tr td.num", { hasText: String(listed[0].calls) }).first().waitFor();
  // A second run while a label is being typed into the first: the typing survives.
  await rows.first().locator('input[name="label"]').fill("typing");
  const again = t.demo(server);
  await again.waitForExit();
  await page.locator("body").click({ position: { x: 5, y: 5 } });
  await waitFor(async () => await rows.count() === 2, { what: "the second run listed live" });
  const typed = await page.locator(`tr[data-run="${listed[0].run_id}"] input[name="label"]`).inputValue();
  assert(typed === "typing", `what was typed survives the refresh: ${typed}`);
  // A label set elsewhere (another tab, an agent) shows without a reload.
  const newest = (await server.api("GET", "/api/runs")).runs[0].run_id;
  await server.api("POST", `/api/runs/${encodeURIComponent(newest)}/label`, { label: "from an agent" });
  await page.locator(`tr[data-run="${newest}"] .run-label`, { hasText: "from an agent" }).waitFor({ timeout: 5_000 });
  assert(loads === 0, `the page was loaded again ${loads} time(s)`);
  assert(await page.evaluate(() => window.sameDocument) === "yes", "the page was reloaded");
  await t.shot(page, "runs-live");
});

check("runs: a run is deleted from the Runs page after a second, confirming button, by keyboard", async (t) => {
  const server = await t.server();
  await server.api("POST", "/api/behavior", { behavior: "go" });
  for (let i = 0; i < 2; i++) await t.demo(server).waitForExit();
  await waitFor(async () => (await server.api("GET", "/api/runs")).total === 2, { what: "two runs" });
  const [kept, doomed] = (await server.api("GET", "/api/runs")).runs;
  const page = await t.page(server, "/runs");
  const row = page.locator(`tr[data-run="${doomed.run_id}"]`);
  const summary = row.locator("details.run-delete summary");
  await summary.focus();
  await page.keyboard.press("Enter");
  await row.getByRole("button", { name: `Really delete run ${doomed.run_id} (${doomed.calls} calls)?` }).waitFor();
  assert((await server.api("GET", "/api/runs")).total === 2, "opening the confirmation deletes nothing");
  // The run records one more call meanwhile: the row is refreshed, the confirmation stays open
  // with the focus where it was, and counts the new call.
  const who = { process_pid: doomed.pid, process_start_time: Number(doomed.run_id.split("+")[0]) };
  await recordCall(server, who, "late", [1]);
  const confirm = row.getByRole("button", { name: `Really delete run ${doomed.run_id} (${doomed.calls + 1} calls)?` });
  await confirm.waitFor();
  assert(await summary.evaluate((s) => s === document.activeElement && s.parentElement.open),
    "the refreshed row keeps its confirmation open and the focus on it");
  await t.shot(page, "runs-delete-confirm");
  // Its call tree, open in another tab, goes to the list of processes once it is deleted.
  const tree = await t.page(server, `/call-tree/${encodeURIComponent(doomed.run_id)}`);
  await tree.locator("ul.tree a.call").first().waitFor();
  await page.bringToFront();
  await summary.focus();
  await page.keyboard.press("Tab");
  assert(await confirm.evaluate((b) => b === document.activeElement), "Tab reaches the confirming button");
  await page.keyboard.press("Enter");
  await row.waitFor({ state: "detached" });
  await tree.waitForURL((u) => u.pathname === "/call-tree");
  assert(await tree.locator(`a[href*="${encodeURIComponent(doomed.run_id)}"]`).count() === 0,
    "the deleted run is not listed on the call tree page");
  const left = (await server.api("GET", "/api/runs")).runs.map((r) => r.run_id);
  assert(left.length === 1 && left[0] === kept.run_id, `the other run stays: ${left}`);
  const records = await server.api("GET", `/api/call-records?process=${encodeURIComponent(doomed.run_id)}`);
  assert(records.total_count === 0, `the deleted run's records: ${records.total_count}`);
  await page.locator(`tr[data-run="${kept.run_id}"]`).waitFor();
  await t.shot(page, "runs-deleted");
});

// ---------------------------------------------------------------------------------------
check("replay run: the Runs page replays a run's calls in order and shows where it diverged", async (t) => {
  const server = await t.server();
  t.demo(server);
  // add runs as is, greet is skipped with a fake result (its record says 'hi'); the program
  // then pauses before divide, and the sequence goes through that pause.
  for (const [fn, body] of [["add"], ["greet", { action: "skip", fake_result: "hi" }], ["summarize"], ["describe"]]) {
    await resume(server, await pauseOf(server, fn, "before"), body);
    await resume(server, await pauseOf(server, fn, "after"));
  }
  await pauseOf(server, "divide", "before");
  const page = await t.page(server, "/runs");
  const form = page.locator("form.replay-run");
  await form.waitFor();
  await t.shot(page, "replay-run-form");
  await form.getByRole("button", { name: "Replay run" }).click();
  await page.waitForURL(/\/runs\/replayed\//);
  const outcome = await page.locator("#replay-outcome").innerText();
  assert(/Diverged at call 2/.test(outcome) && /greet/.test(outcome), `the outcome: ${outcome}`);
  const table = (await page.locator("table.differences").innerText()).replace(/\s+/g, " ");
  assert(/result 'hi' 'Hello, world!'/.test(table), `the differences: ${table}`);
  const steps = (await page.locator("table.replayed tbody").innerText()).replace(/\s+/g, " ");
  assert(/1 add recorded replay same 2 greet recorded replay differs/.test(steps), `calls replayed: ${steps}`);
  await t.shot(page, "replay-run-report");
  // On a phone the report fits the window.
  await page.setViewportSize({ width: 390, height: 844 });
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  assert(wide <= 390, `the report is ${wide} px wide in a 390 px window`);
  await t.shot(page, "replay-run-report-phone");
  // The replay's link opens the new call, compared with its record.
  await page.getByRole("link", { name: "Open the replay" }).click();
  await page.waitForURL(/\/call-tree\//);
  await page.locator("#tree-details table.differences").waitFor();
});

// Checks: every page, for everyone

const AXE_SOURCE = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const SIZES = { desktop: { width: 1400, height: 900 }, phone: { width: 390, height: 844 } };

/**
 * A session with something on every page: the demo paused at add (its card, a REPL session
 * with an answer), a com-error, the demo's finished first run's calls and objects. Answers
 * the pages to visit, by name.
 */
async function everyPage(t) {
  const { server, page, id } = await demoPausedAtAdd(t);
  const session = (await server.api("POST", "/api/repl/start", { pause_id: id })).session_id;
  await server.api("POST", `/api/repl/${session}/eval`, { expr: "6 * 7" });
  await server.api("POST", "/api/report-com-error", { summary: "POST /api/call/start failed: connection refused",
    method: "POST", path: "/api/call/start", process_pid: 4242, exception_type: "ConnectionRefusedError",
    exception_message: "[Errno 111] Connection refused", timestamp: Date.now() / 1000 });
  const site = await page.locator(`${CARD}[data-pause-id="${id}"] a.site`).getAttribute("href");
  const processes = await t.page(server, "/call-tree");
  const tree = await processes.locator("table a").first().getAttribute("href");
  const paused = (await server.api("GET", "/api/paused")).paused;
  const cid = paused.map((p) => p.call_data.args?.[0]?.cid).find(Boolean);
  assert(cid, `no paused call's argument has a CID: ${JSON.stringify(paused).slice(0, 300)}`);
  await processes.close();
  const runA = { process_pid: 5001, process_start_time: 1795311683.5 };
  const runB = { process_pid: 5002, process_start_time: 1795311683.5 };
  await recordCall(server, runA, "load", ["a.csv"]);
  await recordCall(server, runB, "load", ["b.csv"]);
  await recordCall(server, runB, "retry", []);
  const compare = `/runs/compare?a=${encodeURIComponent("1795311683.500000+5001")}&b=${encodeURIComponent("1795311683.500000+5002")}`;
  return {
    paused: "/", breakpoints: "/breakpoints", calls: "/calls", "call-tree": "/call-tree", process: tree,
    repls: "/repls", repl: `/repl/${encodeURIComponent(session)}`, "mcp-servers": "/mcp-servers",
    functions: "/functions", errors: "/com-errors", objects: "/objects", object: `/object/${cid}`,
    callstack: site, frame: `/frame/${encodeURIComponent(id)}/0`, history: "/breakpoint/add/history",
    "repl-help": "/repl-help", compare, "not-found": "/nope", runs: "/runs", docs: "/docs",
  };
}

/** The serious and critical axe violations of the page as it is, one line each. */
async function axeViolations(page) {
  await page.evaluate(AXE_SOURCE);
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
  });
  return found;
}

/** Every page in one theme at one size: 0 serious or critical axe violations, no sideways
 *  scrolling on a phone, a screenshot of each. */
function everyPageIn(scheme, size) {
  return async (t) => {
    const pages = await everyPage(t);
    const page = await t.page(null, "/", { context: { colorScheme: scheme, viewport: SIZES[size] }, fresh: true });
    const problems = [];
    for (const [name, where] of Object.entries(pages)) {
      await page.goto(t.servers[0].url + where);
      await page.locator("main").waitFor();
      for (const v of await axeViolations(page)) problems.push(`${name}: ${v}`);
      const w = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      if (w[0] > w[1]) problems.push(`${name}: the page is ${w[0]} px wide in a ${w[1]} px window`);
      await t.shot(page, `page-${name}-${scheme}-${size}`);
    }
    assert(!problems.length, `${problems.length} problems:\n  ${problems.join("\n  ")}`);
    return `${Object.keys(pages).length} pages, 0 serious or critical axe violations, no sideways scrolling`;
  };
}

check("live: a new pause is announced, and a selection in another card survives it", async (t) => {
  const { server, page, card } = await demoPausedAtAdd(t);
  // Select the text of the card's arguments, and mark the card's node.
  const selected = await card.evaluate((c) => {
    c.__kept = true;
    const target = c.querySelector(".args, dl, table, code") || c;
    const range = document.createRange();
    range.selectNodeContents(target);
    const sel = getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    return sel.toString();
  });
  assert(selected.trim().length > 0, "nothing was selected in the card");
  // Another program pauses: its card is inserted, the first one is left as it was.
  t.demo(server);
  await waitFor(async () => (await page.locator(`${CARD}[data-when="before"]`).count()) >= 2,
    { what: "the second program's card" });
  await waitFor(async () => /Paused: add, before the call/.test(await page.locator("#announce").textContent()),
    { what: "the new pause to be announced" });
  const after = await card.evaluate((c) => ({ kept: c.__kept === true, sel: getSelection().toString() }));
  assert(after.kept, "the first card was replaced by an unrelated event");
  assert(after.sel === selected, `the selection changed from ${JSON.stringify(selected.slice(0, 80))} to ${JSON.stringify(after.sel.slice(0, 80))}`);
  // Calls that complete elsewhere cost the page nothing: no refresh at all.
  let fetched = 0;
  page.on("request", (r) => { if (r.url().includes("fragment=1")) fetched += 1; });
  for (let i = 0; i < 20; i++) {
    await server.api("POST", "/api/call/event", { method_name: `other_${i}`, status: "registered", process_pid: 7, process_start_time: 1 });
  }
  await sleep(400); // 20 events, then five times the page's refresh delay: any refresh would have started.
  assert(fetched === 0, `${fetched} refreshes for calls the page does not show`);
  assert(await card.evaluate((c) => c.__kept === true), "the card was replaced");
  await t.shot(page, "paused-two-programs");
});

check("docs: every operation of the OpenAPI document, sent from the page", async (t) => {
  const server = await t.server();
  const page = await t.page(server, "/docs");
  const spec = await server.api("GET", "/openapi.json");
  const ops = Object.values(spec.paths).reduce((n, o) => n + Object.keys(o).length, 0);
  assert(await page.locator("details.op").count() === ops, `the page lists every one of the ${ops} operations`);
  // A GET: its answer is shown, as JSON.
  const list = page.locator("details#op-get_api_breakpoints");
  await list.locator("summary").click();
  await list.getByRole("button", { name: "Send GET" }).click();
  const answer = list.locator(".try-answer");
  await waitFor(async () => /: 200 /.test(await answer.locator("strong").textContent()), { what: "the GET's status" });
  assert((await answer.locator("pre").textContent()).includes('"breakpoints"'), "the GET's answer is shown");
  // A POST with a body that is not JSON is not sent; then with one, it is, and it acts.
  const add = page.locator("details#op-post_api_breakpoints");
  await add.locator("summary").click();
  const body = add.locator('textarea[data-in="body"]');
  await body.fill("{function_name: nope");
  await add.getByRole("button", { name: "Send POST" }).click();
  await waitFor(async () => /not JSON/.test(await add.locator(".try-answer").textContent()), { what: "the refusal of a bad body" });
  assert(await body.getAttribute("aria-invalid") === "true", "the body field is marked invalid");
  await body.fill('{"function_name": "from_docs"}');
  await add.getByRole("button", { name: "Send POST" }).click();
  await waitFor(async () => /: 200 /.test(await add.locator(".try-answer strong").textContent()), { what: "the POST's status" });
  const bps = await server.api("GET", "/api/breakpoints");
  assert(bps.breakpoints.includes("from_docs"), `the POST from the page added the breakpoint: ${JSON.stringify(bps.breakpoints)}`);
  // A path parameter fills the path: an unknown name answers its 404 error, shown as failed.
  const one = page.locator("details#op-post_api_runs_run_id_label");
  await one.locator("summary").click();
  await one.locator('input[data-name="run_id"]').fill("no such/run");
  await one.locator('textarea[data-in="body"]').fill('{"label": "x"}');
  await one.getByRole("button", { name: "Send POST" }).click();
  await waitFor(async () => /no%20such%2Frun\/label: 404 /.test(await one.locator(".try-answer strong").textContent()), { what: "the unknown run's 404" });
  assert(await one.locator(".try-answer").evaluate((e) => e.classList.contains("failed")), "an error answer is marked failed");
  await t.shot(page, "docs-try-it");
});

check("keys: ? opens the keyboard help on every page, Escape closes it", async (t) => {
  const server = await t.server();
  for (const where of ["/", "/calls", "/breakpoints"]) {
    const page = await t.page(server, where);
    await page.keyboard.press("?");
    const help = page.locator("dialog#help");
    await help.waitFor({ state: "visible" });
    assert(/Continue the paused call/.test(await help.textContent()), "the help names the keys");
    if (where === "/") await t.shot(page, "keys-help");
    await page.keyboard.press("Escape");
    await help.waitFor({ state: "hidden" });
    // The header's Keys button opens it too.
    await page.getByRole("button", { name: /Keys/ }).click();
    await help.waitFor({ state: "visible" });
    await help.getByRole("button", { name: "Close" }).click();
    await help.waitFor({ state: "hidden" });
  }
});

check("live: a REPL answer is announced", async (t) => {
  const { server, id } = await demoPausedAtAdd(t);
  const session = (await server.api("POST", "/api/repl/start", { pause_id: id })).session_id;
  const page = await t.page(server, `/repl/${encodeURIComponent(session)}`);
  await pageLive(page);
  await page.locator("#expr").fill("6 * 7");
  await page.locator("#expr").press("Enter");
  await waitFor(async () => /^REPL: 42$/.test((await page.locator("#announce").textContent()).trim()),
    { what: "the answer to be announced" });
});

for (const scheme of ["light", "dark"]) {
  for (const size of Object.keys(SIZES)) {
    check(`every page: accessible and fits, ${scheme} theme, ${size}`, everyPageIn(scheme, size));
  }
}

async function runCheck({ name, fn }) {
  const t = makeContext();
  const started = Date.now();
  let timer;
  let note = "";
  let failure = null;
  try {
    note = await Promise.race([
      fn(t),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`the check took more than ${CHECK_MS / 1000} s`)), CHECK_MS); }),
    ]) || "";
    if (t.problems.length) failure = t.problems.join("\n  ");
    else {
      const v = await t.violations();
      if (v.length) failure = `CSP violations: ${v.join("; ")}`;
    }
  } catch (e) {
    failure = (e && e.message) || String(e);
    if (t.problems.length) failure += `\n  and: ${t.problems.join("\n  ")}`;
  } finally {
    clearTimeout(timer);
    await t.cleanup();
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  if (failure) {
    for (const s of t.servers) {
      const log = s.log().trim();
      if (log) failure += `\n  ---- server log (port ${s.port}, end) ----\n${tail(log, Number(process.env.CIDELDILL_UI_LOG_LINES || 10))}`;
    }
    for (const d of t.programs) {
      const err = d.stderr().trim();
      failure += `\n  ---- program stderr (end; ${d.ended() || "still running"}) ----\n${tail(err, 10)}`;
    }
  }
  if (failure) console.log(`FAIL ${name} (${secs} s): ${failure}`);
  else console.log(`PASS ${name} (${secs} s)${note ? `: ${note}` : ""}`);
  return !failure;
}

async function main() {
  const wanted = process.argv.slice(2);
  const chosen = checks.filter((c) => !wanted.length || wanted.some((w) => c.name.includes(w)));
  let passed = 0;
  let failed = 0;
  const started = Date.now();
  try {
    for (const c of chosen) {
      if (await runCheck(c)) passed += 1;
      else failed += 1;
    }
  } catch (e) {
    console.log(`FAIL the run stopped: ${e && e.stack || e}`);
    failed += 1;
  } finally {
    if (browser) await browser.close().catch(() => {});
  }
  console.log(`INFO ${chosen.length} checks in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${path.relative(ROOT, SHOTS)}/`);
  console.log(`ui: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
