import type { ReadyLine } from "../start.js";

declare module "vitest" {
  interface ProvidedContext {
    /** What cassette-cli/vitest's globalSetup hands to the workers. */
    cassette: Pick<ReadyLine, "url" | "mode" | "env" | "unset" | "control">;
  }
}

/** vitest globalSetup: starts the proxy and provides `cassette`; returns the teardown. */
export default function setup(project: {
  provide: (key: string, value: unknown) => void;
}): Promise<(() => Promise<void>) | undefined>;
