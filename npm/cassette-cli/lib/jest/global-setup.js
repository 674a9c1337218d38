// jest globalSetup: starts one cassette proxy for the run. The workers learn its address,
// mode, environment and control token from CASSETTE_RUNNER (jest's workers inherit the
// environment globalSetup leaves), read by ./setup.cjs. Nothing starts under `cassette exec`
// or with CASSETTE_MODE=off.
import { startCassette } from "../start.js";
import runner from "../runner.cjs";

export const RUNNER_ENV = "CASSETTE_RUNNER";

export default async function globalSetup() {
  if (process.env.CASSETTE_PROXY_URL || process.env.CASSETTE_MODE === "off") return;
  const cassette = await startCassette();
  /** @type {any} */ (globalThis).__cassetteCli = cassette;
  process.env[RUNNER_ENV] = JSON.stringify({
    url: cassette.url,
    base: cassette.base,
    mode: cassette.mode,
    env: cassette.env,
    unset: cassette.unset,
    control: cassette.control,
    channel: cassette.channel,
    in_process: cassette.inProcess,
  });
  if (cassette.channel) {
    // jest's workers start after this with the preload in NODE_OPTIONS; a run in band runs
    // its tests in this process, whose fetch and node:http the import below catches. A test
    // file's sandbox uses this realm's fetch and node:http, so both ways every request is seen.
    Object.assign(process.env, runner.inProcessEnv(cassette.channel, process.env.NODE_OPTIONS));
    await import("../register.js");
  }
}
