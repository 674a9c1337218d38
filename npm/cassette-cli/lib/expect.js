// Assertions on what an LLM answered, inside vitest or jest tests: the suite runner's graders
// and its recorded judge, through one `cassette grade --jsonl` process per test worker (started
// on the first expectation, with the environment of that moment, and ended when the worker
// exits). The binary does the grading; this file only sends it JSON lines.
//
//   await expect(reply).contains("refund");
//   await expect(reply).containsIntent("apology");
//   await toolCalls(response).calledWith("get_weather", { city: "Paris" });
//
// A failed expectation rejects with an AssertionError naming the grader, the criterion and, for
// a judge, each vote's reply; a judge verdict never recorded (replay) rejects with ReplayMiss.
import { AssertionError } from "node:assert";
import { spawn } from "node:child_process";
import { binaryPath } from "./binary.js";

/** A judge verdict had no recording in replay: record it (CASSETTE_MODE=record or auto). */
export class ReplayMiss extends Error {
  /**
   * @param {string} message
   * @param {object | undefined} miss
   */
  constructor(message, miss) {
    super(message);
    this.name = "ReplayMiss";
    this.code = "CASSETTE_REPLAY_MISS";
    /** The miss as the binary reported it: key, request, summary, explanation. */
    this.miss = miss ?? {};
  }
}

/** The grade process could not grade: a bad expectation, no judge model, a dead process. */
export class GradeError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "GradeError";
    this.code = "CASSETTE_GRADE_ERROR";
  }
}

/** One `cassette grade --jsonl` process, started on first use; answers come back in order. */
export class GradeSession {
  /** @param {{ args?: string[], env?: NodeJS.ProcessEnv, cwd?: string, binary?: string }} [options] */
  constructor(options = {}) {
    this.options = options;
    /** The process, spawned with pipes for stdin and stdout (stderr is the test's own). */
    /** @type {import("node:child_process").ChildProcessByStdio<import("node:stream").Writable, import("node:stream").Readable, null> | null} */
    this.child = null;
    /** @type {{ resolve: (answer: any) => void, reject: (error: Error) => void }[]} */
    this.pending = [];
    this.buffer = "";
  }

  /**
   * Sends one grade request; resolves with its answer.
   * @param {object} request
   * @returns {Promise<any>}
   */
  grade(request) {
    const child = this.started();
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      // A waiting answer keeps the worker alive; an idle process does not.
      this.ref(true);
      child.stdin.write(`${JSON.stringify(request)}\n`);
    });
  }

  /** Ends the process: it exits when its stdin closes. */
  close() {
    if (this.child) {
      this.child.stdin.end();
      this.child = null;
    }
  }

  started() {
    if (this.child) return this.child;
    const binary = this.options.binary ?? binaryPath();
    const child = spawn(binary, ["grade", "--jsonl", ...(this.options.args ?? [])], {
      cwd: this.options.cwd,
      env: this.options.env ?? process.env,
      // Warnings reach the test's own stderr.
      stdio: ["pipe", "pipe", "inherit"],
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => this.read(chunk));
    const fail = (/** @type {Error} */ error) => {
      if (this.child === child) this.child = null;
      for (const { reject } of this.pending.splice(0)) reject(error);
    };
    child.on("error", (error) => fail(new GradeError(`cannot start ${binary}: ${error.message}`)));
    child.on("exit", (code, signal) =>
      fail(
        new GradeError(
          `the cassette grade process ended (${signal ? `signal ${signal}` : `exit status ${code}`}) before it answered; its error is on stderr above`,
        ),
      ),
    );
    // EPIPE on a dead process is reported by "exit" above.
    child.stdin.on("error", () => {});
    this.child = child;
    this.ref(false);
    return child;
  }

  /** @param {string} chunk */
  read(chunk) {
    this.buffer += chunk;
    let newline = this.buffer.indexOf("\n");
    while (newline >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      const waiting = this.pending.shift();
      if (waiting) {
        try {
          waiting.resolve(JSON.parse(line));
        } catch (error) {
          waiting.reject(new GradeError(`cassette grade answered a line that is not JSON: ${line.slice(0, 200)}`));
        }
      }
      newline = this.buffer.indexOf("\n");
    }
    if (this.pending.length === 0) this.ref(false);
  }

  /** @param {boolean} busy */
  ref(busy) {
    const child = this.child;
    if (!child) return;
    for (const handle of [child, child.stdin, child.stdout]) {
      // @ts-ignore: every handle here has ref() and unref()
      if (busy) handle.ref?.();
      // @ts-ignore
      else handle.unref?.();
    }
  }
}

/** @type {GradeSession | null} */
let defaultSession = null;

/** The session expect() and toolCalls() use unless given one: one per process (test worker). */
export function getDefaultSession() {
  defaultSession ??= new GradeSession();
  return defaultSession;
}

/**
 * Replaces the default session (a test runner helper configures its own); returns the old one.
 * @param {GradeSession | null} session
 */
export function setDefaultSession(session) {
  const old = defaultSession;
  defaultSession = session;
  return old;
}

/** @type {((answer: any) => void)[]} */
const missListeners = [];

/**
 * Calls `listener` with every judge miss before it is thrown, so a test runner helper can
 * attribute it to the running test; returns a function that removes the listener.
 * @param {(answer: any) => void} listener
 */
export function onMiss(listener) {
  missListeners.push(listener);
  return () => {
    const at = missListeners.indexOf(listener);
    if (at >= 0) missListeners.splice(at, 1);
  };
}

/** @param {unknown} answer */
function answerPart(answer) {
  if (typeof answer === "string") return { text: answer };
  if (answer && typeof answer === "object") {
    // SDK objects (openai, @anthropic-ai/sdk, @google/genai) are the API's JSON already.
    return { response: JSON.parse(JSON.stringify(answer)) };
  }
  throw new TypeError(`expect() and toolCalls() take the answer's text or a response object, not ${typeof answer}`);
}

/** @param {Record<string, unknown>} fields */
function defined(fields) {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined && value !== null));
}

class Graded {
  /**
   * @param {unknown} answer
   * @param {GradeSession | undefined} session
   */
  constructor(answer, session) {
    this.answer = answerPart(answer);
    this.session = session;
  }

  /**
   * @param {string} grader
   * @param {Record<string, unknown>} expect
   */
  async check(grader, expect) {
    const session = this.session ?? getDefaultSession();
    const result = await session.grade({ ...this.answer, grader, expect });
    const message = result.message ?? "";
    switch (result.verdict) {
      case "pass":
        return this;
      case "fail":
        throw new AssertionError({ message });
      case "miss":
        for (const listener of [...missListeners]) listener(result);
        throw new ReplayMiss(message, result.miss);
      default:
        throw new GradeError(message || `cassette grade answered ${JSON.stringify(result)}`);
    }
  }
}

/** What expect(answer) returns; every check resolves with the expectation, so checks chain. */
export class Expectation extends Graded {
  /** @param {string} needle */
  contains(needle) {
    return this.check("contains", { needle });
  }
  /** @param {string} needle */
  notContains(needle) {
    return this.check("not_contains", { needle });
  }
  /** @param {string} pattern */
  regex(pattern) {
    return this.check("regex", { pattern });
  }
  /** @param {string} value */
  equals(value) {
    return this.check("equals", { value });
  }
  /** @param {string[]} keys */
  jsonShape(keys) {
    return this.check("json_shape", { keys });
  }
  /** @param {object | boolean} schema */
  jsonSchema(schema) {
    return this.check("json_schema", { schema });
  }
  /** @param {{ minWords?: number, maxWords?: number, minChars?: number, maxChars?: number }} bounds */
  length(bounds) {
    return this.check(
      "length",
      defined({ min_words: bounds.minWords, max_words: bounds.maxWords, min_chars: bounds.minChars, max_chars: bounds.maxChars }),
    );
  }
  /**
   * @param {string} text
   * @param {{ threshold?: number }} [options]
   */
  similarity(text, options = {}) {
    return this.check("similarity", defined({ text, threshold: options.threshold }));
  }
  /** @param {{ prefix?: string | string[] }} [options] */
  refusal(options = {}) {
    return this.check("refusal", defined({ prefix: options.prefix }));
  }
  /**
   * @param {string} criterion
   * @param {{ votes?: number, context?: string, model?: string }} [options]
   */
  judge(criterion, options = {}) {
    return this.check("judge", defined({ criterion, votes: options.votes, context: options.context, model: options.model }));
  }
  /**
   * @param {string} intent
   * @param {{ votes?: number, context?: string, model?: string }} [options]
   */
  containsIntent(intent, options = {}) {
    return this.check("contains_intent", defined({ intent, votes: options.votes, context: options.context, model: options.model }));
  }
  /**
   * @param {string} intent
   * @param {{ votes?: number, context?: string, model?: string }} [options]
   */
  doesNotContainIntent(intent, options = {}) {
    return this.check("not_contains_intent", defined({ intent, votes: options.votes, context: options.context, model: options.model }));
  }
  /**
   * @param {string} tone
   * @param {{ votes?: number, model?: string }} [options]
   */
  toneIs(tone, options = {}) {
    return this.check("tone", defined({ tone, votes: options.votes, model: options.model }));
  }
  /**
   * @param {string} context
   * @param {{ votes?: number, model?: string }} [options]
   */
  isGroundedIn(context, options = {}) {
    return this.check("grounded", defined({ context, votes: options.votes, model: options.model }));
  }
}

/** What toolCalls(response) returns: checks on its tool calls, in one shape whatever the provider. */
export class ToolCalls extends Graded {
  /** The tool calls as the graders see them: `{ id, name, arguments }` each. */
  async calls() {
    const session = this.session ?? getDefaultSession();
    const result = await session.grade(this.answer);
    if (result.verdict !== "read") throw new GradeError(result.message ?? JSON.stringify(result));
    return result.answer.tool_calls;
  }
  /** @param {string} name */
  called(name) {
    return this.check("tool_called", { name });
  }
  /** @param {string} name */
  calledOnce(name) {
    return this.check("tool_called", { name, times: 1 });
  }
  /**
   * @param {string} name
   * @param {number} times
   */
  calledTimes(name, times) {
    return this.check("tool_called", { name, times });
  }
  /**
   * @param {string} name
   * @param {Record<string, unknown>} subset
   */
  calledWith(name, subset) {
    return this.check("tool_called", { name, arguments: subset });
  }
  /** @param {string} name */
  notCalled(name) {
    return this.check("tool_called", { name, times: 0 });
  }
}

/**
 * Checks on `answer`: its text, or a whole response object.
 * @param {unknown} answer
 * @param {{ session?: GradeSession }} [options]
 */
export function expect(answer, options = {}) {
  return new Expectation(answer, options.session);
}

/**
 * Checks on the tool calls of `response`.
 * @param {unknown} response
 * @param {{ session?: GradeSession }} [options]
 */
export function toolCalls(response, options = {}) {
  return new ToolCalls(response, options.session);
}

/** `expect` under a name that does not shadow the test runner's own `expect`. */
export const expectAnswer = expect;
