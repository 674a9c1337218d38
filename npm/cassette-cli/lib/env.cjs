// What a Node process and its children see in cassette's variables. A process whose requests
// the preload catches (./register.js) sees in its base-URL variables where each client goes
// without cassette (OPENAI_BASE_URL is https://api.openai.com/v1, or the user's own endpoint
// the proxy took as the route's upstream), so a client following them sends the vendor's URL,
// the channel routes that host, and a test that snapshots a request URL or a client's base URL
// sees what it would see without cassette. Its children get the proxy's URLs instead: a child
// the preload does not catch (curl, a Python without cassette-cli) must still reach the proxy,
// never the vendor. The Python package's _base_urls.py keeps the same contract. Under jest,
// whose test file's sandbox keeps a copy of `process.env` that child_process never reads, a
// child started without an `env` is also given cassette's variables as the sandbox holds them,
// with the channel or without it (`wrapChildProcess`, which the preload and the helpers'
// worker side install).
//
// CommonJS, beside ./runner.cjs, which jest loads in a test file's sandbox.
"use strict";

const http = require("node:http");
const childProcess = require("node:child_process");
const { syncBuiltinESMExports } = require("node:module");
const { promisify } = require("node:util");

/** The variables naming the channel and a worker's scope (./register.js, ./runner.cjs). */
const CHANNEL_ENV = "CASSETTE_CHANNEL";
const SCOPE_ENV = "CASSETTE_SCOPE";

/**
 * Where the runner helpers leave the worker's scope: on the node:http module object, which a
 * jest test file's sandbox shares with this realm (its `process.env` is a copy).
 */
const SCOPE_SLOT = Symbol.for("cassette-cli.scope");

/**
 * The scope the running worker's requests belong to, if a runner helper named one (or, in a
 * child of a worker, its preload's CASSETTE_SCOPE).
 * @returns {string | undefined}
 */
function scope() {
  return /** @type {any} */ (http)[SCOPE_SLOT] ?? process.env[SCOPE_ENV] ?? undefined;
}

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
/** On node:child_process, shared by every realm: its functions are wrapped once. */
const WRAPPED = Symbol.for("cassette-cli.child-process");

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

/**
 * Gives the child processes a test starts (spawn, exec, execFile, fork and their Sync forms)
 * the environment `childArgs` says, once per process: the proxy's URL in each base-URL
 * variable that holds its in-process value, cassette's variables under jest, and the worker's
 * scope in CASSETTE_SCOPE, which their own preload reads: their requests are then
 * charged to the test the worker runs, as a Python test's subprocess is charged to the running
 * test. Under jest the worker's scope is not in the environment a child inherits (a test
 * file's sandbox keeps its own copy of `process.env`), so it is added to the child's: only
 * when that environment names the channel (the child is caught) and no scope yet.
 */
function wrapChildProcess() {
  const cp = /** @type {Record<string | symbol, any>} */ (/** @type {unknown} */ (childProcess));
  if (cp[WRAPPED]) return;
  cp[WRAPPED] = true;
  for (const name of ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"]) {
    const original = cp[name];
    if (typeof original !== "function") continue;
    // exec and execSync take (command, options); the others (file, args?, options).
    const argsFirst = !name.startsWith("exec") || name.startsWith("execFile");
    /** @param {Function} fn */
    const scoped = (fn) =>
      /** @this {unknown} @param {any[]} args */
      function (...args) {
        return fn.apply(this, childArgs(args, argsFirst, scope()));
      };
    const wrapped = /** @type {any} */ (scoped(original));
    // util.promisify(exec) and (execFile) use their own promisified form, which calls the
    // original directly: it is wrapped the same way.
    const custom = original[promisify.custom];
    if (typeof custom === "function") wrapped[promisify.custom] = scoped(custom);
    cp[name] = wrapped;
  }
  // `import { spawn } from "node:child_process"` sees the wrapped functions too.
  syncBuiltinESMExports();
}

/**
 * A child_process call's arguments with the environment the child gets: the call's, or what
 * it inherits (`inherited`: under jest, cassette's variables from the test's sandbox), with
 * the proxy's base URLs (`forChild`) and CASSETTE_SCOPE when that environment names the
 * channel and no scope; as they were when that is the one it gets.
 * @param {any[]} args
 * @param {boolean} argsFirst whether an argument array may come before the options
 * @param {string | undefined} id the worker's scope
 */
function childArgs(args, argsFirst, id) {
  const at = argsFirst && Array.isArray(args[1]) ? 2 : 1;
  const given = args[at];
  const hasOptions = given !== null && typeof given === "object" && !Array.isArray(given);
  const options = hasOptions ? given : {};
  const env = options.env ?? inherited();
  let child = forChild(env);
  if (id && env[CHANNEL_ENV] && !env[SCOPE_ENV]) child = { ...child, [SCOPE_ENV]: id };
  // This realm's `process.env` may not be the one child_process reads (this module runs in a
  // jest sandbox when the helpers wrap without the preload): where a helper named one, the
  // child always gets its environment spelled out.
  const named = /** @type {any} */ (http)[SANDBOX] !== undefined;
  if (child === options.env || (child === process.env && !named)) return args;
  const out = [...args];
  const scoped = { ...options, env: child };
  if (hasOptions || given === null || (given === undefined && at < args.length)) {
    out[at] = scoped;
  } else {
    out.splice(at, 0, scoped);
  }
  return out;
}

module.exports = {
  CHANNEL_ENV,
  IN_PROCESS_URLS_ENV,
  SCOPE_ENV,
  SCOPE_SLOT,
  applied,
  caught,
  inProcess,
  scope,
  wrapChildProcess,
};
