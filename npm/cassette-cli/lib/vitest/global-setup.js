// vitest globalSetup: starts one cassette proxy for the run and hands its address, mode,
// environment and control token to the workers through `provide` (read by ./setup.js).
// Nothing starts under `cassette exec` (its proxy is in front already) or with CASSETTE_MODE=off.
import { startCassette } from "../start.js";

/** @param {{ provide: (key: string, value: unknown) => void }} project */
export default async function setup(project) {
  if (process.env.CASSETTE_PROXY_URL || process.env.CASSETTE_MODE === "off") return undefined;
  const cassette = await startCassette();
  project.provide("cassette", {
    url: cassette.url,
    base: cassette.base,
    mode: cassette.mode,
    env: cassette.env,
    unset: cassette.unset,
    control: cassette.control,
    channel: cassette.channel,
    in_process: cassette.inProcess,
  });
  return async () => {
    const { log } = await cassette.stop();
    const summary = log.split("\n").filter((line) => line.includes("stopped;") || line.includes("bypassed"));
    if (summary.length) console.log(summary.join("\n"));
  };
}
