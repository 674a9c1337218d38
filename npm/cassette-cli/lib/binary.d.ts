/** The variable that, set to a binary's path, wins over the installed platform package. */
export declare const BINARY_ENV: "CASSETTE_BINARY";

/** The platform packages by `${process.platform}-${process.arch}`, in the order they are tried. */
export declare const PLATFORM_PACKAGES: Readonly<Record<string, readonly string[]>>;

/** Thrown when no binary can be found. */
export declare class BinaryNotFoundError extends Error {
  readonly code: "CASSETTE_BINARY_NOT_FOUND";
  constructor(message: string);
}

export interface BinaryPathOptions {
  /** Defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Defaults to `process.platform`. */
  platform?: string;
  /** Defaults to `process.arch`. */
  arch?: string;
}

/**
 * The path of the cassette binary to run: `$CASSETTE_BINARY` if set, else the binary of the
 * platform package installed with cassette-cli. Throws `BinaryNotFoundError` when there is none.
 */
export declare function binaryPath(options?: BinaryPathOptions): string;
