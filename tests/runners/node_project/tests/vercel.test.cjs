const app = require("../app.cjs");

test("generate", async () => {
  expect(await app.vercel("vercel-generate", "Write a haiku about tests.")).toBeTruthy();
});

test("swallowed stream", async () => {
  expect(await app.vercelSwallowed("vercel-swallowed", "Summarise the ticket.")).toBeTruthy();
});

// With the channel and without it: a child inherits cassette's variables (under jest too,
// whose sandbox's process.env child_process never reads).
test("child environment", () => {
  const [url, key] = app.inherited().split(" ");
  // The proxy's URL and the placeholder key, never the vendor's URL with the real key.
  expect([url.startsWith(`${process.env.CASSETTE_PROXY_URL}/`), key]).toEqual([true, "cassette"]);
});

test("hard-coded vendor URL", async () => {
  expect(await app.hardcoded()).toBe("done");
});

(process.env.UNROUTED ? test : test.skip)("unrouted host", async () => {
  expect(await app.unrouted()).toBe("done");
});
