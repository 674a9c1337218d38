// jest setupFilesAfterEnv entry: before each test file is imported, applies the proxy's
// environment with this worker's scope, names every test to the proxy, and fails a test that
// missed. CommonJS: jest loads setup files from node_modules untransformed.
"use strict";

const { relative } = require("node:path");
const runner = require("../runner.cjs");

const text = process.env.CASSETTE_RUNNER;
if (text) {
  runner.attach({
    ready: JSON.parse(text),
    // Hooks of no parameter: jest takes a hook with one for a callback-style hook.
    beforeEach: (/** @type {Function} */ hook) => globalThis.beforeEach(() => hook()),
    afterEach: (/** @type {Function} */ hook) => globalThis.afterEach(() => hook()),
    testName: () => {
      const state = globalThis.expect.getState();
      return `${relative(process.cwd(), state.testPath ?? "?")} > ${state.currentTestName ?? "?"}`;
    },
  });
}
