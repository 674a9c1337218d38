// startCassette(): a `cassette proxy --ready json --control` child for a test runner, read once
// it prints its one JSON ready line. The binary does the work (keys, replay, misses and their
// explanation, counts per test); this starts it, hands back what the tests need and stops it.
import { spawn } from "node:child_process";
import { binaryPath } from "./binary.js";
import runner from "./runner.cjs";

/** The longest the proxy may take to print its ready line. */
const READY_TIMEOUT_MS = 30_000;
/** How much of the proxy's stderr is kept (its miss log can be long). */
const LOG_LIMIT = 256 * 1024;

/** Thrown when the proxy cannot be started or its control endpoint refuses. */
export class CassetteError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "CassetteError";
  }
}

/**
 * Starts the proxy on a free loopback port.
 * @param {import("./start.d.ts").StartOptions} [options]
 * @returns {Promise<import("./start.d.ts").Cassette>}
 */
export async function startCassette(options = {}) {
  const env = options.env ?? process.env;
  const binary = options.binary ?? binaryPath({ env });
  // --run-secret: only this run's clients (whose base URLs carry the secret) may send requests
  // upstream through it, not another program of the machine.
  const args = ["proxy", "--listen", "127.0.0.1:0", "--ready", "json", "--control", "--run-secret"];
  // The proxy ends with this process, however it dies (kill -9 runs no "exit" handler).
  if (process.platform !== "win32") args.push("--runner-pid", String(process.pid));
  // The channel the preload (./register.js) hands every request of a worker to, with its
  // original URL; a Unix socket, so not on Windows, where the base URLs alone lead in, nor for
  // a Node whose workers could not start with the preload in NODE_OPTIONS.
  const inProcess = process.platform !== "win32" && env.CASSETTE_IN_PROCESS !== "off" && runner.takesImport(process.versions.node);
  if (inProcess) args.push("--channel");
  if (options.mode) args.push("--mode", options.mode);
  args.push(...(options.args ?? []));
  const child = spawn(binary, args, { cwd: options.cwd ?? process.cwd(), env, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  let closed = false;
  child.once("close", () => {
    closed = true;
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (/** @type {string} */ text) => {
    log = (log + text).slice(-LOG_LIMIT);
  });
  // A runner that dies without its teardown must not leave the proxy behind.
  const killOnExit = () => child.kill("SIGTERM");
  process.once("exit", killOnExit);

  /** @type {import("./start.d.ts").ReadyLine} */
  const ready = await new Promise((resolve, reject) => {
    let buffered = "";
    const fail = (/** @type {string} */ why) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new CassetteError(`${why}\n${log.trim()}`));
    };
    const timer = setTimeout(() => fail(`cassette proxy printed no ready line in ${READY_TIMEOUT_MS / 1000} s`), READY_TIMEOUT_MS);
    child.on("error", (error) => fail(`cannot start ${binary}: ${error.message}`));
    child.on("exit", (code) => fail(`\`${binary} ${args.join(" ")}\` exited with status ${code} before it was ready:`));
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (/** @type {string} */ text) => {
      buffered += text;
      const end = buffered.indexOf("\n");
      if (end < 0) return;
      clearTimeout(timer);
      child.removeAllListeners("exit");
      try {
        resolve(JSON.parse(buffered.slice(0, end)));
      } catch (error) {
        fail(`cassette proxy's ready line is not JSON: ${JSON.stringify(buffered.slice(0, end))}`);
      }
    });
  });
  child.stdout.resume();

  // "close", not "exit": the proxy's last words (its `stopped;` summary) may still be in the
  // pipe when the process has exited, and the teardowns print them.
  const exited = new Promise((resolve) => {
    if (closed) resolve(child.exitCode);
    else child.once("close", (code) => resolve(code));
  });
  return {
    url: ready.url,
    base: ready.base ?? ready.url,
    pid: ready.pid,
    mode: ready.mode,
    env: ready.env,
    unset: ready.unset,
    control: ready.control,
    channel: ready.channel ?? null,
    inProcess: ready.in_process ?? null,
    log: () => log,
    async stop() {
      process.removeListener("exit", killOnExit);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const status = /** @type {number | null} */ (await exited);
      return { status, log };
    },
  };
}

/**
 * The environment with every base URL naming scope `scope` (`<base>/_scope/ID/...`); the proxy
 * variables stay as they are (a forward proxy is addressed by host, not by path).
 * @type {(ready: { url: string, base?: string, env: Record<string, string>, control?: { prefix: string } | null }, scope: string) => Record<string, string>}
 */
export const scopedEnv = runner.scopedEnv;
