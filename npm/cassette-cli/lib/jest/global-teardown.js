// jest globalTeardown: stops the proxy globalSetup started and prints its counters.
export default async function globalTeardown() {
  const cassette = /** @type {any} */ (globalThis).__cassetteCli;
  if (!cassette) return;
  delete (/** @type {any} */ (globalThis).__cassetteCli);
  delete process.env.CASSETTE_RUNNER;
  const { log } = await cassette.stop();
  const summary = log.split("\n").filter((/** @type {string} */ line) => line.includes("stopped;") || line.includes("bypassed"));
  if (summary.length) console.log(summary.join("\n"));
}
