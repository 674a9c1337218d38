const app = require("../app.cjs");

describe("openai", () => {
  for (const n of [0, 1, 2]) {
    test(`plain ${n}`, async () => {
      expect(await app.ask(`plain-${n}`, `Question ${n}: where is my refund?`)).toBeTruthy();
    });
  }
  test("node:https hard-coded", async () => {
    expect(await app.nodeHttps("https-hardcoded", "Over node:https, where is my parcel?")).toBeTruthy();
  });
  test("child process", async () => {
    expect(await app.child("child", "From a child process, where is my order?")).toBeTruthy();
  });
  test("base URLs", () => {
    const seen = app.seen();
    const vendor = "https://api.openai.com/v1";
    expect([seen.test, seen.client, seen.node]).toEqual([vendor, vendor, vendor]);
    expect(seen.shell.startsWith(`${seen.proxy}/`)).toBe(true);
  });
});
