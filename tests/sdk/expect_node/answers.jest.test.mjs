// cassette-cli's expect() and toolCalls() under jest, as native ESM (see cases.mjs).
import { test } from "@jest/globals";
import { cases } from "./cases.mjs";

for (const [name, body] of cases) test(name, body, 30_000);
