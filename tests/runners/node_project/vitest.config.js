export default {
  test: {
    globalSetup: ["cassette-cli/vitest"],
    setupFiles: ["cassette-cli/vitest/setup"],
    include: ["tests/**/*.test.js"],
  },
};
