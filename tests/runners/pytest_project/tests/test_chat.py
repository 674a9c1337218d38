"""A suite as a user writes it: the OpenAI client built at import time from the environment,
one chat call a test. CHANGE names tests whose prompt the run changes (a changed prompt must
fail exactly that test); HARDCODE=1 turns on the test whose client calls the vendor's URL."""

from __future__ import annotations

import os

import openai
import pytest

CHANGED = set(filter(None, os.environ.get("CHANGE", "").split(",")))
client = openai.OpenAI(max_retries=0)


def prompt(name: str, text: str) -> str:
    return text + (" Answer in French instead." if name in CHANGED else "")


def ask(text: str, model: str = "gpt-4o-mini") -> str:
    answer = client.chat.completions.create(model=model, temperature=0, messages=[{"role": "user", "content": text}])
    return answer.choices[0].message.content or ""


@pytest.mark.parametrize("n", [0, 1, 2])
def test_plain(n: int) -> None:
    long = "Read the whole policy and keep every clause exactly as it is written. " * 12
    assert ask(prompt(f"plain-{n}", f"{long}Question {n}: where is my refund?"))


def test_swallowed() -> None:
    # The application turns every API error into a fallback answer: the miss must still fail
    # the test.
    try:
        answer = ask(prompt("swallowed", "Summarise the ticket."))
    except openai.APIError:
        answer = "Sorry, try again later."
    assert answer


@pytest.mark.skipif(not os.environ.get("HARDCODE"), reason="HARDCODE=1 turns it on")
def test_hardcoded_vendor_url() -> None:
    vendor = openai.OpenAI(base_url="https://api.openai.com/v1", max_retries=0)
    try:
        vendor.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello?"}])
    except openai.APIError:
        pass  # swallowed: only cassette can fail this test


# One xdist group with test_replay_marker (the package test runs -n 2 with --dist loadgroup, which
# appends @counted to both node ids: the plugin must record and report them without it). The
# tape test_replay_marker replays is recorded before that run, not by this test's place in it.
@pytest.mark.xdist_group("counted")
def test_counts(cassette_cli) -> None:
    ask("Count me.")
    ask("Count me.")
    counts = cassette_cli.counts()
    assert counts.requests == 2
    assert len(counts.keys) == 1
    if cassette_cli.mode == "replay":
        assert (counts.hits, counts.misses, counts.recorded) == (2, 0, 0)
    else:
        # Recording asks the vendor once a session: the repeat is answered from that recording.
        assert (counts.hits, counts.misses, counts.recorded) == (1, 0, 1)
    assert cassette_cli.test.endswith("test_chat.py::test_counts")
    # In process the variable names the vendor (the channel routes it); on the HTTP path, the proxy.
    assert os.environ["OPENAI_BASE_URL"] in ("https://api.openai.com/v1", cassette_cli.base_url)
    assert cassette_cli.base_url.startswith(cassette_cli.url)


@pytest.mark.cassette_cli(sequence=True)
def test_sequence(cassette_cli) -> None:
    # Three identical requests: in sequence mode each has its own recording, numbered per test.
    for _ in range(3):
        ask("Roll a die.")
    counts = cassette_cli.counts()
    assert len(counts.keys) == 3, counts
    assert counts.requests == 3


@pytest.mark.xdist_group("counted")
@pytest.mark.cassette_cli(mode="replay")
def test_replay_marker(cassette_cli) -> None:
    # Recorded elsewhere (by test_counts): this test replays even in a recording run.
    assert cassette_cli.mode == "replay"
    ask("Count me.")
    assert cassette_cli.hits == 1


@pytest.mark.cassette_cli(strict=True)
def test_strict() -> None:
    ask("Strict one.")
    if not os.environ.get("STRICT_SKIP"):
        ask("Strict two.")


def test_conftest_client(early_client, cassette_cli) -> None:
    # Built before any test module: in process it keeps the vendor's URL (caught there), on the
    # HTTP path it was given the proxy's; either way its request reaches cassette.
    assert str(early_client.base_url) in ("https://api.openai.com/v1/", cassette_cli.base_url + "/")
    answer = early_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Built early."}]
    )
    assert answer.choices[0].message.content
    assert cassette_cli.requests == 1
