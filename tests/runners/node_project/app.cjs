// The application under test: the OpenAI Node SDK and the Vercel AI SDK, built when the module
// is imported, from the environment only (OPENAI_BASE_URL, OPENAI_API_KEY). CHANGE names calls
// whose prompt this run changes; a changed prompt must fail exactly the test that sends it.
"use strict";

const https = require("node:https");
const { execFile, execFileSync } = require("node:child_process");
const { join } = require("node:path");
const { OpenAI } = require("openai");
const { generateText, streamText } = require("ai");
const { openai } = require("@ai-sdk/openai");

const changed = new Set((process.env.CHANGE ?? "").split(",").filter(Boolean));
const client = new OpenAI({ maxRetries: 0 });
const prompt = (name, text) => text + (changed.has(name) ? " Answer in French instead." : "");

async function ask(name, text) {
  const answer = await client.chat.completions.create({
    model: "gpt-4o-mini",
    temperature: 0,
    messages: [{ role: "user", content: prompt(name, text) }],
  });
  return answer.choices[0].message.content;
}

async function vercel(name, text) {
  const answer = await generateText({ model: openai.chat("gpt-4o-mini"), prompt: prompt(name, text), maxRetries: 0 });
  return answer.text;
}

// streamText reports errors to onError and yields empty text: an application that shows a
// fallback then passes its own test, so only cassette can fail it.
async function vercelSwallowed(name, text) {
  const answer = streamText({
    model: openai.chat("gpt-4o-mini"),
    prompt: prompt(name, text),
    maxRetries: 0,
    onError: () => {},
  });
  let out = "";
  for await (const piece of answer.textStream) out += piece;
  return out || "fallback";
}

async function hardcoded() {
  const vendor = new OpenAI({ baseURL: "https://api.openai.com/v1", maxRetries: 0 });
  try {
    await vendor.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hello?" }] });
  } catch {
    // swallowed: only cassette can fail this test
  }
  return "done";
}

// node:https with the vendor's URL written in (no base URL read): caught in process by the
// preload the helpers load, so it records and replays like the SDK calls above.
function nodeHttps(name, text) {
  const body = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: prompt(name, text) }] });
  const headers = { "content-type": "application/json", authorization: `Bearer ${process.env.OPENAI_API_KEY}` };
  return new Promise((resolve, reject) => {
    const req = https.request("https://api.openai.com/v1/chat/completions", { method: "POST", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (piece) => (text += piece));
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text).choices[0].message.content) : reject(new Error(`status ${res.statusCode}: ${text}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

// A child process of the test (`node child.mjs`) sends the request, to the vendor's hard-coded
// URL: charged to the test that started it, its miss swallowed by the child.
function child(name, text) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [join(__dirname, "child.mjs"), prompt(name, text)], (error, stdout) =>
      error ? reject(error) : resolve(stdout.trim()),
    );
  });
}

// A host no route serves, its refusal swallowed: only cassette can fail this test.
async function unrouted() {
  try {
    await fetch("https://unrouted.example/v1/data");
  } catch {
    // swallowed
  }
  return "done";
}

// What the test and its children see in OPENAI_BASE_URL, given the test's environment: with the
// preload catching the worker, the test (and its client built at import) the vendor's URL, a
// shell the proxy's (the preload does not catch it), a Node child the vendor's again.
function seen() {
  const env = { ...process.env, EXTRA: "1" };
  return {
    test: process.env.OPENAI_BASE_URL,
    client: client.baseURL,
    proxy: process.env.CASSETTE_PROXY_URL,
    shell: execFileSync("sh", ["-c", 'printf %s "$OPENAI_BASE_URL"'], { env, encoding: "utf8" }),
    node: execFileSync(process.execPath, ["-e", "process.stdout.write(process.env.OPENAI_BASE_URL)"], { env, encoding: "utf8" }),
  };
}

// What a shell child started without an `env` sees in OPENAI_BASE_URL and OPENAI_API_KEY.
function inherited() {
  return execFileSync("sh", ["-c", 'printf %s "$OPENAI_BASE_URL $OPENAI_API_KEY"'], { encoding: "utf8" });
}

module.exports = { seen, inherited, ask, vercel, vercelSwallowed, hardcoded, nodeHttps, child, unrouted };
