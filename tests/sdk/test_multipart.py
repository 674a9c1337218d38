"""Multipart uploads replay (issue 25 item 19): the openai SDK picks a random boundary for every
multipart request, so a key of the raw body never matched twice and an audio transcription
could be recorded but never replayed. Keyed by their parts, they replay, and a miss names the
part that differs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import FakeUpstream

TRANSCRIBE = textwrap.dedent(
    """
    import json, sys
    import openai
    client = openai.OpenAI(max_retries=0)
    audio = open(sys.argv[1], "rb").read()
    try:
        r = client.audio.transcriptions.create(model="whisper-1", file=("speech.mp3", audio), language="en")
        print(json.dumps({"text": r.text}))
    except openai.ConflictError as e:
        print(json.dumps({"miss": e.body["key"]}))
    """
)


def exec_(cassette, store_url, args, env=None):
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CASSETTE_", "UPSTREAM_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))
    }
    full.update(env or {})
    return subprocess.run(
        [cassette, "exec", "--store", store_url, *args], capture_output=True, text=True, timeout=120, env=full
    )


def test_an_audio_transcription_replays_and_a_miss_names_the_part(cassette, tmp_path):
    app = tmp_path / "transcribe.py"
    app.write_text(TRANSCRIBE)
    audio = tmp_path / "speech.mp3"
    audio.write_bytes(b"ID3\x04\x00\x00\xff\xfb\x90\x64" + bytes(range(256)) * 8)
    store = "file://" + str(tmp_path / "tapes")
    fake = FakeUpstream()
    try:
        recorded = exec_(
            cassette,
            store,
            ["--", sys.executable, str(app), str(audio)],
            env={"CASSETTE_MODE": "record", "UPSTREAM_BASE": fake.url, "OPENAI_API_KEY": "sk-test-multipart"},
        )
        assert recorded.returncode == 0, recorded.stderr
        assert json.loads(recorded.stdout) == {"text": "Hello from the recording."}
        assert len(fake.requests) == 1
        path, headers, _ = fake.requests[0]
        assert path == "/v1/audio/transcriptions"
        assert headers["content-type"].startswith("multipart/form-data; boundary=")
    finally:
        fake.close()

    # The stored request still keys to its key: verify recomputes it from the stored parts.
    verified = subprocess.run(
        [cassette, "--no-config", "verify", "--store", store], capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # Twice, each time with a new random boundary: both replay.
    for _ in range(2):
        replayed = exec_(cassette, store, ["--", sys.executable, str(app), str(audio)])
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout == recorded.stdout
        assert "1 hits, 0 misses" in replayed.stderr, replayed.stderr

    # Other audio: a miss (exit 2) whose explanation names the file part.
    other = tmp_path / "other.mp3"
    other.write_bytes(b"ID3\x04\x00\x00\xff\xfb\x90\x64" + bytes(range(255, -1, -1)) * 8)
    missed = exec_(cassette, store, ["--", sys.executable, str(app), str(other)])
    assert missed.returncode == 2, missed.stderr
    assert "miss" in json.loads(missed.stdout)
    assert "body.multipart.file[0].sha256" in missed.stderr, missed.stderr
