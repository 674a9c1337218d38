from __future__ import annotations

from typing import Any

import pytest
from vcr import VCR


@pytest.fixture(scope="module")
def vcr_config(vcr_config: dict[str, Any]) -> dict[str, Any]:
    # Suites that register their own serializer keep the .yaml name (most register it as "yaml").
    return {**vcr_config, "serializer": "parsed", "path_transformer": VCR.ensure_suffix(".yaml")}
