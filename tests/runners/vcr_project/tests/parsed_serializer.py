"""A custom vcrpy serializer of the kind many LLM suites register: headers lower-cased and
vendor headers (anthropic-*, x-*) deleted, JSON bodies stored as YAML mappings under
`parsed_body` instead of `body`."""

from __future__ import annotations

import json
from typing import Any

import yaml

DROPPED_PREFIXES = ("anthropic-", "x-", "cf-")
DROPPED = {"authorization", "date", "server", "user-agent", "request-id"}


def deserialize(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    for interaction in data["interactions"]:
        for kind, part in interaction.items():
            parsed = part.pop("parsed_body", None)
            if parsed is not None:
                dumped = json.dumps(parsed)
                part["body"] = {"string": dumped} if kind == "response" else dumped
    return data


def serialize(data: dict[str, Any]) -> str:
    for interaction in data["interactions"]:
        for part in interaction.values():
            headers = {k.lower(): v for k, v in (part.get("headers") or {}).items()}
            part["headers"] = {
                k: v for k, v in headers.items() if k not in DROPPED and not k.startswith(DROPPED_PREFIXES)
            }
            if any(str(v).startswith("application/json") for v in part["headers"].get("content-type", [])):
                body = part.get("body")
                if isinstance(body, dict):
                    body = body.get("string")
                if isinstance(body, bytes):
                    body = body.decode()
                if body:
                    part["parsed_body"] = json.loads(body)
                    del part["body"]
    return yaml.dump(data, allow_unicode=True, width=120)
