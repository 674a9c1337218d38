#!/usr/bin/env bash
# `cassette import` of a folder of 1,000 vcrpy tapes (issue 23's target: under 5 s), against
# the baseline of reading the same tapes with PyYAML's safe_load (what vcrpy itself does to
# load them; the C loader when PyYAML has it), in the same run.
#
# The tapes are laid out as pytest-recording does (cassettes/MODULE/TEST.yaml), each with three
# interactions in the shapes real suites hold: an OpenAI chat call as body.string, an
# Anthropic call as a custom serializer's parsed_body mappings, and an OpenAI stream.
#
# Usage: benches/vcr-import.sh [CASSETTE_BIN] [PYTHON]  (default target/release/cassette,
# .venv/bin/python with PyYAML, which vcrpy brings)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/cassette}
python=${2:-.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" - "$work/tapes" <<'PY'
import json, os, sys
root = sys.argv[1]
stream = open("crates/wire/tests/fixtures/openai_chat_text.sse").read()
def q(s):
    return json.dumps(s, ensure_ascii=False)
for i in range(1000):
    folder = os.path.join(root, "tests", "cassettes", f"test_mod{i // 50}")
    os.makedirs(folder, exist_ok=True)
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Question {i}: what is the capital of France?"}]}
    answer = {"id": f"chatcmpl-{i}", "object": "chat.completion", "model": "gpt-4o-mini",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": f"Paris ({i})."}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}
    streamed = dict(chat, stream=True, messages=[{"role": "user", "content": f"Stream {i}"}])
    text = f"""interactions:
- request:
    body: {q(json.dumps(chat))}
    headers:
      Content-Type: [application/json]
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {{string: {q(json.dumps(answer))}}}
    headers: {{Content-Type: [application/json]}}
    status: {{code: 200, message: OK}}
- request:
    headers:
      content-type:
      - application/json
    method: POST
    parsed_body:
      max_tokens: 64
      messages:
      - content: Tape {i} asks Claude
        role: user
      model: claude-sonnet-4-5
    uri: https://api.anthropic.com/v1/messages
  response:
    headers:
      content-type:
      - application/json
    parsed_body:
      content:
      - text: Answer {i}
        type: text
      model: claude-sonnet-4-5
      role: assistant
      stop_reason: end_turn
      type: message
    status:
      code: 200
      message: OK
- request:
    body: {q(json.dumps(streamed))}
    headers:
      Content-Type: [application/json]
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {{string: {q(stream)}}}
    headers: {{Content-Type: [text/event-stream]}}
    status: {{code: 200, message: OK}}
version: 1
"""
    with open(os.path.join(folder, f"test_case{i}.yaml"), "w") as f:
        f.write(text)
PY
cat > "$work/load.py" <<'PY'
import pathlib, sys, yaml
loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
n = 0
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.yaml")):
    n += len(yaml.load(path.read_text(), Loader=loader)["interactions"])
assert n == 3000, n
PY
echo "1,000 tapes, 3,000 interactions, $(du -sh "$work/tapes" | cut -f1)"
"$python" -c 'import yaml; print("PyYAML", yaml.__version__, "C loader" if hasattr(yaml, "CSafeLoader") else "pure Python loader")'
cd "$work/tapes"
hyperfine --warmup 1 --runs 5 \
  --prepare "rm -rf $work/store" \
  -n "cassette import (file store)" "$OLDPWD/$bin import tests/cassettes --store file://$work/store --route anthropic=https://api.anthropic.com > /dev/null 2>&1" \
  -n "cassette import --dry-run" "$OLDPWD/$bin import tests/cassettes --dry-run --store file://$work/store > /dev/null 2>&1" \
  -n "baseline: PyYAML safe_load of the same tapes" "$OLDPWD/$python $work/load.py tests/cassettes"
