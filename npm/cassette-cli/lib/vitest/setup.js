// vitest setupFiles entry: before each test file is imported, applies the proxy's environment
// with this worker's scope, catches the worker's requests in process (the preload), names
// every test to the proxy, and fails a test that missed.
import { afterEach, beforeEach, inject } from "vitest";
import runner from "../runner.cjs";

const ready = /** @type {any} */ (inject(/** @type {any} */ ("cassette")));

/** @param {any} task */
function fullName(task) {
  const names = [];
  for (let t = task; t && t.type !== "file" && t.name; t = t.suite) names.unshift(t.name);
  return `${task.file?.name ?? "?"} > ${names.join(" > ")}`;
}

if (ready) {
  runner.attach({ ready, beforeEach, afterEach, testName: (/** @type {any} */ context) => fullName(context.task) });
  // The worker's own fetch and node:http (a thread's are its own): caught by the preload,
  // which attach pointed at the channel. Test files import after this.
  if (ready.channel) await import("../register.js");
}
