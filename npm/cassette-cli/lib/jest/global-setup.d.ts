/** The variable the workers read the proxy's address, environment and token from. */
export declare const RUNNER_ENV: "CASSETTE_RUNNER";
/** jest globalSetup: starts the proxy. */
export default function globalSetup(): Promise<void>;
