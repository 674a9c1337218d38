// The Vercel AI SDK (`ai` + `@ai-sdk/openai` + `@ai-sdk/anthropic`) configured the way an
// application under `cassette exec` is: only through OPENAI_BASE_URL, ANTHROPIC_BASE_URL and the
// placeholder keys. ANTHROPIC_BASE_URL is `<proxy>/anthropic`, without the `/v1` this provider
// expects, as exec sets it for the official SDKs. Runs each scenario named on the command line
// and prints one JSON object: what an application would look at, per scenario.
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { openai } from "@ai-sdk/openai";
import { anthropic } from "@ai-sdk/anthropic";

// Warnings go to the console, and stdout is this program's answer.
globalThis.AI_SDK_LOG_WARNINGS = false;

const object = (properties) =>
  jsonSchema({ type: "object", properties, additionalProperties: false });
const string = { type: "string" };

// The tools the recorded answers call, each with a local implementation.
const tools = {
  lookup_order: tool({
    description: "Look an order up",
    inputSchema: object({ order_id: string }),
    execute: async ({ order_id }) => `order ${order_id} shipped on Monday`,
  }),
  get_weather: tool({
    description: "Current weather in a city",
    inputSchema: object({ city: string, unit: string }),
    execute: async ({ city }) => `sunny in ${city}`,
  }),
  get_time: tool({
    description: "Local time in a timezone",
    inputSchema: object({ timezone: string }),
    execute: async ({ timezone }) => `noon in ${timezone}`,
  }),
  send_email: tool({
    description: "Send an email",
    inputSchema: jsonSchema({ type: "object" }),
    execute: async ({ to }) => `sent to ${to}`,
  }),
};

const calls = (toolCalls) => toolCalls.map((c) => [c.toolCallId, c.toolName, c.input]);

const generated = (r) => ({
  text: r.text,
  toolCalls: calls(r.toolCalls),
  finishReason: r.finishReason,
  totalTokens: r.usage.totalTokens ?? null,
});

async function streamed(options) {
  const r = streamText({ ...options, maxRetries: 0, onError: ({ error }) => { throw error; } });
  let text = "";
  for await (const piece of r.textStream) text += piece;
  return {
    text,
    toolCalls: calls(await r.toolCalls),
    finishReason: await r.finishReason,
    totalTokens: (await r.usage).totalTokens ?? null,
  };
}

/// A tool loop of two steps: the model asks for tools, the SDK runs them and sends the results
/// back with the model's call ids.
async function loop(model, prompt) {
  const r = await generateText({ model, prompt, tools, stopWhen: stepCountIs(2), maxRetries: 0 });
  return {
    steps: r.steps.map((s) => ({
      toolCalls: calls(s.toolCalls),
      toolResults: s.toolResults.map((t) => [t.toolCallId, t.output]),
      finishReason: s.finishReason,
    })),
  };
}

const scenarios = {
  "openai-generate": async () =>
    generated(await generateText({ model: openai.chat("gpt-4o-mini"), prompt: "Where is my refund for order A-1042?", maxRetries: 0 })),
  "openai-stream": () =>
    streamed({ model: openai.chat("gpt-4o"), prompt: "Weather and time in Paris?", tools }),
  "openai-tools": () => loop(openai.chat("gpt-4o-mini"), "Where is order A-1042?"),
  "openai-responses-stream": () =>
    streamed({ model: openai.responses("gpt-4.1-mini"), prompt: "How long do refunds take? Answer in French." }),
  "anthropic-generate": async () =>
    generated(await generateText({ model: anthropic("claude-3-5-haiku-latest"), prompt: "Email Ana about her refund.", tools, maxRetries: 0 })),
  "anthropic-stream": () =>
    streamed({ model: anthropic("claude-sonnet-4-5"), prompt: "What's the weather in Paris?", tools }),
  "anthropic-tools": () => loop(anthropic("claude-3-5-haiku-latest"), "Email Ana about her refund."),
};

const out = {};
for (const name of process.argv.slice(2)) {
  try {
    out[name] = await scenarios[name]();
  } catch (e) {
    out[name] = { error: e.name, status: e.statusCode ?? e.lastError?.statusCode ?? null, message: String(e.message).slice(0, 300) };
  }
}
console.log(JSON.stringify(out));
