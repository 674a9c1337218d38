// A vitest setupFiles entry: it exports nothing.
export {};
