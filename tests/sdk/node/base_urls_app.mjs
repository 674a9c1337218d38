// A Node program under `cassette exec` with the preload: what it and its children see in
// OPENAI_BASE_URL (it the vendor's URL, a child it does not catch the proxy's), and one call of
// the openai client built from the environment alone, which records and replays like any.
import { execFileSync, execSync, spawnSync } from "node:child_process";
import OpenAI from "openai";

const shell = 'printf %s "$OPENAI_BASE_URL"';
const client = new OpenAI();
const answer = await client.chat.completions.create({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: process.argv[2] }],
});
console.log(
  JSON.stringify({
    process: process.env.OPENAI_BASE_URL,
    client: client.baseURL,
    proxy: process.env.CASSETTE_PROXY_URL,
    inherited: execSync(shell, { encoding: "utf8" }),
    copied: execFileSync("sh", ["-c", shell], { env: { ...process.env, EXTRA: "1" }, encoding: "utf8" }),
    own: spawnSync("sh", ["-c", shell], { env: { ...process.env, OPENAI_BASE_URL: "https://mine.example/v1" }, encoding: "utf8" }).stdout,
    node: execFileSync(process.execPath, ["-e", "process.stdout.write(process.env.OPENAI_BASE_URL)"], { encoding: "utf8" }),
    content: answer.choices[0].message.content,
  }),
);
