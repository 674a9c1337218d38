/** A judge verdict had no recording in replay: record it (CASSETTE_MODE=record or auto). */
export declare class ReplayMiss extends Error {
  readonly code: "CASSETTE_REPLAY_MISS";
  /** The miss as the binary reported it. */
  readonly miss: { key?: string; request?: string; summary?: string; explanation?: string[] };
  constructor(message: string, miss?: object);
}

/** The grade process could not grade: a bad expectation, no judge model, a dead process. */
export declare class GradeError extends Error {
  readonly code: "CASSETTE_GRADE_ERROR";
  constructor(message: string);
}

export interface GradeSessionOptions {
  /** Further arguments of `cassette grade --jsonl` (`--judge-model`, `--store`, ...). */
  args?: string[];
  /** Defaults to `process.env` when the process starts. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Defaults to `binaryPath()`. */
  binary?: string;
}

/** One `cassette grade --jsonl` process, started on first use; answers come back in order. */
export declare class GradeSession {
  constructor(options?: GradeSessionOptions);
  /** Sends one grade request (docs/suite.md, `cassette grade`); resolves with its answer. */
  grade(request: object): Promise<GradeAnswer>;
  /** Ends the process. */
  close(): void;
}

/** What `cassette grade` answers. */
export interface GradeAnswer {
  id?: unknown;
  verdict: "pass" | "fail" | "miss" | "error" | "read";
  hit: boolean;
  message?: string;
  graders?: object[];
  answer?: { text: string; tool_calls: ToolCall[]; finish: string | null; model: string | null };
  miss?: { key: string; request: string; summary: string; explanation: string[] };
}

export interface ToolCall {
  id: string | null;
  name: string;
  arguments: unknown;
}

export interface JudgeOptions {
  /** Independent votes; a strict majority decides (default 1, at most 15). */
  votes?: number;
  /** The judge's model, instead of `CASSETTE_JUDGE_MODEL`. */
  model?: string;
}

export interface JudgeContextOptions extends JudgeOptions {
  /** Material the text must be grounded in. */
  context?: string;
}

/** What `expect(answer)` returns: every check resolves with the expectation, or rejects. */
export declare class Expectation {
  contains(needle: string): Promise<Expectation>;
  notContains(needle: string): Promise<Expectation>;
  regex(pattern: string): Promise<Expectation>;
  equals(value: string): Promise<Expectation>;
  jsonShape(keys: string[]): Promise<Expectation>;
  jsonSchema(schema: object | boolean): Promise<Expectation>;
  length(bounds: { minWords?: number; maxWords?: number; minChars?: number; maxChars?: number }): Promise<Expectation>;
  similarity(text: string, options?: { threshold?: number }): Promise<Expectation>;
  refusal(options?: { prefix?: string | string[] }): Promise<Expectation>;
  judge(criterion: string, options?: JudgeContextOptions): Promise<Expectation>;
  containsIntent(intent: string, options?: JudgeContextOptions): Promise<Expectation>;
  doesNotContainIntent(intent: string, options?: JudgeContextOptions): Promise<Expectation>;
  toneIs(tone: string, options?: JudgeOptions): Promise<Expectation>;
  isGroundedIn(context: string, options?: JudgeOptions): Promise<Expectation>;
}

/** What `toolCalls(response)` returns: checks on its tool calls, in one shape whatever the provider. */
export declare class ToolCalls {
  calls(): Promise<ToolCall[]>;
  called(name: string): Promise<ToolCalls>;
  calledOnce(name: string): Promise<ToolCalls>;
  calledTimes(name: string, times: number): Promise<ToolCalls>;
  calledWith(name: string, subset: Record<string, unknown>): Promise<ToolCalls>;
  notCalled(name: string): Promise<ToolCalls>;
}

/** Checks on `answer`: its text, or a whole response object. */
export declare function expect(answer: unknown, options?: { session?: GradeSession }): Expectation;
/** `expect` under a name that does not shadow the test runner's own. */
export declare const expectAnswer: typeof expect;
/** Checks on the tool calls of `response`. */
export declare function toolCalls(response: unknown, options?: { session?: GradeSession }): ToolCalls;
/** The session `expect()` and `toolCalls()` use unless given one. */
export declare function getDefaultSession(): GradeSession;
/** Replaces the default session; returns the old one. */
export declare function setDefaultSession(session: GradeSession | null): GradeSession | null;
/** Calls `listener` with every judge miss before it is thrown; returns its remover. */
export declare function onMiss(listener: (answer: GradeAnswer) => void): () => void;
