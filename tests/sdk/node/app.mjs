// A small Node program that uses the official OpenAI client with no configuration of its own:
// `cassette exec` provides OPENAI_BASE_URL (and a placeholder key in replay mode).
import OpenAI from "openai";

const [question, mode] = process.argv.slice(2);
const client = new OpenAI();
try {
  if (mode === "stream") {
    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: question }],
      stream: true,
    });
    const calls = {};
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
        calls[call.index] ??= { name: "", arguments: "" };
        calls[call.index].name += call.function?.name ?? "";
        calls[call.index].arguments += call.function?.arguments ?? "";
      }
    }
    console.log(JSON.stringify({ tool_calls: Object.values(calls) }));
  } else {
    const r = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: question }],
    });
    console.log(JSON.stringify({ content: r.choices[0].message.content }));
  }
} catch (e) {
  if (e instanceof OpenAI.ConflictError) {
    console.log(JSON.stringify({ miss: e.error?.key ?? null, message: e.message }));
  } else {
    throw e;
  }
}
