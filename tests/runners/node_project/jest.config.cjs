module.exports = {
  globalSetup: "cassette-cli/jest/global-setup",
  globalTeardown: "cassette-cli/jest/global-teardown",
  setupFilesAfterEnv: ["cassette-cli/jest/setup"],
  testMatch: ["**/tests/**/*.test.cjs"],
  transform: {},
};
