// vitest is the user's dependency, not cassette-cli's, and is not installed here: the check of
// npm/cassette-cli/lib/vitest/setup.js reads these declarations of the three functions it takes
// from vitest instead (as vitest declares them, narrowed to how the file calls them).
declare module "vitest" {
  export function beforeEach(hook: (context: unknown) => unknown): void;
  export function afterEach(hook: (context: unknown) => unknown): void;
  export function inject(key: string): unknown;
}
