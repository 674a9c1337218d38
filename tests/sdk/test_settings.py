"""A team's whole setup: a checked-in cassette.toml plus `cassette exec -- pytest`, no flags.

A small project (its own tests using the official OpenAI and Anthropic SDKs, constructed with no
arguments) is recorded with the real keys only in cassette's environment: the command sees the
placeholder `cassette`, and the fake vendor sees the real key, exactly one credential per request.
It is then replayed with no key anywhere and the vendor stopped, from a subdirectory too; a
`[keying]` change between record and replay gives a miss naming the difference; `[redact]` in the
file applies to a re-record with no flags; bad files stop everything before any IO. Also: the
placeholder and real-key split through `cassette proxy`, with the client's `api_key="cassette"`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anthropic
import openai
import pytest

from conftest import FakeUpstream, Proxy

OPENAI_KEY = "sk-proj-REALKEYonlyInCassettesEnv0123456789"
ANTHROPIC_KEY = "sk-ant-api03-REALKEYonlyInCassettesEnv987654"
EMAIL = "ada.lovelace@example.com"

PROJECT_TESTS = textwrap.dedent(
    f"""
    import os
    import anthropic
    import openai

    def test_keys_are_placeholders():
        assert os.environ["OPENAI_API_KEY"] == "cassette"
        assert os.environ["ANTHROPIC_API_KEY"] == "cassette"
        assert "UPSTREAM_API_KEY" not in os.environ

    def test_openai_chat():
        client = openai.OpenAI(max_retries=0)
        r = client.chat.completions.create(
            model="gpt-4o-mini", seed=int(os.environ.get("SEED", "7")),
            messages=[{{"role": "user", "content": "Where is my refund? Write to {EMAIL}"}}],
        )
        assert "refund" in r.choices[0].message.content

    def test_anthropic_messages():
        client = anthropic.Anthropic(max_retries=0)
        m = client.messages.create(
            model="claude-3-5-haiku-latest", max_tokens=64,
            messages=[{{"role": "user", "content": "Say hi"}}],
        )
        assert m.content
    """
)


def settings_file(upstream_url: str, keying: str = 'volatile = ["seed"]', redact: str = "") -> str:
    return textwrap.dedent(
        f"""
        store = "file://tests/cassettes"

        [keying]
        {keying}

        [redact]
        {redact}

        [routes.default]
        upstream = "{upstream_url}"

        [routes.anthropic]
        upstream = "{upstream_url}"
        """
    )


def clean_env(extra: dict | None = None) -> dict:
    """This process's environment without any cassette setting or API key."""
    prefixes = ("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(extra or {})
    return env


def exec_pytest(cassette: str, cwd: Path, env: dict, tests: str = "project_tests") -> subprocess.CompletedProcess:
    """`cassette exec -- pytest`, as a team runs it: no flags."""
    return subprocess.run(
        [cassette, "exec", "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def stored_text(project: Path) -> str:
    return "".join(p.read_text() for p in (project / "tests" / "cassettes").rglob("*.json"))


@pytest.fixture(scope="module")
def vendor():
    fake = FakeUpstream()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory, vendor):
    root = tmp_path_factory.mktemp("project")
    (root / "project_tests").mkdir()
    (root / "project_tests" / "test_app.py").write_text(PROJECT_TESTS)
    (root / "cassette.toml").write_text(settings_file(vendor.url))
    return root


@pytest.fixture(scope="module")
def recorded(cassette, project, vendor):
    env = clean_env({"CASSETTE_MODE": "record", "OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY})
    result = exec_pytest(cassette, project, env)
    return result


def test_record_with_real_keys_only_in_cassettes_environment(recorded, vendor, project):
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "3 passed" in recorded.stdout, recorded.stdout
    assert "2 recorded" in recorded.stderr, recorded.stderr
    assert "keys held for default (OPENAI_API_KEY), anthropic (ANTHROPIC_API_KEY)" in recorded.stderr
    # The vendor saw the real key, exactly one credential per request, never the placeholder.
    assert len(vendor.header_lines) == 2
    by_path = {path: lines for (path, _, _), lines in zip(vendor.requests, vendor.header_lines)}
    credentials = {
        path: [(n, v) for n, v in lines if n in ("authorization", "x-api-key", "api-key", "x-goog-api-key")]
        for path, lines in by_path.items()
    }
    assert credentials == {
        "/v1/chat/completions": [("authorization", f"Bearer {OPENAI_KEY}")],
        "/v1/messages": [("x-api-key", ANTHROPIC_KEY)],
    }
    # No key reached the store or the output.
    text = stored_text(project)
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, "REALKEY"):
        assert secret not in text
        assert secret not in recorded.stdout + recorded.stderr


def test_replay_with_no_key_anywhere_and_the_vendor_stopped(cassette, recorded, project, vendor):
    vendor.stop()
    before = vendor.connections
    result = exec_pytest(cassette, project, clean_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert "2 hits, 0 misses" in result.stderr, result.stderr
    assert vendor.connections == before

    # From a subdirectory: the same file, so the same store beside it.
    sub = project / "src" / "deep"
    sub.mkdir(parents=True)
    result = exec_pytest(cassette, sub, clean_env(), tests=str(project / "project_tests"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 hits, 0 misses" in result.stderr, result.stderr
    assert not (sub / "tests").exists() and not (sub / "cassettes").exists()
    assert vendor.connections == before


def test_a_keying_change_between_record_and_replay_names_the_difference(cassette, recorded, project, vendor):
    vendor.stop()
    original = (project / "cassette.toml").read_text()
    try:
        (project / "cassette.toml").write_text(settings_file(vendor.url, keying="volatile = []"))
        result = exec_pytest(cassette, project, clean_env())
        assert result.returncode == 2, result.stdout + result.stderr
        assert "recorded with volatile [seed]; now []" in result.stderr, result.stderr
        assert "key version" not in result.stderr
    finally:
        (project / "cassette.toml").write_text(original)


def test_a_re_record_with_redact_in_the_file_redacts(cassette, recorded, project):
    vendor = FakeUpstream()
    try:
        (project / "cassette.toml").write_text(
            settings_file(vendor.url, redact=r"patterns = ['[\w.+-]+@[\w-]+\.[\w.]+']")
        )
        assert EMAIL in stored_text(project), "the first recording had no redaction rule"
        env = clean_env({"CASSETTE_MODE": "record", "OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY})
        result = exec_pytest(cassette, project, env)
        assert result.returncode == 0, result.stdout + result.stderr
        text = stored_text(project)
        assert EMAIL not in text
        assert "Write to [REDACTED]" in text
    finally:
        vendor.close()


@pytest.mark.parametrize(
    "text, position, fix",
    [
        ('store = "file://never"\n[keying\n', ":2:", "cassette.toml"),
        ('store = "file://never"\n[keying]\nvolatiles = ["seed"]\n', ":3:1:", "unknown field `volatiles`"),
        ("store = \"file://never\"\n[redact]\npatterns = ['(unclosed']\n", ":3:13:", "invalid redaction pattern"),
        ('store = "file://never"\n[keying]\nignore = ["contents[*].id"]\n', ":3:11:", "must start with `$`"),
        ('store = "file://never"\n[routes.acme]\napi_key_env = "ACME_KEY"\n', ":2:", "needs `upstream"),
    ],
)
def test_bad_files_stop_everything_before_any_io(cassette, tmp_path, text, position, fix):
    (tmp_path / "cassette.toml").write_text(text)
    marker = tmp_path / "ran"
    result = subprocess.run(
        [cassette, "exec", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert f"{tmp_path / 'cassette.toml'}{position}" in result.stderr, result.stderr
    assert fix in result.stderr and "docs/settings.md" in result.stderr, result.stderr
    assert not marker.exists(), "the command ran"
    assert not (tmp_path / "never").exists(), "a store was opened"


def test_the_proxy_holds_the_key_and_the_client_sends_a_placeholder(tmp_path):
    vendor = FakeUpstream()
    store = "file://" + str(tmp_path / "tapes")
    proxy = Proxy(
        ["--store", store, "--upstream", vendor.url, "--route", f"anthropic={vendor.url}"],
        env={"CASSETTE_MODE": "record", "UPSTREAM_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY},
        cwd=str(tmp_path),
    )
    try:
        client = openai.OpenAI(api_key="cassette", base_url=f"{proxy.url}/v1", max_retries=0)
        r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content
        claude = anthropic.Anthropic(api_key="cassette", base_url=f"{proxy.url}/anthropic", max_retries=0)
        assert claude.messages.create(
            model="claude-3-5-haiku-latest", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        ).content
        health = __import__("urllib.request").request.urlopen(f"{proxy.url}/healthz", timeout=10).read().decode()
    finally:
        log = proxy.stop()
        vendor.close()
    credentials = [
        [(n, v) for n, v in lines if n in ("authorization", "x-api-key", "api-key", "x-goog-api-key")]
        for lines in vendor.header_lines
    ]
    assert credentials == [[("authorization", f"Bearer {OPENAI_KEY}")], [("x-api-key", ANTHROPIC_KEY)]]
    assert "keys held for default (UPSTREAM_API_KEY), anthropic (ANTHROPIC_API_KEY)" in log, log
    for secret in (OPENAI_KEY, ANTHROPIC_KEY):
        assert secret not in log and secret not in health
        assert secret not in "".join(p.read_text() for p in (tmp_path / "tapes").rglob("*.json"))
