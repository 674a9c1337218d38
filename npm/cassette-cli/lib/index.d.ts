export { BINARY_ENV, BinaryNotFoundError, BinaryPathOptions, PLATFORM_PACKAGES, binaryPath } from "./binary.js";
