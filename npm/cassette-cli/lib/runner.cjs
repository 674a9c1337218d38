// The test-worker side of the vitest and jest helpers: applies the proxy's environment with a
// scope of this worker's own (`<url>/_scope/ID/...` base URLs, one proxy for every worker),
// names each test to the proxy's control endpoint, and throws in afterEach when the proxy saw a
// miss, an error or a refused bypass during the test, with the failure text the proxy renders
// (this file renders none: it prints the tally's `failure` lines as they are).
//
// CommonJS because jest runs setupFilesAfterEnv inside its own module system, which loads
// CommonJS from node_modules untransformed in every jest configuration; vitest's ESM setup
// file imports it.
"use strict";

const { randomBytes } = require("node:crypto");
const { execFileSync } = require("node:child_process");
const http = require("node:http");
const { join } = require("node:path");
const env = require("./env.cjs");

// The variable a worker keeps its scope in: a worker that runs several test files in one
// module graph (vitest with `isolate: false`) keeps one scope, so clients built by an earlier
// file still count. The preload reads it from node:http (env.SCOPE_SLOT), which a jest test
// file's sandbox shares with the worker's own realm (their `process.env`s are copies).
const { SCOPE_ENV, SCOPE_SLOT } = env;

// The preload, and the variable naming the channel it sends every request to.
const REGISTER = join(__dirname, "register.js");
const { CHANNEL_ENV } = env;

/** @typedef {{ url: string, base?: string, mode: string, env: Record<string, string>, unset: string[], control: { token: string, scopes: string, prefix: string }, channel?: string | null, in_process?: Record<string, string | null> | null }} Ready */

/**
 * The variables that put the preload into a Node process and name the channel (what
 * `cassette exec` sets): a test's child processes inherit them.
 * @param {string} channel
 * @param {string | undefined} options NODE_OPTIONS as it is
 * @returns {Record<string, string>}
 */
function inProcessEnv(channel, options) {
  const flag = `--import ${JSON.stringify(REGISTER)}`;
  const nodeOptions = options?.includes(REGISTER) ? options : [options, flag].filter(Boolean).join(" ");
  return { [CHANNEL_ENV]: channel, NODE_OPTIONS: nodeOptions };
}

/**
 * Whether a Node of `version` (`process.versions.node`, `18.20.8`) takes `--import` in
 * NODE_OPTIONS (added in 19.0.0 and 18.18.0): an older one refuses to start with it, so its
 * workers get no preload (and the helpers no channel), as `cassette exec` does.
 * @param {string} version
 */
function takesImport(version) {
  const [major, minor] = version.split(".").map(Number);
  return major > 18 || (major === 18 && minor >= 18);
}

/**
 * The environment with every base URL naming `scope`; proxy variables unchanged.
 * @param {{ url: string, base?: string, env: Record<string, string>, control?: { prefix: string } | null }} ready
 * @param {string} scope
 */
function scopedEnv(ready, scope) {
  // The base URLs begin with `base`: the URL followed by the run secret's path.
  const own = `${ready.base ?? ready.url}/`;
  const prefix = `${ready.control?.prefix ?? `${ready.base ?? ready.url}/_scope`}/${scope}/`;
  /** @type {Record<string, string>} */
  const out = {};
  for (const [name, value] of Object.entries(ready.env)) {
    out[name] = value.startsWith(own) ? prefix + value.slice(own.length) : value;
  }
  return out;
}

/**
 * What a tally holds that fails a test, one line each, as the proxy rendered it.
 * @param {{ failure?: string[] }} tally
 */
function problems(tally) {
  return tally.failure ?? [];
}

/**
 * Whether `url` is for this machine or a host NO_PROXY lets clients reach directly.
 * @param {URL} url
 * @param {string[]} noProxy
 */
function direct(url, noProxy) {
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || host === "::1" || /^127\./.test(host)) return true;
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return noProxy.some((entry) => {
    if (entry === "*") return true;
    const [name, onlyPort] = entry.startsWith("[") ? [entry, undefined] : entry.split(":");
    if (onlyPort && onlyPort !== port) return false;
    const bare = name.replace(/^\*/, "");
    return bare.startsWith(".") ? host.endsWith(bare) : host === bare;
  });
}

/**
 * Begins `scope` on the proxy before anything can use it (the proxy refuses requests in a
 * scope its runner never began), synchronously: a client the test file calls when it is
 * imported, before any hook runs, must find its scope begun. A child `node` does the PUT.
 * @param {Ready} ready
 * @param {string} scope
 */
function beginNow(ready, scope) {
  const script = `fetch(process.argv[1], { method: "PUT", headers: { "x-cassette-control": process.env.CASSETTE_CONTROL_TOKEN } })
    .then(async (r) => { if (!r.ok) { console.error(r.status + " " + (await r.text())); process.exit(1); } })
    .catch((e) => { console.error(String(e)); process.exit(1); });`;
  const url = `${ready.control.scopes}/${scope}`;
  try {
    execFileSync(process.execPath, ["-e", script, url], {
      env: { ...process.env, CASSETTE_CONTROL_TOKEN: ready.control.token },
      stdio: ["ignore", "ignore", "pipe"],
    });
  } catch (error) {
    const why = /** @type {{ stderr?: Buffer }} */ (error).stderr?.toString().trim() || String(error);
    throw new Error(`cassette: the proxy at ${ready.url} refused to begin scope ${scope} (PUT ${url}): ${why}`);
  }
}

/**
 * Hooks one test file (or one worker) up to the proxy.
 * @param {{ ready: Ready, beforeEach: Function, afterEach: Function, testName: (context: unknown) => string }} options
 */
function attach({ ready, beforeEach, afterEach, testName }) {
  const fetch = globalThis.fetch;
  const scope = process.env[SCOPE_ENV] || `w${process.pid}-${randomBytes(4).toString("hex")}`;
  for (const name of ready.unset ?? []) delete process.env[name];
  beginNow(ready, scope);
  const set = { ...scopedEnv(ready, scope), [SCOPE_ENV]: scope };
  Object.assign(process.env, set);
  const channel = ready.channel ?? null;
  const preload = channel ? inProcessEnv(channel, process.env.NODE_OPTIONS) : {};
  Object.assign(process.env, preload);
  // Under jest this `process.env` is the sandbox's copy, which child_process never reads: a
  // child started without an `env` is given these variables from it (with the channel or not).
  const names = [...Object.keys(set), ...Object.keys(preload), env.IN_PROCESS_URLS_ENV];
  env.applied(process.env, names, ready.unset ?? []);
  env.wrapChildProcess();
  if (channel) {
    /** @type {any} */ (http)[SCOPE_SLOT] = scope;
    // The base URLs name the vendors once the preload catches this worker's requests (now,
    // under jest, whose workers start with it; under vitest, the preload's import does it).
    if (ready.in_process) process.env[env.IN_PROCESS_URLS_ENV] = JSON.stringify(ready.in_process);
    env.inProcess(process.env);
  }

  /** @param {string} method @param {unknown} [body] */
  async function control(method, body) {
    const url = `${ready.control.scopes}/${scope}`;
    const answer = await fetch(url, {
      method,
      headers: { "x-cassette-control": ready.control.token, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await answer.text();
    if (!answer.ok) throw new Error(`cassette: the proxy at ${ready.url} refused ${method} ${url}: ${answer.status} ${text}`);
    return JSON.parse(text);
  }

  // Node 20 ignores HTTP(S)_PROXY, so a client with the vendor's URL hard-coded would reach
  // the network: in replay such a fetch is refused here, and fails its test. Clients that
  // honour the proxy variables (Node 22.21+, 24 with NODE_USE_ENV_PROXY) reach this first too.
  /** @type {Map<string, number>} */
  const refused = new Map();
  // With the channel the preload catches such requests (and replays them); this is the way
  // without it (Windows, CASSETTE_IN_PROCESS=off).
  if (!channel && ready.mode === "replay" && typeof fetch === "function") {
    const noProxy = (ready.env.NO_PROXY ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
    globalThis.fetch = async function cassetteFetch(input, init) {
      const href = typeof input === "string" ? input : input instanceof URL ? input.href : input?.url;
      let url;
      try {
        url = new URL(href);
      } catch {
        return fetch(input, init);
      }
      if (!direct(url, noProxy)) {
        const host = `${url.hostname}:${url.port || (url.protocol === "https:" ? 443 : 80)}`;
        refused.set(host, (refused.get(host) ?? 0) + 1);
        // What the client is told; the test's failure text comes from the proxy, which is
        // handed these refusals when the test ends.
        const why = `cassette: a request to ${host} bypassed the base URL and was refused (replay never connects anywhere)`;
        throw new TypeError("fetch failed", { cause: new Error(why) });
      }
      return fetch(input, init);
    };
  }

  let first = true;
  let name = "";
  beforeEach(async (/** @type {unknown} */ context) => {
    name = testName(context);
    if (first) {
      first = false;
      // Requests made when the file was imported (a client called at module level).
      const early = problems(await control("GET"));
      if (early.length) throw new Error(`cassette: while its module was imported, before ${name}:\n${early.join("\n")}`);
    }
    refused.clear();
    await control("PUT", { test: name });
  });
  afterEach(async () => {
    const bypasses = [...refused].map(([host, requests]) => ({ host, requests }));
    refused.clear();
    const lines = problems(await control("DELETE", bypasses.length ? { refused: bypasses } : undefined));
    if (lines.length) {
      const error = new Error(`cassette: ${name}\n${lines.join("\n")}`);
      error.name = "CassetteMiss";
      // The explanation is the whole story: a stack into this file would only hide it.
      error.stack = `${error.name}: ${error.message}`;
      throw error;
    }
  });
}

module.exports = { attach, inProcessEnv, problems, scopedEnv, takesImport, REGISTER, SCOPE_ENV };
