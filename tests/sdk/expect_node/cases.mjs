// The test bodies the vitest and jest suites share (answers.vitest.test.mjs, answers.jest.test.mjs):
// a user's tests asserting on meaning with cassette-cli's expect() and toolCalls(), run by
// tests/sdk/test_expect.py under `cassette exec` against a fake vendor and a fake judge.
// EXPECT_CRITERION changes one judged expectation, which must then miss.
import assert from "node:assert/strict";
import { ReplayMiss, expectAnswer as expect, toolCalls } from "../../../npm/cassette-cli/lib/index.js";

const APOLOGY = "I'm sorry for the delay: your refund of 40 euros was sent on 3 March.";
const CONTEXT = "Refunds of 40 euros were sent on 3 March to every customer who asked.";

async function post(base, path, body, headers = {}) {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  assert.equal(response.status, 200, await response.clone().text());
  return response.json();
}

const chat = () =>
  post(process.env.OPENAI_BASE_URL, "/chat/completions", {
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "Where is my refund?" }],
  }, { authorization: `Bearer ${process.env.OPENAI_API_KEY}` });

const message = () =>
  post(process.env.ANTHROPIC_BASE_URL, "/v1/messages", {
    model: "claude-3-5-haiku-latest",
    max_tokens: 200,
    messages: [{ role: "user", content: "Where is my refund?" }],
  }, { "x-api-key": process.env.ANTHROPIC_API_KEY, "anthropic-version": "2023-06-01" });

/** @param {Promise<unknown>} promise @param {string} message */
async function failsWith(promise, message) {
  await assert.rejects(promise, (error) => {
    assert.equal(error.name, "AssertionError");
    assert.equal(error.message, message);
    return true;
  });
}

export const cases = [
  ["text graders on a chat completion", async () => {
    const reply = await chat();
    await expect(reply).contains("refund");
    await expect(reply).regex("\\d–\\d business days");
    await expect(reply).length({ maxWords: 12 });
    await failsWith(expect(reply).contains("Voucher"), 'contains failed: text does not contain "voucher"');
    await failsWith(expect(reply).length({ maxWords: 5 }), "length failed: 10 words, more than 5");
  }],
  ["intent, tone and grounding by the judge", async () => {
    await expect(APOLOGY).containsIntent("apology");
    await expect("Your refund was sent.").doesNotContainIntent("apology");
    await expect("I understand how frustrating this wait is.").toneIs("empathetic");
    await expect(APOLOGY).isGroundedIn(CONTEXT);
    await failsWith(
      expect("Your refund was sent.").containsIntent("apology"),
      'contains_intent failed: criterion "The text expresses this intent: apology": 0 of 1 votes passed\n' +
        '  vote 1 of 1: fail: FAIL. The text never says "sorry".',
    );
  }],
  ["votes split and a majority decides", async () => {
    await expect("Hello there.").judge(process.env.EXPECT_CRITERION ?? "[split] The reply is polite");
    await failsWith(
      expect("Hello there.").judge("[split] The reply is polite", { votes: 2 }),
      'judge failed: criterion "[split] The reply is polite": 1 of 2 votes passed\n' +
        "  vote 1 of 2: pass: PASS. Vote 1 is odd.\n" +
        "  vote 2 of 2: fail: FAIL. Vote 2 is even.",
    );
  }],
  ["tool calls of OpenAI and Anthropic read alike", async () => {
    const [openai, anthropic] = [await chat(), await message()];
    await toolCalls(openai).calledWith("lookup_order", { order_id: "A-1042" });
    await toolCalls(openai).calledOnce("lookup_order");
    await toolCalls(openai).notCalled("send_email");
    await toolCalls(anthropic).calledWith("send_email", { to: "ana@example.com", retries: 2, cc: [] });
    assert.deepEqual(
      (await toolCalls(openai).calls()).map((c) => [c.name, c.arguments]),
      [["lookup_order", { order_id: "A-1042" }]],
    );
    await failsWith(
      toolCalls(openai).calledWith("lookup_order", { order_id: "B-7" }),
      'tool_called failed: expected lookup_order with arguments including {"order_id":"B-7"} called at least ' +
        'once, found 0 matching call(s) among [lookup_order({"order_id":"A-1042"})]',
    );
  }],
  ["a miss is not an assertion", async () => {
    assert.ok(!(new ReplayMiss("x") instanceof assert.AssertionError));
  }],
];
