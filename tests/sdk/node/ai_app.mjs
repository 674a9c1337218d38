// A small Node program using the Vercel AI SDK (`ai` + `@ai-sdk/openai`) with no configuration
// of its own: `cassette exec` provides OPENAI_BASE_URL and a placeholder key. It prints the
// answer, or the error with its status and how many attempts the SDK made.
import { generateText } from "ai";
import { openai } from "@ai-sdk/openai";

const [question] = process.argv.slice(2);
const started = Date.now();
try {
  const r = await generateText({ model: openai.chat("gpt-4o-mini"), prompt: question });
  console.log(JSON.stringify({ text: r.text }));
} catch (e) {
  // After retries the SDK throws a RetryError holding every attempt's error.
  const attempts = e.errors ?? [e];
  const last = e.lastError ?? e;
  console.log(
    JSON.stringify({
      error: e.name,
      status: last.statusCode ?? null,
      attempts: attempts.length,
      ms: Date.now() - started,
      message: last.message,
    }),
  );
}
