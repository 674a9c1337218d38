"""Assertions on what an LLM answered, inside ordinary tests: the suite runner's graders and its
recorded judge, called from pytest (or any test framework).

    from cassette_cli import expect, tool_calls

    expect(reply).contains("refund").length(max_words=60)
    expect(reply).contains_intent("apology")
    expect(reply).is_grounded_in(policy_text)
    tool_calls(response).called_with("get_weather", city="Paris")

`reply` is the answer's text or the whole response: an OpenAI chat completion, a Responses
response, an Anthropic message or a Gemini response, as the SDK's object or as a dict. The
binary reads it (`cassette grade`), with the normalization `cassette run` uses: tool calls
become `{name, arguments}` whatever the provider, OpenAI's JSON-string arguments parsed.

A failed expectation raises `AssertionError` naming the grader, the criterion and, for a
judge, each vote's reply. The judge's verdicts are recorded and replayed like any recording
(`CASSETTE_MODE`, `CASSETTE_STORE`; its model from `CASSETTE_JUDGE_MODEL` or `model=`); in
replay a verdict that was never recorded raises `ReplayMiss` with the miss explained, which is
not an assertion: the tapes are stale, not the answer wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cassette_cli._grade import GradeError, GradeSession, JsonObject, default_session, notify_miss

__all__ = ["Expectation", "ReplayMiss", "ToolCalls", "expect", "tool_calls"]


class ReplayMiss(Exception):
    """A judge verdict had no recording in replay: record it (CASSETTE_MODE=record or auto)."""

    def __init__(self, message: str, miss: JsonObject | None = None) -> None:
        super().__init__(message)
        #: The miss as the binary reported it: `key`, `request`, `summary`, `explanation`.
        self.miss: JsonObject = miss or {}


def _answer_part(answer: object) -> JsonObject:
    """The request member that carries `answer`: its text, or the whole response as JSON."""
    if isinstance(answer, str):
        return {"text": answer}
    if isinstance(answer, Mapping):
        return {"response": dict(answer)}
    dump = getattr(answer, "model_dump", None)
    if callable(dump):
        # pydantic models (openai, anthropic, google-genai): by alias, so that google-genai's
        # fields are spelled as the API spells them (`functionCall`), and without the unset
        # members the SDKs fill with None.
        dumped = dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(dumped, Mapping):
            return {"response": dict(dumped)}
    to_dict = getattr(answer, "to_dict", None)
    if callable(to_dict):
        converted = to_dict()
        if isinstance(converted, Mapping):
            return {"response": dict(converted)}
    raise TypeError(
        "expect() and tool_calls() take the answer's text, a response dict or an SDK response "
        f"object (with model_dump()), not {type(answer).__name__}"
    )


def _fields(**fields: object) -> JsonObject:
    return {name: value for name, value in fields.items() if value is not None}


class _Graded:
    def __init__(self, answer: object, session: GradeSession | None) -> None:
        self._answer = _answer_part(answer)
        self._session = session

    def _check(self, grader: str, expect: JsonObject) -> JsonObject:
        session = self._session or default_session()
        result = session.grade({**self._answer, "grader": grader, "expect": expect})
        verdict = result.get("verdict")
        message = str(result.get("message") or "")
        if verdict == "pass":
            return result
        if verdict == "fail":
            raise AssertionError(message)
        if verdict == "miss":
            notify_miss(result)
            raise ReplayMiss(message, result.get("miss"))
        raise GradeError(message or f"cassette grade answered {result!r}")


class Expectation(_Graded):
    """What `expect(answer)` returns: each method grades the answer and returns the expectation,
    so checks chain; the first that fails raises."""

    # Deterministic graders.

    def contains(self, needle: str) -> Expectation:
        """The text contains `needle`, case-insensitively."""
        self._check("contains", {"needle": needle})
        return self

    def not_contains(self, needle: str) -> Expectation:
        """The text does not contain `needle`, case-insensitively."""
        self._check("not_contains", {"needle": needle})
        return self

    def regex(self, pattern: str) -> Expectation:
        """The text matches `pattern` (Rust regex syntax, unanchored)."""
        self._check("regex", {"pattern": pattern})
        return self

    def equals(self, value: str) -> Expectation:
        """The trimmed text equals `value`, trimmed."""
        self._check("equals", {"value": value})
        return self

    def json_shape(self, keys: Sequence[str]) -> Expectation:
        """The text is a JSON object with every key."""
        self._check("json_shape", {"keys": list(keys)})
        return self

    def json_schema(self, schema: Mapping[str, Any] | bool) -> Expectation:
        """The text is JSON that validates against `schema`."""
        self._check("json_schema", {"schema": schema if isinstance(schema, bool) else dict(schema)})
        return self

    def length(
        self,
        *,
        min_words: int | None = None,
        max_words: int | None = None,
        min_chars: int | None = None,
        max_chars: int | None = None,
    ) -> Expectation:
        """The trimmed text has that many words (split on whitespace) or characters."""
        self._check(
            "length",
            _fields(
                min_words=min_words, max_words=max_words, min_chars=min_chars, max_chars=max_chars
            ),
        )
        return self

    def similarity(self, text: str, threshold: float | None = None) -> Expectation:
        """The token-set ratio of the text and `text` reaches `threshold` (default 0.8)."""
        self._check("similarity", _fields(text=text, threshold=threshold))
        return self

    def refusal(self, prefix: str | Sequence[str] | None = None) -> Expectation:
        """The text opens with a refusal ("I can't", "I'm sorry", ... or `prefix`)."""
        prefixes = prefix if prefix is None or isinstance(prefix, str) else list(prefix)
        self._check("refusal", _fields(prefix=prefixes))
        return self

    # The judge: each verdict recorded and replayed.

    def judge(
        self,
        criterion: str,
        *,
        votes: int | None = None,
        context: str | None = None,
        model: str | None = None,
    ) -> Expectation:
        """A strict majority of `votes` judge votes finds that the text meets `criterion`."""
        self._check(
            "judge", _fields(criterion=criterion, votes=votes, context=context, model=model)
        )
        return self

    def contains_intent(
        self,
        intent: str,
        *,
        votes: int | None = None,
        context: str | None = None,
        model: str | None = None,
    ) -> Expectation:
        """The judge finds that the text expresses `intent` ("an apology", "a refund offer")."""
        self._check(
            "contains_intent", _fields(intent=intent, votes=votes, context=context, model=model)
        )
        return self

    def does_not_contain_intent(
        self,
        intent: str,
        *,
        votes: int | None = None,
        context: str | None = None,
        model: str | None = None,
    ) -> Expectation:
        """The judge finds that the text does not express `intent`."""
        self._check(
            "not_contains_intent", _fields(intent=intent, votes=votes, context=context, model=model)
        )
        return self

    def tone_is(
        self, tone: str, *, votes: int | None = None, model: str | None = None
    ) -> Expectation:
        """The judge finds the text's tone to be `tone` ("empathetic", "formal")."""
        self._check("tone", _fields(tone=tone, votes=votes, model=model))
        return self

    def is_grounded_in(
        self, context: str, *, votes: int | None = None, model: str | None = None
    ) -> Expectation:
        """The judge finds every claim of the text supported by `context`."""
        self._check("grounded", _fields(context=context, votes=votes, model=model))
        return self


class ToolCalls(_Graded):
    """What `tool_calls(response)` returns: checks on the response's tool calls, in one shape
    whatever the provider (`{name, arguments}`, arguments parsed from OpenAI's JSON string)."""

    @property
    def calls(self) -> list[JsonObject]:
        """The tool calls as the graders see them: `{"id", "name", "arguments"}` each."""
        session = self._session or default_session()
        result = session.grade(self._answer)
        if result.get("verdict") != "read":
            raise GradeError(str(result.get("message") or result))
        calls: list[JsonObject] = result["answer"]["tool_calls"]
        return calls

    def called(self, name: str) -> ToolCalls:
        """`name` was called at least once."""
        self._check("tool_called", {"name": name})
        return self

    def called_once(self, name: str) -> ToolCalls:
        """`name` was called exactly once."""
        self._check("tool_called", {"name": name, "times": 1})
        return self

    def called_times(self, name: str, times: int) -> ToolCalls:
        """`name` was called exactly `times` times."""
        self._check("tool_called", {"name": name, "times": times})
        return self

    def called_with(
        self, name: str, arguments: Mapping[str, object] | None = None, /, **subset: object
    ) -> ToolCalls:
        """`name` was called with arguments containing `subset` (objects by member,
        recursively; numbers by value); argument names that are not identifiers go in
        `arguments`."""
        wanted = {**(dict(arguments) if arguments is not None else {}), **subset}
        self._check("tool_called", {"name": name, "arguments": wanted})
        return self

    def not_called(self, name: str) -> ToolCalls:
        """`name` was not called."""
        self._check("tool_called", {"name": name, "times": 0})
        return self


def expect(answer: object, *, session: GradeSession | None = None) -> Expectation:
    """Checks on `answer`: its text, or a whole response (SDK object or dict)."""
    return Expectation(answer, session)


def tool_calls(response: object, *, session: GradeSession | None = None) -> ToolCalls:
    """Checks on the tool calls of `response` (SDK object or dict)."""
    return ToolCalls(response, session)
