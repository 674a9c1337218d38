#!/usr/bin/env node
// The `cassette` command of the npm package: runs the platform binary with the same arguments
// and stdio, passes signals sent to this process on to it, and exits as it exited (a replay
// miss's 2 included).
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { fileURLToPath } from "node:url";
import { binaryPath } from "../lib/binary.js";

// cassette's status for errors that are not a test verdict (a miss, a missing file).
const EXIT_ERROR = 2;

let binary;
try {
  binary = binaryPath();
} catch (error) {
  console.error(`cassette: ${error instanceof Error ? error.message : error}`);
  process.exit(EXIT_ERROR);
}

// `cassette exec` imports this preload into the command's Node processes (NODE_OPTIONS), which
// then send every request over the proxy's channel (lib/register.js).
const register = fileURLToPath(new URL("../lib/register.js", import.meta.url));
const env = { ...process.env, CASSETTE_NODE_REGISTER: register };
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", env });

// A terminal's Ctrl-C reaches the child anyway (same process group; the Windows console
// likewise): this process must only outlive it. A signal sent to this process alone (a CI
// runner's SIGTERM, a test harness's SIGINT) is passed on.
const forwarded = process.platform === "win32" ? ["SIGINT"] : ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (/** @type {NodeJS.Signals} */ signal) => {
  if (process.platform !== "win32") {
    child.kill(signal);
  }
};
for (const signal of forwarded) {
  process.on(signal, forward);
}

child.on("error", (error) => {
  console.error(`cassette: cannot run ${binary}: ${error.message}`);
  process.exit(EXIT_ERROR);
});

child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so the caller sees what it would have seen without the shim.
    for (const name of forwarded) {
      process.removeListener(name, forward);
    }
    process.kill(process.pid, signal);
    // Signals this process cannot die of (or not at once): the shell's convention.
    setTimeout(() => process.exit(128 + (constants.signals[signal] ?? 0)), 100);
    return;
  }
  process.exit(code ?? EXIT_ERROR);
});
