// The base-URL variables of a Node process whose requests the preload catches (./register.js):
// its code sees where each client goes without cassette (OPENAI_BASE_URL is
// https://api.openai.com/v1, or the user's own endpoint the proxy took as the route's
// upstream), so a client following them sends the vendor's URL, the channel routes that host,
// and a test that snapshots a request URL or a client's base URL sees what it would see
// without cassette. The process's children get the proxy's URLs instead: a child the preload
// does not catch (curl, a Python without cassette-cli) must still reach the proxy, never the
// vendor. The Python package's _base_urls.py keeps the same contract. Under jest, whose test
// file's sandbox keeps a copy of `process.env` that child_process never reads, a child started
// without an `env` is also given cassette's variables as the sandbox holds them.
//
// CommonJS, beside ./runner.cjs, which jest loads in a test file's sandbox.
"use strict";

const http = require("node:http");

/** What `cassette exec` and the runner helpers give a process that may catch in process (JSON). */
const IN_PROCESS_URLS_ENV = "CASSETTE_IN_PROCESS_URLS";

/**
 * On node:http, which a jest test file's sandbox shares with its worker's realm (their
 * `process.env`s are copies): whether the preload catches this process's fetch, and each
 * variable's in-process value with the proxy's URL a child gets instead.
 */
const CAUGHT = Symbol.for("cassette-cli.caught");
const VALUES = Symbol.for("cassette-cli.base-urls");
const SANDBOX = Symbol.for("cassette-cli.sandbox");

/** @returns {Map<string, { value: string, child: string }>} */
function values() {
  const slot = /** @type {any} */ (http);
  slot[VALUES] ??= new Map();
  return slot[VALUES];
}

/** Marks the process's requests as caught (the preload installed its dispatcher). */
function caught() {
  /** @type {any} */ (http)[CAUGHT] = true;
}

/**
 * Has `env` (a `process.env`) name the in-process values of CASSETTE_IN_PROCESS_URLS in each
 * variable that holds one of the proxy's URLs; a value the process was given otherwise is its
 * own. Nothing unless the preload catches this process's requests: a client following the
 * vendor's URL would otherwise reach the vendor.
 * @param {Record<string, string | undefined>} env
 */
function inProcess(env) {
  if (!(/** @type {any} */ (http)[CAUGHT])) return;
  const text = env[IN_PROCESS_URLS_ENV];
  const proxy = env.CASSETTE_PROXY_URL;
  if (!text || !proxy) return;
  let urls;
  try {
    urls = JSON.parse(text);
  } catch {
    return; // not ours to judge: the proxy's URLs stay
  }
  if (!urls || typeof urls !== "object" || Array.isArray(urls)) return;
  for (const [name, value] of Object.entries(urls)) {
    const current = env[name];
    if (typeof value !== "string" || typeof current !== "string" || !current.startsWith(`${proxy}/`)) continue;
    values().set(name, { value, child: current });
    env[name] = value;
  }
}

/**
 * The environment a child process gets from `env`: the proxy's URL in each variable holding
 * its in-process value (`env` itself when there is none), so a variable the caller set to
 * something else keeps it.
 * @param {Record<string, string | undefined>} env
 * @returns {Record<string, string | undefined>}
 */
function forChild(env) {
  /** @type {Record<string, string>} */
  const changed = {};
  for (const [name, { value, child }] of values()) {
    if (env[name] === value) changed[name] = child;
  }
  return Object.keys(changed).length ? { ...env, ...changed } : env;
}

/**
 * Names `env` (a runner helper's `process.env`) as where cassette's variables `names` live and
 * `unset` are removed, for the children of a test whose `process.env` is not the one
 * child_process reads (a jest sandbox's).
 * @param {Record<string, string | undefined>} env
 * @param {string[]} names
 * @param {string[]} unset
 */
function applied(env, names, unset) {
  /** @type {any} */ (http)[SANDBOX] = { env, names, unset };
}

/**
 * The environment a child started without one inherits: this realm's `process.env`, with
 * cassette's variables as the helper's `process.env` holds them when that is another object
 * (jest), so a child of a jest test reaches the proxy with placeholder keys as one of a vitest
 * test does; else `process.env` itself.
 * @returns {Record<string, string | undefined>}
 */
function inherited() {
  /** @type {{ env: Record<string, string | undefined>, names: string[], unset: string[] } | undefined} */
  const sandbox = /** @type {any} */ (http)[SANDBOX];
  if (!sandbox || sandbox.env === process.env) return process.env;
  const env = { ...process.env };
  for (const name of sandbox.unset) delete env[name];
  for (const name of sandbox.names) {
    const value = sandbox.env[name];
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

module.exports = { IN_PROCESS_URLS_ENV, applied, caught, forChild, inProcess, inherited };
