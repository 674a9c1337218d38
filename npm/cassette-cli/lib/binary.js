// Where the cassette binary is: $CASSETTE_BINARY, else the platform package npm installed with
// this one (an optional dependency per platform, each holding only the binary: biome's and
// esbuild's layout). Used by bin/cassette.js; reusable by anything that starts cassette itself.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);

/** The variable that, set to a binary's path, wins over the installed platform package. */
export const BINARY_ENV = "CASSETTE_BINARY";

/**
 * The platform packages by `${process.platform}-${process.arch}`; on Linux the glibc one, then
 * the musl one. npm 10+, pnpm and yarn install only the one whose `libc` field matches; older
 * npm installs both, and then the libc of the running Node decides.
 * @type {Readonly<Record<string, readonly string[]>>}
 */
export const PLATFORM_PACKAGES = Object.freeze({
  "linux-x64": Object.freeze(["cassette-cli-linux-x64", "cassette-cli-linux-x64-musl"]),
  "linux-arm64": Object.freeze(["cassette-cli-linux-arm64", "cassette-cli-linux-arm64-musl"]),
  "darwin-x64": Object.freeze(["cassette-cli-darwin-x64"]),
  "darwin-arm64": Object.freeze(["cassette-cli-darwin-arm64"]),
  "win32-x64": Object.freeze(["cassette-cli-win32-x64"]),
});

/** Thrown when no binary can be found; `code` is "CASSETTE_BINARY_NOT_FOUND". */
export class BinaryNotFoundError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "BinaryNotFoundError";
    this.code = "CASSETTE_BINARY_NOT_FOUND";
  }
}

/**
 * The path of the cassette binary to run.
 * @param {{ env?: NodeJS.ProcessEnv, platform?: string, arch?: string }} [options]
 * @returns {string}
 */
export function binaryPath(options = {}) {
  const env = options.env ?? process.env;
  const platform = options.platform ?? process.platform;
  const arch = options.arch ?? process.arch;

  const override = env[BINARY_ENV];
  if (override) {
    // A wrong override is an error, not a reason to run some other binary silently.
    if (!existsSync(override)) {
      throw new BinaryNotFoundError(`${BINARY_ENV} is set to ${JSON.stringify(override)}, which does not exist`);
    }
    return override;
  }

  const packages = PLATFORM_PACKAGES[`${platform}-${arch}`];
  if (!packages) {
    throw new BinaryNotFoundError(
      `cassette-cli has no binary for ${platform}-${arch}; ` +
        `build one (cargo install --path .) and set ${BINARY_ENV} to it`,
    );
  }
  const exe = platform === "win32" ? "cassette.exe" : "cassette";
  const installed = packages.flatMap((name) => {
    try {
      return [{ name, dir: dirname(require.resolve(`${name}/package.json`)) }];
    } catch {
      return [];
    }
  });
  if (installed.length > 0) {
    const musl = installed.length > 1 && isMusl();
    const chosen = installed.find(({ name }) => name.endsWith("-musl") === musl) ?? installed[0];
    const path = join(chosen.dir, "bin", exe);
    if (!existsSync(path)) {
      throw new BinaryNotFoundError(`${chosen.name} is installed but has no binary at ${path}; reinstall cassette-cli`);
    }
    return path;
  }
  throw new BinaryNotFoundError(
    `the platform package of cassette-cli for ${platform}-${arch} (${packages.join(" or ")}) is not installed; ` +
      "reinstall without --omit=optional or --no-optional (optional dependencies carry the binary), " +
      `or set ${BINARY_ENV} to a cassette binary`,
  );
}

/** Whether this Node runs on musl: a glibc build reports the glibc it runs on. */
function isMusl() {
  const report = /** @type {{ header?: { glibcVersionRuntime?: string } }} */ (process.report?.getReport() ?? {});
  return !report.header?.glibcVersionRuntime;
}
