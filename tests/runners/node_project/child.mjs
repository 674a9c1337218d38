// A test's child process (`node child.mjs PROMPT`): asks the vendor at its hard-coded URL, which
// reads no variable, and prints the answer, or "fallback" when it failed: the child swallows
// the error, so only cassette can fail the test that started it.
const [prompt] = process.argv.slice(2);
let out = "fallback";
try {
  const answer = await fetch("https://api.openai.com/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${process.env.OPENAI_API_KEY}` },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: prompt }] }),
  });
  if (answer.ok) out = (await answer.json()).choices[0].message.content;
} catch {
  // swallowed
}
console.log(out);
