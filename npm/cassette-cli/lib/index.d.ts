export { BINARY_ENV, BinaryNotFoundError, BinaryPathOptions, PLATFORM_PACKAGES, binaryPath } from "./binary.js";
export { Cassette, CassetteError, Control, Mode, ReadyLine, StartOptions, scopedEnv, startCassette } from "./start.js";
