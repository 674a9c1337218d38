const app = require("../app.cjs");

test("generate", async () => {
  expect(await app.vercel("vercel-generate", "Write a haiku about tests.")).toBeTruthy();
});

test("swallowed stream", async () => {
  expect(await app.vercelSwallowed("vercel-swallowed", "Summarise the ticket.")).toBeTruthy();
});

test("hard-coded vendor URL", async () => {
  expect(await app.hardcoded()).toBe("done");
});

(process.env.UNROUTED ? test : test.skip)("unrouted host", async () => {
  expect(await app.unrouted()).toBe("done");
});
