"""The `cassette_cli` fixture's object (registered by `pytest_plugin.py`): the running test's
proxy, mode and counts, asked of the proxy when read."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cassette_cli._proxy import Proxy

# The counters of a test's tally, as the proxy names them.
COUNTS = ("requests", "hits", "misses", "recorded", "passed_through", "errors")


@dataclasses.dataclass(frozen=True)
class Counts:
    """What the proxy saw during one test so far."""

    requests: int
    hits: int
    misses: int
    recorded: int
    passed_through: int
    errors: int
    keys: tuple[str, ...]
    missed: tuple[dict[str, Any], ...]


class CassetteTest:
    """The `cassette_cli` fixture: this test's proxy, mode and counts."""

    def __init__(self, proxy: Proxy, scope: str, test: str, mode: str, sequence: bool) -> None:
        self._proxy = proxy
        self._scope = scope
        self.test = test
        self.mode = mode
        self.sequence = sequence
        # What clients built with an explicit URL use: it carries the run's secret.
        self.url: str = proxy.base
        self.env: dict[str, str] = proxy.env_changes()[0]

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (`<proxy>/v1`), for clients built with an explicit URL."""
        return self.env.get("OPENAI_BASE_URL", f"{self.url}/v1")

    def counts(self) -> Counts:
        """Asks the proxy now."""
        tally = self._proxy.control("GET", self._scope)
        numbers = {name: int(tally.get(name, 0)) for name in COUNTS}
        return Counts(
            **numbers,
            keys=tuple(tally.get("keys") or ()),
            missed=tuple(tally.get("missed") or ()),
        )

    @property
    def requests(self) -> int:
        return self.counts().requests

    @property
    def hits(self) -> int:
        return self.counts().hits

    @property
    def misses(self) -> int:
        return self.counts().misses

    @property
    def recorded(self) -> int:
        return self.counts().recorded

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of the requests this test made, in order, each once."""
        return self.counts().keys
