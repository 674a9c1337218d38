"""A user's pytest suite asserting on meaning with cassette_cli's expect() and tool_calls().

tests/sdk/test_expect.py runs it under `cassette exec` (the SDKs pointed at the proxy, the
vendor a fake one) with a fake judge mounted as the `judge` route: recorded once, then replayed
with the vendor and the judge stopped. Named so that the outer run does not collect it.
EXPECT_CRITERION and EXPECT_VOTES change one judged expectation, which must then miss.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anthropic
import openai
import pytest
from cassette_cli import ReplayMiss, expect, tool_calls
from google.genai import types

FIXTURES = Path(__file__).resolve().parents[3] / "crates" / "wire" / "tests" / "fixtures"
APOLOGY = "I'm sorry for the delay: your refund of 40 euros was sent on 3 March."
CONTEXT = "Refunds of 40 euros were sent on 3 March to every customer who asked."


@pytest.fixture(scope="module")
def chat():
    return openai.OpenAI().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Where is my refund?"}]
    )


@pytest.fixture(scope="module")
def message():
    return anthropic.Anthropic().messages.create(
        model="claude-3-5-haiku-latest",
        max_tokens=200,
        messages=[{"role": "user", "content": "Where is my refund?"}],
    )


@pytest.fixture(scope="module")
def responses():
    return openai.OpenAI().responses.create(model="o4-mini", input="Where is my refund?")


def test_text_graders_on_an_sdk_response(chat):
    expect(chat).contains("refund").regex(r"\d–\d business days").length(max_words=12)
    expect(chat).similarity("the refund takes 5–7 business days", threshold=0.6).not_contains("voucher")
    with pytest.raises(AssertionError) as failed:
        expect(chat).contains("Voucher")
    assert str(failed.value) == 'contains failed: text does not contain "voucher"'
    with pytest.raises(AssertionError) as failed:
        expect(chat).length(max_words=5)
    assert str(failed.value) == "length failed: 10 words, more than 5"
    with pytest.raises(AssertionError) as failed:
        expect(chat).regex(r"^\d+$")
    assert str(failed.value) == r"regex failed: text does not match /^\d+$/"


def test_json_schema_and_refusal():
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    expect('```json\n{"n": 3}\n```').json_schema(schema)
    with pytest.raises(AssertionError) as failed:
        expect('{"n": "3"}').json_schema(schema)
    assert str(failed.value) == 'json_schema failed: schema violations: /n: "3" is not of type "integer"'
    expect("I'm sorry, I can't help with that.").refusal()
    with pytest.raises(AssertionError):
        expect("Sure, here it is.").refusal()


def test_intent_tone_and_grounding():
    expect(APOLOGY).contains_intent("apology").is_grounded_in(CONTEXT)
    expect("Your refund was sent.").does_not_contain_intent("apology")
    expect("I understand how frustrating this wait is.").tone_is("empathetic")
    with pytest.raises(AssertionError) as failed:
        expect("Your refund was sent.").contains_intent("apology")
    assert str(failed.value) == (
        'contains_intent failed: criterion "The text expresses this intent: apology": 0 of 1 votes passed\n'
        '  vote 1 of 1: fail: FAIL. The text never says "sorry".'
    )
    with pytest.raises(AssertionError) as failed:
        expect(APOLOGY).does_not_contain_intent("apology")
    assert str(failed.value) == (
        'not_contains_intent failed: criterion "The text does not express this intent: apology": 0 of 1 votes passed\n'
        '  vote 1 of 1: fail: FAIL. The text says "sorry".'
    )
    with pytest.raises(AssertionError) as failed:
        expect("Your refund of 45 euros was sent.").is_grounded_in(CONTEXT)
    assert str(failed.value) == (
        'grounded failed: criterion "Every claim the text makes is supported by the context": 0 of 1 votes passed\n'
        "  vote 1 of 1: fail: FAIL. 45 is not in the context."
    )
    with pytest.raises(AssertionError) as failed:
        expect("Whatever. It was sent.").tone_is("empathetic")
    assert str(failed.value) == (
        'tone failed: criterion "The tone of the text is empathetic": 0 of 1 votes passed\n'
        '  vote 1 of 1: fail: FAIL. The text never says "understand".'
    )


def test_votes_split_and_a_majority_decides():
    criterion = os.environ.get("EXPECT_CRITERION", "[split] The reply is polite")
    votes = int(os.environ.get("EXPECT_VOTES", "3"))
    expect("Hello there.").judge(criterion, votes=votes)
    with pytest.raises(AssertionError) as failed:
        expect("Hello there.").judge("[split] The reply is polite", votes=2)
    assert str(failed.value) == (
        'judge failed: criterion "[split] The reply is polite": 1 of 2 votes passed\n'
        "  vote 1 of 2: pass: PASS. Vote 1 is odd.\n"
        "  vote 2 of 2: fail: FAIL. Vote 2 is even."
    )


def test_a_judged_response_object(message):
    expect(message).contains_intent("a refund offer", votes=3).contains("A-1042")


def test_tool_calls_of_openai_and_anthropic_read_alike(chat, message):
    tool_calls(chat).called("lookup_order").called_once("lookup_order").not_called("send_email")
    tool_calls(chat).called_with("lookup_order", order_id="A-1042")
    tool_calls(chat.model_dump()).called_with("lookup_order", order_id="A-1042")
    tool_calls(message).called_with("send_email", to="ana@example.com", retries=2, ratio=0.75)
    tool_calls(message).called_with("send_email", {"cc": [], "urgent": False}).called_times("send_email", 1)
    assert [(c["name"], c["arguments"]) for c in tool_calls(chat).calls] == [("lookup_order", {"order_id": "A-1042"})]
    assert tool_calls(message).calls[0]["arguments"]["subject"] == "Refund"
    with pytest.raises(AssertionError) as failed:
        tool_calls(chat).called_with("lookup_order", order_id="B-7")
    assert str(failed.value) == (
        'tool_called failed: expected lookup_order with arguments including {"order_id":"B-7"} called at least '
        'once, found 0 matching call(s) among [lookup_order({"order_id":"A-1042"})]'
    )
    with pytest.raises(AssertionError) as failed:
        tool_calls(message).not_called("send_email")
    assert str(failed.value) == (
        "tool_called failed: expected send_email called 0 times, found 1 matching call(s) among "
        '[send_email({"cc":[],"ratio":0.75,"retries":2,"subject":"Refund","to":"ana@example.com","urgent":false})]'
    )
    with pytest.raises(AssertionError) as failed:
        tool_calls(chat).called("get_weather")
    assert str(failed.value) == (
        "tool_called failed: expected get_weather called at least once, found 0 matching call(s) among "
        '[lookup_order({"order_id":"A-1042"})]'
    )


def test_tool_calls_of_responses_and_gemini(responses):
    tool_calls(responses).called_with("lookup_order", order_id="A-1042").called_once("lookup_order")
    expect(responses).contains("order A-1042")
    gemini = types.GenerateContentResponse.model_validate(json.loads((FIXTURES / "gemini.response.json").read_text()))
    tool_calls(gemini).called_with("get_weather", city="Paris", unit="celsius")
    expect(gemini).contains("shipped on Monday")


def test_a_miss_is_not_an_assertion():
    # Only in the edited runs does this reach an unrecorded verdict; ReplayMiss must never be
    # caught as an AssertionError.
    assert not issubclass(ReplayMiss, AssertionError)
