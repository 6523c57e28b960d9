// debug-client.js: the browser debug client of cideldill-server, served at
// GET /api/debug-client.js with the server's URL filled in. A web page is debugged like an
// instrumented Python program: calls made through it are reported to the server, pause there
// where a breakpoint is set, and are continued, modified, skipped, raised or replaced from
// the web UI, REST or MCP. It behaves like the original project's browser client
// (cideldill_server/debug_client_js.py); where it does more, the comment says so.
//
//   import { withDebug, debugCall } from "http://127.0.0.1:5174/api/debug-client.js";
//   withDebug("ON");
//   const result = await debugCall(function add(a, b) { return a + b; }, 1, 2);
//   const store = withDebug(["store", storeObject]);  // its methods answer Promises
//
// Exports (also on window.cideldill, and the default export `cideldill`): withDebug,
// withDebugSync, debugCall, debugCallSync, configure, registerReplacement, and sha512Hex
// (the CID hash). The *Sync variants use synchronous XMLHttpRequest and spin between polls:
// the page (rendering, input, timers) is frozen while one of their calls is paused.
// The client adds no breakpoints: a call pauses only where one was set (web UI, REST, MCP).
// No dependencies, no build step.
// "§N" cites the wire protocol's description, section N of the server's docs/protocol.md.

/** Filled in by the server when it serves this file (from the request's Host). */
const SERVER_URL = "__CIDELDILL_SERVER_URL__";

const settings = {
  serverUrl: SERVER_URL.startsWith("http") ? SERVER_URL : new URL(import.meta.url).origin,
  enabled: false,
  /** Each request's deadline (the async variants only: a sync XHR cannot have one). */
  requestTimeoutMs: 30000,
  /** A REPL evaluation that returns a promise is awaited this long (§2.7). */
  replTimeoutMs: 30000,
};

/** This page's identity: pid 0, the page's URL and its load time (§1), taken at "ON". */
const page = { url: null, startTime: null };
const MODULE_URL = import.meta.url;
/** Caches are capped like the Python client's (§3). */
const CACHE_MAX = 10000;

/** Errors thrown into the caller are Errors named like the Python client's: DebugServerError
 * (the server cannot be reached or refused a request), DebugProtocolError (an answer this
 * client cannot follow). */
const failure = (name, message) => Object.assign(new Error(message), { name });
const serverError = (message) => failure("DebugServerError", message);
const protocolError = (message) => failure("DebugProtocolError", message);

// ---------------------------------------------------------------------------------------
// SHA-512 (FIPS 180-4) in plain JavaScript: synchronous, and available where
// crypto.subtle is not (pages served over plain http from a non-local address).

/** The first n primes. */
function primes(n) {
  const out = [];
  for (let k = 2; out.length < n; k++) if (out.every((p) => k % p)) out.push(k);
  return out;
}

/** floor(x^(1/r)) of a BigInt x, by Newton's method from above. */
function iroot(x, r) {
  const R = BigInt(r);
  let y = 1n << BigInt(Math.ceil(x.toString(2).length / r));
  for (;;) {
    const next = ((R - 1n) * y + x / y ** (R - 1n)) / R;
    if (next >= y) return y;
    y = next;
  }
}

/** The first 64 fractional bits of the r-th roots of primes, as [hi, lo] 32-bit words. */
function rootWords(count, r) {
  const words = new Int32Array(count * 2);
  primes(count).forEach((p, i) => {
    const bits = iroot(BigInt(p) << BigInt(64 * r), r) & ((1n << 64n) - 1n);
    words[2 * i] = Number(bits >> 32n);
    words[2 * i + 1] = Number(bits & 0xffffffffn);
  });
  return words;
}

const K = rootWords(80, 3); // cube roots of the first 80 primes
const H0 = rootWords(8, 2); // square roots of the first 8 primes

// A 64-bit word is a pair of int32s (hi, lo); rotations by n bits, 0 < n < 64, n != 32.
const rotHi = (h, l, n) => (n < 32 ? (h >>> n) | (l << (32 - n)) : (l >>> (n - 32)) | (h << (64 - n)));
const rotLo = (h, l, n) => (n < 32 ? (l >>> n) | (h << (32 - n)) : (h >>> (n - 32)) | (l << (64 - n)));
const TWO32 = 4294967296;

/** The SHA-512 of a string's UTF-8 bytes, as 128 lowercase hex digits. */
export function sha512Hex(text) {
  const bytes = new TextEncoder().encode(String(text));
  const blocks = Math.ceil((bytes.length + 17) / 128);
  const buf = new Uint8Array(blocks * 128);
  buf.set(bytes);
  buf[bytes.length] = 0x80;
  const view = new DataView(buf.buffer);
  const bits = bytes.length * 8;
  view.setUint32(buf.length - 8, Math.floor(bits / TWO32));
  view.setUint32(buf.length - 4, bits >>> 0);
  const H = Int32Array.from(H0);
  const W = new Int32Array(160);
  for (let off = 0; off < buf.length; off += 128) {
    for (let i = 0; i < 32; i++) W[i] = view.getInt32(off + 4 * i);
    for (let t = 16; t < 80; t++) {
      const xh = W[2 * t - 30], xl = W[2 * t - 29]; // w[t-15]
      const yh = W[2 * t - 4], yl = W[2 * t - 3]; // w[t-2]
      const s0h = rotHi(xh, xl, 1) ^ rotHi(xh, xl, 8) ^ (xh >>> 7);
      const s0l = rotLo(xh, xl, 1) ^ rotLo(xh, xl, 8) ^ ((xl >>> 7) | (xh << 25));
      const s1h = rotHi(yh, yl, 19) ^ rotHi(yh, yl, 61) ^ (yh >>> 6);
      const s1l = rotLo(yh, yl, 19) ^ rotLo(yh, yl, 61) ^ ((yl >>> 6) | (yh << 26));
      const lo = (s1l >>> 0) + (W[2 * t - 13] >>> 0) + (s0l >>> 0) + (W[2 * t - 31] >>> 0);
      W[2 * t] = s1h + W[2 * t - 14] + s0h + W[2 * t - 32] + Math.floor(lo / TWO32);
      W[2 * t + 1] = lo; // Int32Array keeps the low 32 bits
    }
    let [ah, al, bh, bl, ch, cl, dh, dl, eh, el, fh, fl, gh, gl, hh, hl] = H;
    for (let t = 0; t < 80; t++) {
      const S1h = rotHi(eh, el, 14) ^ rotHi(eh, el, 18) ^ rotHi(eh, el, 41);
      const S1l = rotLo(eh, el, 14) ^ rotLo(eh, el, 18) ^ rotLo(eh, el, 41);
      const chh = (eh & fh) ^ (~eh & gh), chl = (el & fl) ^ (~el & gl);
      const t1l = (hl >>> 0) + (S1l >>> 0) + (chl >>> 0) + (K[2 * t + 1] >>> 0) + (W[2 * t + 1] >>> 0);
      const t1h = hh + S1h + chh + K[2 * t] + W[2 * t] + Math.floor(t1l / TWO32);
      const S0h = rotHi(ah, al, 28) ^ rotHi(ah, al, 34) ^ rotHi(ah, al, 39);
      const S0l = rotLo(ah, al, 28) ^ rotLo(ah, al, 34) ^ rotLo(ah, al, 39);
      const mjh = (ah & bh) ^ (ah & ch) ^ (bh & ch), mjl = (al & bl) ^ (al & cl) ^ (bl & cl);
      const t2l = (S0l >>> 0) + (mjl >>> 0);
      const t2h = S0h + mjh + Math.floor(t2l / TWO32);
      hh = gh; hl = gl; gh = fh; gl = fl; fh = eh; fl = el;
      const e = (dl >>> 0) + (t1l >>> 0); // e = d + T1
      eh = (dh + t1h + Math.floor(e / TWO32)) | 0;
      el = e | 0;
      dh = ch; dl = cl; ch = bh; cl = bl; bh = ah; bl = al;
      const a = (t1l >>> 0) + (t2l >>> 0); // a = T1 + T2
      ah = (t1h + t2h + Math.floor(a / TWO32)) | 0;
      al = a | 0;
    }
    const state = [ah, al, bh, bl, ch, cl, dh, dl, eh, el, fh, fl, gh, gl, hh, hl];
    for (let i = 0; i < 16; i += 2) {
      const lo = (H[i + 1] >>> 0) + (state[i + 1] >>> 0);
      H[i] += state[i] + Math.floor(lo / TWO32); // Int32Array keeps the low 32 bits
      H[i + 1] = lo;
    }
  }
  return Array.from(H, (w) => (w >>> 0).toString(16).padStart(8, "0")).join("");
}

// ---------------------------------------------------------------------------------------
// Values as JSON items (§3): data is JSON text, the CID its SHA-512.

/** A bounded map that forgets its oldest entries (insertion order; a hit moves to the end). */
class Lru extends Map {
  touch(key, value) {
    this.delete(key);
    this.set(key, value);
    if (this.size > CACHE_MAX) this.delete(this.keys().next().value);
    return value;
  }
}
/** CIDs whose data this page has sent: later items leave their data out. */
const sentCids = new Lru();
/** CID -> the value this page sent under it, so an item with only a cid can be resolved. */
const sentValues = new Lru();
/** Identity numbers of objects (client_ref); primitives get a new one each time. */
const refs = new WeakMap();
let nextRef = 1;

function clientRef(value) {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return nextRef++;
  if (!refs.has(value)) refs.set(value, nextRef++);
  return refs.get(value);
}

/** Objects nested deeper than this are sent as a placeholder. */
const MAX_DEPTH = 50;

/** What is sent in place of a value that cannot be sent as it is (§4.4). */
function placeholder(value, reason) {
  let typeName = "Object";
  try {
    typeName = value && value.constructor ? value.constructor.name : "Object";
  } catch (e) {
    typeName = "Object";
  }
  return {
    __cideldill_placeholder__: true,
    type_name: typeName,
    repr_text: String(value),
    serialization_error: reason,
    serialization_format: "json",
  };
}

/**
 * The JSON text of a value, as the original client writes it: JSON.stringify (so toJSON
 * first, e.g. a Date as its ISO string) with these replacements: a BigInt as its decimal
 * string, a function as "[Function name]", undefined as null, NaN and the infinities as
 * "NaN", "Infinity", "-Infinity", a RegExp as its source text ("/abc/i"), an Error as
 * {name, message, stack}, a Map as its [key, value] entries, a Set as its values, a typed
 * array or ArrayBuffer as an array of numbers (a DataView as []); an object deeper than
 * MAX_DEPTH as a placeholder; an object met a second time (a cycle, or one shared) as
 * "[Circular]".
 */
function jsonText(value) {
  const depthOf = new WeakMap();
  const replace = function (key, v) {
    switch (typeof v) {
      case "bigint": return v.toString();
      case "function": return `[Function ${v.name || "anonymous"}]`;
      case "undefined": return null;
      case "number":
        if (Number.isNaN(v)) return "NaN";
        if (v === Infinity) return "Infinity";
        if (v === -Infinity) return "-Infinity";
        return v;
      default: break;
    }
    if (v instanceof Date) return v.toISOString();
    if (v instanceof RegExp) return v.toString();
    if (v instanceof Error) return { name: v.name || "Error", message: v.message || String(v), stack: v.stack || null };
    if (v instanceof Map) return Array.from(v.entries());
    if (v instanceof Set) return Array.from(v.values());
    if (ArrayBuffer.isView(v)) return Array.from(v);
    if (v instanceof ArrayBuffer) return Array.from(new Uint8Array(v));
    if (v && typeof v === "object") {
      // `this` is the object holding v: v is one level deeper than it.
      const depth = (depthOf.get(this) || 0) + 1;
      if (depth > MAX_DEPTH) return placeholder(v, `Max depth ${MAX_DEPTH} exceeded`);
      if (depthOf.has(v)) return "[Circular]";
      depthOf.set(v, depth);
    }
    return v;
  };
  // Where the original client would throw into the page's call (a getter that throws) or
  // send an item without data (a Symbol), this one sends a placeholder.
  try {
    const text = JSON.stringify(value, replace);
    if (text !== undefined) return text;
    return JSON.stringify(placeholder(value, `JSON cannot hold a ${typeof value}`));
  } catch (e) {
    try {
      return JSON.stringify(placeholder(value, String(e)));
    } catch (e2) {
      return JSON.stringify({ __cideldill_placeholder__: true, type_name: typeof value, repr_text: "?",
        serialization_error: String(e), serialization_format: "json" });
    }
  }
}

/** `{text, cid}` of a value. */
function encode(value) {
  const text = jsonText(value);
  return { text, cid: sha512Hex(text) };
}

/** An item for a value this call sends; `texts` keeps CID -> text for a resend (§2.5). Its
 * data is left out when this page sent that CID's data before, unless `forceData`. */
function makeItem(value, texts, forceData = false) {
  const { text, cid } = encode(value);
  texts.set(cid, text);
  sentValues.touch(cid, value);
  const item = { cid, client_ref: clientRef(value), serialization_format: "json" };
  if (forceData || !sentCids.has(cid)) item.data = text;
  sentCids.touch(cid, true);
  return item;
}

/** The value of an item the server sent (modify, §2.11): JSON text, or a cid this page sent. */
function decodeItem(item) {
  if (item === null || typeof item !== "object" || typeof item.cid !== "string") {
    throw protocolError(`not an item: ${JSON.stringify(item)}`);
  }
  if (sentValues.has(item.cid)) return sentValues.touch(item.cid, sentValues.get(item.cid));
  if (typeof item.data !== "string") throw protocolError(`unknown CID ${item.cid.slice(0, 16)}… without data`);
  const format = item.serialization_format ?? "json";
  if (format !== "json") throw protocolError(`cannot decode a ${format} item in a browser`);
  return JSON.parse(item.data);
}

// ---------------------------------------------------------------------------------------
// Requests, written once as generators of effects and run either asynchronously (fetch,
// timers) or synchronously (XMLHttpRequest, spinning).

const now = () => Date.now() / 1000;

function pageUrl() {
  const loc = globalThis.window?.location ?? globalThis.location;
  return loc && loc.href ? String(loc.href) : null;
}

function timeOrigin() {
  const origin = globalThis.performance?.timeOrigin;
  return origin ? origin / 1000 : now();
}

const identity = () => {
  if (page.url === null) page.url = pageUrl();
  if (page.startTime === null) page.startTime = timeOrigin();
  return { process_pid: 0, process_start_time: page.startTime, page_url: page.url };
};

/** One request; answers the parsed JSON body. Errors other than `allow` ones throw. */
function* api(method, path, body, allow = () => false) {
  const url = /^https?:/.test(path) ? path : settings.serverUrl + path;
  const { status, text } = yield { request: { method, url, body } };
  let json;
  try { json = JSON.parse(text); } catch (e) { json = undefined; }
  if (status >= 400 && !allow(status, json)) {
    const what = json?.message || json?.error || String(text).slice(0, 200);
    throw serverError(`${method} ${path} failed with ${status}: ${what}`);
  }
  if (json === null || typeof json !== "object") {
    throw protocolError(`${method} ${path}: the answer is not a JSON object: ${String(text).slice(0, 200)}`);
  }
  return json;
}

function unreachable(request, error) {
  return serverError(`Failed to contact breakpoint server at ${settings.serverUrl} `
    + `(${request.method} ${request.url}): ${error && error.message || error}. Is cideldill-server `
    + "running, and does this page's Content-Security-Policy (connect-src) allow it?");
}

async function performAsync(effect) {
  if (effect.request) {
    const { method, url, body } = effect.request;
    let response;
    try {
      response = await fetch(url, {
        method,
        headers: body ? { "Content-Type": "application/json" } : {},
        body: body ? JSON.stringify(body) : undefined,
        signal: globalThis.AbortSignal?.timeout?.(settings.requestTimeoutMs),
        cache: "no-store",
      });
    } catch (e) {
      throw unreachable(effect.request, e);
    }
    // A stand-in for fetch (tests) may answer only {ok, json()}.
    const status = typeof response.status === "number" ? response.status : response.ok === false ? 500 : 200;
    const text = typeof response.text === "function" ? await response.text() : JSON.stringify(await response.json());
    return { status, text };
  }
  if (effect.sleep !== undefined) return new Promise((resolve) => setTimeout(resolve, effect.sleep));
  // effect.run: a thunk whose value (awaited when it is a promise) or error is the outcome.
  return attempt(() => {
    const value = effect.run();
    if (!effect.timeoutMs || typeof value?.then !== "function") return value;
    return Promise.race([value, new Promise((_, reject) => setTimeout(
      () => reject(failure("TimeoutError", "evaluation timed out")), effect.timeoutMs))]);
  });
}

function performSync(effect) {
  if (effect.request) {
    const { method, url, body } = effect.request;
    try {
      const xhr = new XMLHttpRequest();
      xhr.open(method, url, false);
      if (body) xhr.setRequestHeader("Content-Type", "application/json");
      xhr.send(body ? JSON.stringify(body) : null);
      if (xhr.status === 0) throw new Error("no answer");
      return { status: xhr.status, text: xhr.responseText };
    } catch (e) {
      throw unreachable(effect.request, e);
    }
  }
  if (effect.sleep !== undefined) {
    // Nothing can block a page's thread but work: spin until the time is up.
    for (const until = Date.now() + effect.sleep; Date.now() < until;);
    return undefined;
  }
  try { return { value: effect.run() }; } catch (error) { return { error }; } // never awaited
}

/** Runs a flow to its end, performing its effects; answers its value (a promise of it when
 * not `sync`). A failed effect is thrown into the flow, where it was asked for. */
function run(flow, sync) {
  let state = flow.next();
  const fed = (outcome) => (state = "error" in outcome ? flow.throw(outcome.error) : flow.next(outcome.value));
  if (sync) {
    for (; !state.done; fed(attempt(() => performSync(state.value))));
    return state.value;
  }
  return (async () => {
    for (; !state.done; fed(await attempt(() => performAsync(state.value))));
    return state.value;
  })();
}

/** `{value}` or `{error}` of a thunk (a promise of it when the thunk answers a thenable). */
function attempt(thunk) {
  try {
    const value = thunk();
    if (typeof value?.then !== "function") return { value };
    return Promise.resolve(value).then((v) => ({ value: v }), (error) => ({ error }));
  } catch (error) {
    return { error };
  }
}

// ---------------------------------------------------------------------------------------
// Registration (§0, §2.2, §2.3). Functions are registered, never given a breakpoint: a
// person sets breakpoints (web UI, REST, MCP), and the server's default behaviour applies
// only to functions that have one.

/** Functions a `replace` action may name: wrapped functions and registered replacements. */
const localFunctions = new Map();
const replacements = new Map();
/** Names registered with this server (once per name and page load). */
const registered = new Set();

/** The parameter list of a function's source, e.g. "(a, b = 1)", or null. */
function signatureOf(fn) {
  let src;
  try { src = Function.prototype.toString.call(fn); } catch (e) { return null; }
  if (src.includes("[native code]")) return null;
  const arrow = /^(?:async\s*)?([\w$]+)\s*=>/.exec(src);
  if (arrow) return `(${arrow[1]})`;
  const start = src.indexOf("(");
  for (let i = start, depth = 0; start >= 0 && i < src.length; i++) {
    if ("([{".includes(src[i])) depth++;
    else if (")]}".includes(src[i]) && --depth === 0) {
      const sig = `(${src.slice(start + 1, i).replace(/\s+/g, " ").trim()})`;
      return sig.length <= 300 ? sig : null;
    }
  }
  return null;
}

/** Registers `name` with the server, so that the web UI offers it for a breakpoint. */
function* register(name, fn) {
  if (registered.has(name)) return;
  const signature = signatureOf(fn);
  yield* api("POST", "/api/functions", {
    ...identity(), function_name: name, signature, function_client_ref: clientRef(fn),
    function_serialization_format: "json",
    function_metadata: {
      summary: `<function ${fn.name || name}>`, object_name: name, arity: fn.length, page_url: page.url,
    },
  });
  registered.add(name);
}

/** Registers in the background (wrapping never blocks); a failure is retried at the call. */
function registerSoon(name, fn) {
  if (settings.enabled && !registered.has(name)) run(register(name, fn), false).catch(() => {});
}

// ---------------------------------------------------------------------------------------
// The REPL (§2.7, §2.8): expressions are evaluated in the page with the paused call's
// parameters bound by name, `$args` (its arguments) and `$this` (its object).

/** The top-level pieces of a parameter list, split at commas outside brackets and strings. */
function splitParams(list) {
  const parts = [];
  let depth = 0, quote = null, from = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (quote) {
      if (c === "\\") i++;
      else if (c === quote) quote = null;
    } else if (c === "'" || c === '"' || c === "`") quote = c;
    else if ("([{".includes(c)) depth++;
    else if (")]}".includes(c)) depth--;
    else if (c === "," && depth === 0) {
      parts.push(list.slice(from, i));
      from = i + 1;
    }
  }
  parts.push(list.slice(from));
  return parts;
}

/** The call's bindings: its parameters' names (from the function's source) and values; a
 * rest parameter gets the remaining arguments. Destructured parameters are left out. */
function parameterBindings(fn, args) {
  const names = [], values = [];
  const sig = typeof fn === "function" ? signatureOf(fn) : null;
  if (!sig) return { names, values };
  const parts = splitParams(sig.slice(1, -1));
  for (let i = 0; i < parts.length; i++) {
    let part = parts[i].trim();
    const rest = part.startsWith("...");
    if (rest) part = part.slice(3).trim();
    part = part.split("=")[0].trim();
    if (/^[A-Za-z_$][\w$]*$/.test(part) && !["$args", "$this", "expr"].includes(part) && !names.includes(part)) {
      names.push(part);
      values.push(rest ? args.slice(i) : args[i]);
    }
    if (rest) break;
  }
  return { names, values };
}

/** Evaluates `expr` (an expression or statements: eval's completion value) in the scope of
 * the paused call. A page whose Content-Security-Policy forbids eval gets its EvalError. */
function evaluate(expr, ctx) {
  const args = Array.isArray(ctx.args) ? ctx.args : [];
  const { names, values } = parameterBindings(ctx.paramSource, args);
  const text = String(expr || "");
  let fn;
  try {
    fn = new Function("$args", "$this", "expr", ...names, "return eval(expr);");
  } catch (e) {
    return new Function("$args", "$this", "expr", "return eval(expr);")(args, ctx.self, text);
  }
  return fn(args, ctx.self, text, ...values);
}

/** Answers every REPL evaluation queued for the pause, one after another, then returns. */
function* drainRepl(pauseId, ctx) {
  const answered = new Set();
  for (;;) {
    const queued = yield* api("GET", `/api/poll-repl/${encodeURIComponent(pauseId)}`, undefined, () => true);
    if (!queued.eval_id || answered.has(queued.eval_id)) return;
    answered.add(queued.eval_id);
    // Our addition: a promise is awaited (up to replTimeoutMs) and its value is the result.
    const outcome = yield { run: () => evaluate(queued.expr, ctx), timeoutMs: settings.replTimeoutMs };
    const { eval_id, session_id } = queued;
    const body = { ...identity(), eval_id, session_id, pause_id: queued.pause_id || pauseId };
    if ("error" in outcome) {
      const e = outcome.error;
      body.error = { name: e?.name || "Error", message: String(e?.message ?? e) };
    } else {
      const { text, cid } = encode(outcome.value === undefined ? null : outcome.value);
      Object.assign(body, { result_cid: cid, result_data: text, result_serialization_format: "json" });
    }
    // Not fatal (a session closed meanwhile answers 409).
    yield* api("POST", "/api/call/repl-result", body, () => true);
  }
}

// ---------------------------------------------------------------------------------------
// One call through the protocol (§0, §2.5 to §2.11)

/** The call's stack from a captured Error, innermost first, without this module's frames. */
function stackOf(error) {
  const frames = [];
  for (const line of String(error.stack || "").split("\n")) {
    // V8: "    at fn (url:line:col)"; Firefox and Safari: "fn@url:line:col".
    const m = /^\s*at (?:(.*?) \()?(.+?):(\d+):(\d+)\)?$/.exec(line) || /^(.*?)@(.+?):(\d+):(\d+)$/.exec(line);
    if (m && m[2] !== MODULE_URL && frames.length < 30) {
      frames.push({ filename: m[2], lineno: Number(m[3]), function: m[1] || "<anonymous>", code_context: null });
    }
  }
  return frames;
}

/** Follows poll actions until a final one (§2.6). Before each poll every queued REPL
 * evaluation of the pause is answered. */
function* follow(action, ctx) {
  while (action && action.action === "poll") {
    const url = String(action.poll_url || "");
    const pauseId = url.includes("/api/poll/") ? url.split("/").pop() : null;
    for (;;) {
      if (pauseId) yield* drainRepl(pauseId, ctx);
      const polled = yield* api("GET", url);
      if (polled.status === "ready") {
        action = polled.action || {};
        break;
      }
      if (polled.status !== "waiting") throw protocolError(`Malformed poll response ${JSON.stringify(polled)}`);
      yield { sleep: Number(action.poll_interval_ms) || 100 };
    }
  }
  return action;
}

/** The function a `replace` action names, checked for the same arity. */
function replacementFor(name, original) {
  const fn = replacements.get(name) || localFunctions.get(name);
  if (typeof fn !== "function") throw protocolError(`Unknown replacement function: ${name}`);
  if (fn.length !== original.length) {
    throw protocolError(`Replacement ${name} takes ${fn.length} arguments, the function called ${original.length}`);
  }
  return fn;
}

/** What the final action makes of the call: a thunk to run, or an outcome (§2.11). */
function decide(action, call) {
  const runWith = (fn, args) => ({ run: () => fn.apply(call.self, args) });
  try {
    switch (action.action ?? "continue") {
      case "continue": return runWith(call.fn, call.args);
      case "modify": {
        const args = (action.modified_args || []).map(decodeItem);
        if (action.modified_kwargs && Object.keys(action.modified_kwargs).length) {
          throw protocolError("JavaScript functions take no keyword arguments (modified_kwargs)");
        }
        call.args = args;
        return runWith(call.fn, args);
      }
      case "skip": {
        // JSON text first (what the server encodes for this client), then the raw value.
        const format = action.fake_result_serialization_format ?? "json";
        const value = typeof action.fake_result_data === "string" && format === "json"
          ? JSON.parse(action.fake_result_data)
          : "fake_result" in action ? action.fake_result : sentValues.get(action.fake_result_cid) ?? null;
        return { outcome: { value } };
      }
      case "raise": {
        const error = new Error(action.exception_message ?? "");
        error.name = action.exception_type || "Error";
        return { outcome: { error } };
      }
      case "replace": return runWith(replacementFor(action.function_name, call.fn), call.args);
      default: throw protocolError(`Unknown action: ${action.action}`);
    }
  } catch (error) {
    return { outcome: { error } };
  }
}

/** What a call sends as its target: the function's name and arity. */
const targetOf = (call) => ({ name: call.name, length: call.paramSource.length });

/** The whole call: start, pause, run, complete, after-pause; answers its value or throws. */
function* callFlow(call) {
  yield* register(call.name, call.paramSource);
  const texts = new Map();
  const start = {
    ...identity(),
    method_name: call.name,
    target: makeItem(targetOf(call), texts, true),
    args: call.args.map((a) => makeItem(a, texts)),
    kwargs: {},
    call_site: { timestamp: now(), page_url: page.url, stack_trace: stackOf(call.stack) },
    call_type: call.type,
    signature: signatureOf(call.paramSource),
    preferred_format: "json",
  };
  const missing = (status, body) => status === 400 && body?.error === "cid_not_found";
  let answer = yield* api("POST", "/api/call/start", start, missing);
  if (missing(400, answer)) {
    // The server lost data this page sent before (a restart): resend it once (§2.5).
    const cids = new Set(answer.missing_cids || []);
    for (const item of [start.target, ...start.args]) if (cids.has(item.cid)) item.data = texts.get(item.cid);
    answer = yield* api("POST", "/api/call/start", start);
  }
  if (!answer.call_id) throw protocolError(`Malformed call start answer ${JSON.stringify(answer)}`);
  // The REPL's scope: the arguments the call was made with, its object, its parameters.
  const ctx = { args: call.args, self: call.replThis, paramSource: call.paramSource };
  const action = yield* follow(answer, ctx);
  const plan = decide(action, call);
  const outcome = plan.outcome || (yield { run: plan.run });

  const done = { ...identity(), call_id: answer.call_id, timestamp: now() };
  if ("error" in outcome) {
    const e = outcome.error;
    const item = makeItem(e, new Map(), true);
    Object.assign(done, {
      status: "exception", exception_type: e?.name || typeof e, exception_message: String(e?.message ?? e),
      exception_traceback: e?.stack ? String(e.stack) : null, exception_cid: item.cid,
      exception_client_ref: item.client_ref, exception_data: item.data, exception_serialization_format: "json",
    });
  } else {
    const item = makeItem(outcome.value, new Map(), true);
    Object.assign(done, {
      status: "success", result_cid: item.cid, result_client_ref: item.client_ref,
      result_data: item.data, result_serialization_format: "json",
    });
  }
  const completed = yield* api("POST", "/api/call/complete", done);
  if (completed.action) {
    // The after-pause: the function has run, so only continue is possible (§2.9).
    const after = yield* follow(completed, ctx);
    if (after.action && after.action !== "continue") {
      throw protocolError(`Unsupported post-completion action: ${after.action}`);
    }
  } else if (completed.status !== "ok") {
    throw protocolError(`Malformed call complete answer: ${JSON.stringify(completed)}`);
  }
  if ("error" in outcome) throw outcome.error;
  return outcome.value;
}

/** A call that is only recorded (a wrapped object's conversions: toString, valueOf, toJSON,
 * Symbol.toPrimitive, ...): start and complete in the background, the action ignored. */
function* logFlow(name, fn, args, result) {
  const texts = new Map();
  const started = yield* api("POST", "/api/call/start", {
    ...identity(),
    method_name: name,
    target: makeItem({ name, length: fn.length }, texts, true),
    args: args.map((a) => makeItem(a, texts)),
    kwargs: {},
    call_site: { timestamp: now(), page_url: page.url, stack_trace: [] },
    preferred_format: "json",
  });
  if (!started.call_id) return;
  const item = makeItem(result, texts, true);
  yield* api("POST", "/api/call/complete", {
    ...identity(), call_id: started.call_id, timestamp: now(), status: "success",
    result_cid: item.cid, result_client_ref: item.client_ref, result_data: item.data, result_serialization_format: "json",
  });
}

// ---------------------------------------------------------------------------------------
// The public functions

/** Calls `fn` through the protocol, or straight through when debugging is off. */
function invoke(call, sync) {
  const direct = () => call.fn.apply(call.self, call.args);
  if (!settings.enabled) return sync ? direct() : new Promise((resolve) => resolve(direct()));
  return run(callFlow(call), sync);
}

/**
 * A wrapper of `fn` whose calls go through the debugger under `name` (async: it answers a
 * Promise; sync: it blocks). `self`, when given, is the object the function is a method of.
 * Our addition: the original client returns a function given to withDebug unchanged.
 */
function wrapFunction(fn, name, sync, self) {
  localFunctions.set(name, fn);
  registerSoon(name, fn);
  const wrapper = function (...args) {
    const me = self === undefined ? this : self;
    const call = {
      fn, name, args, self: me, paramSource: fn, replThis: me === undefined ? null : me,
      type: "proxy", stack: new Error(),
    };
    return invoke(call, sync);
  };
  Object.defineProperty(wrapper, "name", { value: name });
  Object.defineProperty(wrapper, "length", { value: fn.length });
  return wrapper;
}

/** Properties whose calls convert the object (to a string, a number, JSON, an iterator):
 * the async proxy runs them as the object's own, synchronously, and only records them. */
const LOG_ONLY = new Set(["valueOf", "toString", "toJSON", Symbol.toPrimitive, Symbol.iterator,
  Symbol.asyncIterator, Symbol.hasInstance, Symbol.toStringTag]);

/** A method's sync stand-in that runs it on `obj` and records the call when debugging is on. */
function logOnly(fn, name, obj) {
  return function (...args) {
    const result = fn.apply(obj, args);
    if (settings.enabled) run(logFlow(name, fn, args, result), false).catch(() => {});
    return result;
  };
}

/** A proxy of `obj` whose methods go through the debugger, named `alias.method` (or
 * `method` without an alias); its other properties are the object's own. */
function wrapObject(obj, alias, sync) {
  const wrappers = new Map();
  return new Proxy(obj, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      let w = wrappers.get(prop);
      if (!w || w.fn !== value) {
        const name = alias ? `${alias}.${String(prop)}` : String(prop);
        const wrapper = !sync && LOG_ONLY.has(prop) ? logOnly(value, name, target) : wrapFunction(value, name, sync, target);
        wrappers.set(prop, (w = { fn: value, wrapper }));
      }
      return w.wrapper;
    },
  });
}

/** A function is wrapped, an object proxied; anything else is answered as it is. */
function wrapTarget(target, alias, sync) {
  if (typeof target === "function") {
    return wrapFunction(target, alias ? String(alias) : target.name || "anonymous", sync);
  }
  if (target !== null && typeof target === "object") return wrapObject(target, alias, sync);
  return target;
}

function debugWith(subject, sync) {
  // Our addition: "on" and "off" in any case.
  if (typeof subject === "string" && /^(on|off)$/i.test(subject)) {
    settings.enabled = subject.toUpperCase() === "ON";
    if (settings.enabled) {
      page.url = pageUrl();
      page.startTime = timeOrigin();
      for (const [name, fn] of replacements) registerSoon(name, fn);
    }
    return { enabled: settings.enabled, serverUrl: settings.serverUrl };
  }
  if (Array.isArray(subject) && subject.length === 2) return wrapTarget(subject[1], subject[0], sync);
  return wrapTarget(subject, null, sync);
}

function callOnce(sync, parts) {
  const [first, ...rest] = parts;
  let name = null, fn = first, args = rest;
  if (typeof first === "string") {
    if (typeof rest[0] !== "function") throw new TypeError("debugCall with alias requires a function");
    [name, fn, ...args] = parts;
  } else if (typeof first !== "function") {
    throw new TypeError("debugCall expects a function or (alias, function, ...)");
  }
  const alias = name || fn.name || "anonymous";
  localFunctions.set(alias, fn);
  const call = { fn, name: alias, args, self: undefined, paramSource: fn, replThis: null, type: "inline", stack: new Error() };
  return invoke(call, sync);
}

/** "ON" / "OFF" turn debugging on and off (answering {enabled, serverUrl}); an object, or
 * [alias, object], is answered as a proxy whose methods are debugged (async: they answer
 * Promises); a function, or [alias, function], as a debugged wrapper; anything else (null,
 * undefined, ...) as it is. */
export function withDebug(subject) { return debugWith(subject, false); }
/** Like withDebug, but calls block the page until the server lets them go. */
export function withDebugSync(subject) { return debugWith(subject, true); }
/** One call of `fn` through the debugger: debugCall([alias,] fn, ...args), a Promise. */
export function debugCall(...parts) {
  try {
    return callOnce(false, parts);
  } catch (e) {
    return Promise.reject(e);
  }
}
/** Like debugCall, blocking; answers the value. */
export function debugCallSync(...parts) { return callOnce(true, parts); }

/** Settings: serverUrl, requestTimeoutMs, replTimeoutMs. Answers the current settings. */
export function configure(options = {}) {
  if (options.serverUrl !== undefined) {
    const url = new URL(String(options.serverUrl));
    if (!/^https?:$/.test(url.protocol)) throw new TypeError(`serverUrl must be http(s): ${options.serverUrl}`);
    settings.serverUrl = url.href.replace(/\/+$/, "");
  }
  for (const key of ["requestTimeoutMs", "replTimeoutMs"]) {
    if (options[key] !== undefined) settings[key] = Number(options[key]);
  }
  return { ...settings };
}

/** Makes `fn` available to `replace` actions under `name` (our addition: it is also
 * registered with the server, so that the web UI offers it). */
export function registerReplacement(name, fn) {
  if (typeof name !== "string" || typeof fn !== "function") {
    throw new TypeError("registerReplacement takes a name and a function");
  }
  replacements.set(name, fn);
  registerSoon(name, fn);
}

export const cideldill = { withDebug, withDebugSync, debugCall, debugCallSync, configure, registerReplacement, sha512Hex };
if (typeof window !== "undefined") window.cideldill = cideldill;
export default cideldill;
