// vitest setupFiles entry: before each test file is imported, applies the proxy's environment
// with this worker's scope, names every test to the proxy, and fails a test that missed.
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
}
