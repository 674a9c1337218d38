// The package's postinstall step: where it is safe, puts the platform binary itself in place of
// bin/cassette.js, so that node_modules/.bin/cassette (a symlink to that file) starts the binary
// directly instead of starting Node to start it (Node's own start-up is most of the shim's
// cost). esbuild's installer does the same. Nothing is downloaded: the binary is the one npm
// installed with the platform package. Everywhere else the JavaScript shim stays, and works as
// it always did; this step never fails an install.
import { execFileSync } from "node:child_process";
import { accessSync, chmodSync, constants, copyFileSync, linkSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { binaryPath } from "./lib/binary.js";

const here = dirname(fileURLToPath(import.meta.url));
const shim = join(here, "bin", "cassette.js");
const { version } = JSON.parse(readFileSync(join(here, "package.json"), "utf8"));

/**
 * Why the shim must stay here, or undefined when it may be replaced.
 * @param {NodeJS.ProcessEnv} env
 * @returns {string | undefined}
 */
function reasonToKeepTheShim(env) {
  if (!here.split(sep).includes("node_modules")) {
    // `npm install` in a checkout of this package runs its own postinstall: keep the source.
    return "not installed as a dependency";
  }
  if (process.platform === "win32") {
    // npm runs a bin entry there through a .cmd wrapper that calls `node` on the file.
    return "Windows runs it through node";
  }
  if (process.versions.pnp) {
    return "Yarn Plug'n'Play cannot run a binary from its archives";
  }
  // npm links .bin entries as symlinks to the file, whatever it holds. pnpm writes shell
  // scripts that may already say `node bin/cassette.js`; Yarn may run this step again from
  // another platform over the same node_modules (esbuild keeps its shim under Yarn for that).
  const agent = env.npm_config_user_agent ?? "";
  if (!/^npm\//.test(agent)) {
    return `installed by ${agent.split(" ")[0] || "an unknown installer"}, not npm`;
  }
  return undefined;
}

/** @param {string} message */
function keep(message) {
  // npm shows a dependency's postinstall output only with --foreground-scripts.
  console.error(`cassette-cli: keeping the JavaScript shim: ${message}`);
}

function main() {
  const reason = reasonToKeepTheShim(process.env);
  if (reason) {
    keep(reason);
    return;
  }
  let binary;
  try {
    // The installed platform package's binary, never $CASSETTE_BINARY: that one is read each
    // time the command runs (by the binary itself once it stands here).
    binary = binaryPath({ env: {} });
    accessSync(shim, constants.W_OK);
    accessSync(dirname(shim), constants.W_OK);
  } catch (error) {
    keep(error instanceof Error ? error.message : String(error));
    return;
  }
  const [a, b] = [statSync(binary), statSync(shim)];
  if (a.ino === b.ino && a.dev === b.dev) {
    return; // already done (`npm rebuild` runs this again)
  }
  // The binary must run here, and be this version, before anything is replaced.
  try {
    const said = execFileSync(binary, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 }).trim();
    if (said !== `cassette ${version}`) {
      keep(`${binary} says ${JSON.stringify(said)}, expected "cassette ${version}"`);
      return;
    }
  } catch (error) {
    keep(`${binary} does not run here: ${error instanceof Error ? error.message : error}`);
    return;
  }
  const source = readFileSync(shim);
  const temp = join(dirname(shim), `.cassette.js.${process.pid}.tmp`);
  try {
    try {
      linkSync(binary, temp); // no second copy of the binary on disk
    } catch {
      copyFileSync(binary, temp); // another file system, or links refused
      chmodSync(temp, 0o755);
    }
    renameSync(temp, shim); // atomic: the command is the shim or the binary, never half of one
    execFileSync(shim, ["--version"], { stdio: "ignore", timeout: 30_000 });
  } catch (error) {
    // Put the shim back (also atomically) if the binary was moved in but does not run there.
    try {
      writeFileSync(temp, source, { mode: 0o755 });
      renameSync(temp, shim);
    } catch {
      // The shim was never replaced (the rename failed), or cannot be restored: nothing more to do.
    }
    keep(error instanceof Error ? error.message : String(error));
  } finally {
    try {
      unlinkSync(temp);
    } catch {
      // Already renamed into place.
    }
  }
}

try {
  main();
} catch (error) {
  keep(error instanceof Error ? error.message : String(error));
}
