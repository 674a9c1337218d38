/** jest globalTeardown: stops the proxy globalSetup started. */
export default function globalTeardown(): Promise<void>;
