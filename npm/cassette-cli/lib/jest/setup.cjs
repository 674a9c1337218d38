// jest setupFilesAfterEnv entry: before each test file is imported, applies the proxy's
// environment with this worker's scope, names every test to the proxy, and fails a test that
// missed. CommonJS: jest loads setup files from node_modules untransformed.
"use strict";

const { relative } = require("node:path");
const runner = require("../runner.cjs");

/**
 * The globals jest gives a setup file, as far as this file uses them (jest's own types are the
 * user's dependency, not ours).
 * @typedef {{
 *   beforeEach: (hook: () => unknown) => void,
 *   afterEach: (hook: () => unknown) => void,
 *   expect: { getState(): { testPath?: string, currentTestName?: string } },
 * }} JestGlobals
 */
const globals = /** @type {JestGlobals} */ (/** @type {unknown} */ (globalThis));

const text = process.env.CASSETTE_RUNNER;
if (text) {
  runner.attach({
    ready: JSON.parse(text),
    // Hooks of no parameter: jest takes a hook with one for a callback-style hook.
    beforeEach: (/** @type {Function} */ hook) => globals.beforeEach(() => hook()),
    afterEach: (/** @type {Function} */ hook) => globals.afterEach(() => hook()),
    testName: () => {
      const state = globals.expect.getState();
      return `${relative(process.cwd(), state.testPath ?? "?")} > ${state.currentTestName ?? "?"}`;
    },
  });
}
