// The same vitest suite with cassette-cli's vitest helper in front instead of `cassette exec`
// (tests/sdk/test_expect.py): its proxy serves the SDK calls and the judge's votes alike.
export default {
  test: {
    globalSetup: ["../../../npm/cassette-cli/lib/vitest/global-setup.js"],
    setupFiles: ["../../../npm/cassette-cli/lib/vitest/setup.js"],
    include: ["answers.vitest.test.mjs"],
  },
};
