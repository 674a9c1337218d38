// The cassette-cli package's programmatic entry point. The binary does the work; this exports
// where it is (helpers that start it for test runners go beside it).
export { BINARY_ENV, BinaryNotFoundError, PLATFORM_PACKAGES, binaryPath } from "./binary.js";
