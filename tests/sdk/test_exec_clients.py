"""More clients under `cassette exec` with zero flags (issue 25): the groq and cohere SDKs find
their built-in routes through the variables exec sets; mistralai, which reads no variable, is
told exactly what works (`server_url=<proxy>/mistral`) and that advice is then followed; a
suite that deletes the base URL exec set is told that, not "set it"; telemetry opt-outs are
set; and tiktoken's encoding download is named as a helper download with what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import FakeUpstream

GROQ_APP = textwrap.dedent(
    """
    import json, groq
    client = groq.Groq()  # GROQ_BASE_URL and GROQ_API_KEY come from cassette exec
    r = client.chat.completions.create(model="llama-3.1-8b-instant",
                                       messages=[{"role": "user", "content": "Where is my refund?"}])
    print(json.dumps({"content": r.choices[0].message.content}))
    """
)

COHERE_APP = textwrap.dedent(
    """
    import json, cohere
    client = cohere.ClientV2()  # CO_API_URL and CO_API_KEY come from cassette exec
    r = client.chat(model="command-a-03-2025", messages=[{"role": "user", "content": "Where is my refund?"}])
    print(json.dumps({"content": r.message.content[0].text}))
    """
)

MISTRAL_DEFAULT = textwrap.dedent(
    """
    import json
    from mistralai.client import Mistral
    client = Mistral(api_key="cassette", retry_config=None)
    try:
        client.chat.complete(model="mistral-small-latest", messages=[{"role": "user", "content": "hi"}])
        print(json.dumps({"answered": True}))
    except Exception as e:
        print(json.dumps({"error": type(e).__name__}))
    """
)

MISTRAL_AS_TOLD = textwrap.dedent(
    """
    import json, os
    from mistralai.client import Mistral
    # What the bypass hint says: server_url=<proxy>/mistral (the SDK joins /v1 itself).
    client = Mistral(api_key="cassette", server_url=os.environ["CASSETTE_PROXY_URL"] + "/mistral")
    r = client.chat.complete(model="mistral-small-latest", messages=[{"role": "user", "content": "Where is my refund?"}])
    print(json.dumps({"content": r.choices[0].message.content}))
    """
)

DELETES_BASE_URL = textwrap.dedent(
    """
    import json, os
    import openai
    # A suite's conftest that "cleans" the environment.
    del os.environ["OPENAI_BASE_URL"]
    client = openai.OpenAI(max_retries=0)
    try:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    except openai.APIConnectionError as e:
        print(json.dumps({"error": type(e).__name__}))
    """
)

TIKTOKEN_AND_TELEMETRY = textwrap.dedent(
    """
    import json, os
    names = ["CREWAI_DISABLE_TELEMETRY", "HAYSTACK_TELEMETRY_ENABLED", "ANONYMIZED_TELEMETRY",
             "HF_HUB_DISABLE_TELEMETRY", "DO_NOT_TRACK", "GROQ_BASE_URL", "CO_API_URL",
             "GROQ_API_KEY", "CO_API_KEY"]
    out = {n: os.environ.get(n) for n in names}
    import tiktoken
    try:
        tiktoken.get_encoding("cl100k_base")
        out["tiktoken"] = "loaded"
    except Exception as e:
        out["tiktoken"] = type(e).__name__
    print(json.dumps(out))
    """
)


def exec_(cassette, store_url, args, env=None, tmp_path=None):
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "CASSETTE_",
                "UPSTREAM_",
                "OPENAI_",
                "ANTHROPIC_",
                "GEMINI_",
                "GOOGLE_",
                "GROQ_",
                "CO_",
                "COHERE_",
                "MISTRAL_",
                "TIKTOKEN_",
            )
        )
    }
    full.update(env or {})
    return subprocess.run(
        [cassette, "exec", "--store", store_url, *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=full,
        cwd=str(tmp_path) if tmp_path else None,
    )


def script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "app, route, key",
    [(GROQ_APP, "groq", "GROQ_API_KEY"), (COHERE_APP, "cohere", "CO_API_KEY")],
    ids=["groq", "cohere"],
)
def test_groq_and_cohere_replay_through_their_built_in_routes(cassette, tmp_path, app, route, key):
    fake = FakeUpstream()
    store = "file://" + str(tmp_path / "tapes")
    program = script(tmp_path, "app.py", app)
    try:
        recorded = exec_(
            cassette,
            store,
            ["--route", f"{route}={fake.url}", "--", sys.executable, program],
            env={"CASSETTE_MODE": "record", key: "real-key-0123456789"},
        )
        assert recorded.returncode == 0, recorded.stderr
        assert "1 recorded" in recorded.stderr, recorded.stderr
        assert len(fake.requests) == 1
        # The route's own key went upstream, not the placeholder the SDK was given.
        _, headers, _ = fake.requests[0]
        assert headers["authorization"] == "Bearer real-key-0123456789"
    finally:
        fake.close()
    replayed = exec_(cassette, store, ["--", sys.executable, program])
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert "1 hits, 0 misses" in replayed.stderr, replayed.stderr


def test_mistral_is_told_what_works_and_that_works(cassette, tmp_path):
    store = "file://" + str(tmp_path / "tapes")
    told = exec_(cassette, store, ["--", sys.executable, script(tmp_path, "m.py", MISTRAL_DEFAULT)])
    assert told.returncode == 2, told.stderr
    assert "api.mistral.ai:443" in told.stderr, told.stderr
    assert 'server_url="<proxy>/mistral"' in told.stderr, told.stderr
    assert "not /mistral/v1" in told.stderr, told.stderr

    fake = FakeUpstream()
    settings = tmp_path / "cassette.toml"
    settings.write_text(f'[routes.mistral]\nupstream = "{fake.url}"\n')
    program = script(tmp_path, "told.py", MISTRAL_AS_TOLD)
    try:
        recorded = exec_(
            cassette, store, ["--", sys.executable, program], env={"CASSETTE_MODE": "record"}, tmp_path=tmp_path
        )
        assert recorded.returncode == 0, recorded.stderr
        assert fake.requests[0][0] == "/v1/chat/completions", fake.requests
    finally:
        fake.close()
    replayed = exec_(cassette, store, ["--", sys.executable, program], tmp_path=tmp_path)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout


def test_a_base_url_the_suite_deleted_is_named_as_set_by_exec(cassette, tmp_path):
    store = "file://" + str(tmp_path / "tapes")
    result = exec_(cassette, store, ["--", sys.executable, script(tmp_path, "d.py", DELETES_BASE_URL)])
    assert result.returncode == 2, result.stderr
    line = next(
        line
        for line in result.stderr.splitlines()
        if line.startswith("cassette exec:") and "api.openai.com:443" in line
    )
    assert "exec set OPENAI_BASE_URL=http://127.0.0.1:" in line, line
    assert "missing from the process that sent it" in line, line
    assert "(set OPENAI_BASE_URL" not in line, line


def test_telemetry_is_opted_out_and_tiktoken_is_named_as_a_helper_download(cassette, tmp_path):
    store = "file://" + str(tmp_path / "tapes")
    empty_cache = tmp_path / "tiktoken-cache"
    empty_cache.mkdir()
    result = exec_(
        cassette,
        store,
        ["--", sys.executable, script(tmp_path, "t.py", TIKTOKEN_AND_TELEMETRY)],
        env={"TIKTOKEN_CACHE_DIR": str(empty_cache)},
    )
    seen = json.loads(result.stdout)
    assert seen["CREWAI_DISABLE_TELEMETRY"] == "true"
    assert seen["HAYSTACK_TELEMETRY_ENABLED"] == "False"
    assert seen["ANONYMIZED_TELEMETRY"] == "False"
    assert seen["HF_HUB_DISABLE_TELEMETRY"] == "1"
    assert seen["DO_NOT_TRACK"] == "1"
    assert seen["GROQ_BASE_URL"].endswith("/groq") and seen["CO_API_URL"].endswith("/cohere")
    assert seen["GROQ_API_KEY"] == "cassette" and seen["CO_API_KEY"] == "cassette"
    # The encoding download was refused (replay connects nowhere) and named apart from LLM calls.
    assert seen["tiktoken"] != "loaded"
    assert result.returncode == 2, result.stderr
    line = next(
        line
        for line in result.stderr.splitlines()
        if line.startswith("cassette exec:") and "openaipublic.blob.core.windows.net" in line
    )
    assert "helper download (not an LLM call)" in line, line
    assert "TIKTOKEN_CACHE_DIR" in line, line
    assert "bypassed the base URL" not in line, line
