// The cassette-cli package's programmatic entry point. The binary does the work; this exports
// where it is and how to start its proxy for a test runner (cassette-cli/vitest and
// cassette-cli/jest are built on startCassette).
export { BINARY_ENV, BinaryNotFoundError, PLATFORM_PACKAGES, binaryPath } from "./binary.js";
export { CassetteError, scopedEnv, startCassette } from "./start.js";
