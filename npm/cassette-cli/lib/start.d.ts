/** The modes of cassette. */
export type Mode = "replay" | "record" | "auto" | "off";

export interface StartOptions {
  /** The mode; by default CASSETTE_MODE, else cassette.toml's, else replay (as the CLI decides). */
  mode?: Mode;
  /** More `cassette proxy` arguments (`--store`, `--config`, ...). */
  args?: string[];
  /** Where cassette.toml is looked for from (the CLI's working directory); `process.cwd()`. */
  cwd?: string;
  /** The proxy's environment (its route keys when recording); `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** The binary; by default `binaryPath()`. */
  binary?: string;
}

/** The control endpoint of the proxy, for test runners (docs/proxy.md). */
export interface Control {
  /** Sent as `x-cassette-control`. */
  token: string;
  /** `<url>/_cassette/scopes`: PUT, GET and DELETE `/ID`. */
  scopes: string;
  /** `<base>/_scope`: base URLs under `<prefix>/ID/` belong to scope ID. */
  prefix: string;
}

/** The ready line of `cassette proxy --ready json --control`. */
export interface ReadyLine {
  url: string;
  /** What every base URL begins with: `url` followed by the run secret's path (`/_run/SECRET`). */
  base: string;
  pid: number;
  mode: Mode;
  /** The variables a test process needs (what `cassette exec` sets). */
  env: Record<string, string>;
  /** The variables a test process must not have. */
  unset: string[];
  control: Control;
  /** The channel's Unix socket (`--channel`), where there is one. */
  channel?: string | null;
  /**
   * With the channel: the base-URL variables as a process catching in process sees them, each
   * naming where its clients go without cassette (`OPENAI_BASE_URL`: `https://api.openai.com/v1`),
   * and the proxy variables as the user had them (`null`: unset).
   */
  in_process?: Record<string, string | null> | null;
}

export interface Cassette {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  /**
   * `http://127.0.0.1:PORT/_run/SECRET`: what a client built with an explicit base URL begins
   * with (recording serves only requests that carry the run secret). Never print it.
   */
  base: string;
  pid: number;
  mode: Mode;
  env: Record<string, string>;
  unset: string[];
  control: Control;
  /**
   * The channel's Unix socket, which the preload `cassette-cli/register` sends every request of
   * a process to (`CASSETTE_CHANNEL`); `null` on Windows or with CASSETTE_IN_PROCESS=off.
   */
  channel: string | null;
  /**
   * The ready line's `in_process` (the base-URL variables naming the vendors), which the runner
   * helpers give their workers once the preload catches them; `null` without the channel.
   */
  inProcess: Record<string, string | null> | null;
  /** What the proxy wrote on stderr so far (the last 256 KiB). */
  log(): string;
  /** SIGTERM; resolves once it has stopped (requests in flight finished, counters printed). */
  stop(): Promise<{ status: number | null; log: string }>;
}

/** Thrown when the proxy cannot be started. */
export declare class CassetteError extends Error {
  constructor(message: string);
}

/** Starts `cassette proxy` on a free loopback port and resolves once it answers. */
export declare function startCassette(options?: StartOptions): Promise<Cassette>;

/** `env` with every base URL naming scope `scope` (`<url>/_scope/ID/...`). */
export declare function scopedEnv(
  ready: { url: string; base?: string; env: Record<string, string>; control?: { prefix: string } | null },
  scope: string,
): Record<string, string>;
