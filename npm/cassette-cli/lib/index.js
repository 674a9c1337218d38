// The cassette-cli package's programmatic entry point. The binary does the work; this exports
// where it is, how to start its proxy for a test runner (cassette-cli/vitest and
// cassette-cli/jest are built on startCassette), and the assertions that ask it to grade
// answers (`cassette grade`).
export { BINARY_ENV, BinaryNotFoundError, PLATFORM_PACKAGES, binaryPath } from "./binary.js";
export {
  Expectation,
  GradeError,
  GradeSession,
  ReplayMiss,
  ToolCalls,
  expect,
  expectAnswer,
  getDefaultSession,
  onMiss,
  setDefaultSession,
  toolCalls,
} from "./expect.js";
export { CassetteError, scopedEnv, startCassette } from "./start.js";
