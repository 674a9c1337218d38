"""A JSON-body serializer of the kind LLM suites register: tapes are JSON (not YAML), each
request and answer body kept as the JSON it carries (`json`) or its text (`text`), under keys
of the suite's own choosing."""

from __future__ import annotations

import json
from typing import Any


def _body(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        value = value.get("string")
    if isinstance(value, bytes):
        value = value.decode()
    try:
        return {"json": json.loads(value)}
    except (TypeError, ValueError):
        return {"text": value}


def _text(body: dict[str, Any]) -> str:
    return json.dumps(body["json"]) if "json" in body else body["text"]


def serialize(data: dict[str, Any]) -> str:
    entries = [
        {
            "ask": {**i["request"], "body": _body(i["request"]["body"])},
            "got": {**i["response"], "body": _body(i["response"]["body"])},
        }
        for i in data["interactions"]
    ]
    return json.dumps({"recorded": entries}, indent=1, sort_keys=True)


def deserialize(text: str) -> dict[str, Any]:
    entries = json.loads(text)["recorded"]
    return {
        "interactions": [
            {
                "request": {**e["ask"], "body": _text(e["ask"]["body"])},
                "response": {**e["got"], "body": {"string": _text(e["got"]["body"])}},
            }
            for e in entries
        ],
        "version": 1,
    }
