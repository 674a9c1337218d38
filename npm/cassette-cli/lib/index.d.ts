export { BINARY_ENV, BinaryNotFoundError, BinaryPathOptions, PLATFORM_PACKAGES, binaryPath } from "./binary.js";
export {
  Expectation,
  GradeAnswer,
  GradeError,
  GradeSession,
  GradeSessionOptions,
  JudgeContextOptions,
  JudgeOptions,
  ReplayMiss,
  ToolCall,
  ToolCalls,
  expect,
  expectAnswer,
  getDefaultSession,
  onMiss,
  setDefaultSession,
  toolCalls,
} from "./expect.js";
export { Cassette, CassetteError, Control, Mode, ReadyLine, StartOptions, scopedEnv, startCassette } from "./start.js";
