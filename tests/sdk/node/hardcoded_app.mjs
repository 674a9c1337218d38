// A Node program whose clients are hard-coded to the vendor (no variable read): the openai
// client with `baseURL: "https://api.openai.com/v1"`, and a plain node:https client. Only the
// preload (cassette-cli/register, CASSETTE_CHANNEL) brings them to cassette.
import https from "node:https";
import OpenAI from "openai";

const [question, client] = process.argv.slice(2);

if (client === "openai") {
  const openai = new OpenAI({ baseURL: "https://api.openai.com/v1", apiKey: "sk-hardcoded" });
  const r = await openai.chat.completions.create({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: question }],
  });
  console.log(JSON.stringify({ content: r.choices[0].message.content }));
} else if (client === "stream") {
  const openai = new OpenAI({ baseURL: "https://api.openai.com/v1", apiKey: "sk-hardcoded" });
  const stream = await openai.chat.completions.create({
    model: "gpt-4o",
    messages: [{ role: "user", content: question }],
    stream: true,
  });
  const names = [];
  for await (const chunk of stream) {
    for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
      if (call.function?.name) names.push(call.function.name);
    }
  }
  console.log(JSON.stringify({ tool_calls: names }));
} else {
  // node:https to the vendor, or to a host no route serves (`https://example.invalid`).
  const url = client === "https" ? "https://api.openai.com/v1/chat/completions" : client;
  const body = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: question }] });
  const answer = await new Promise((resolve, reject) => {
    const req = https.request(
      url,
      { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer sk-hardcoded" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
  if (answer.status !== 200) {
    console.error(`status ${answer.status}: ${answer.text}`);
    process.exit(1);
  }
  console.log(JSON.stringify({ content: JSON.parse(answer.text).choices[0].message.content }));
}
