// cassette-cli's expect() and toolCalls() under vitest (see cases.mjs).
import { test } from "vitest";
import { cases } from "./cases.mjs";

for (const [name, body] of cases) test(name, body, 30_000);
