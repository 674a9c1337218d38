const app = require("../app.cjs");

test("generate", async () => {
  expect(await app.vercel("vercel-generate", "Write a haiku about tests.")).toBeTruthy();
});

test("swallowed stream", async () => {
  expect(await app.vercelSwallowed("vercel-swallowed", "Summarise the ticket.")).toBeTruthy();
});

(process.env.HARDCODE ? test : test.skip)("hard-coded vendor URL", async () => {
  expect(await app.hardcoded()).toBe("done");
});
