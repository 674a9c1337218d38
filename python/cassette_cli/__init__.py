"""cassette for Python: the `cassette` binary this distribution installs, and where it is.

`pip install cassette-cli` puts `cassette` on the environment's PATH; `python -m cassette_cli`
runs the same binary, and `find_cassette_bin()` gives its path to code that starts it (the
pytest plugin, assertion helpers). The binary does all the work; this package only finds it.
"""

from __future__ import annotations

from cassette_cli._find_cassette import BINARY_ENV, find_cassette_bin

__all__ = ["BINARY_ENV", "__version__", "find_cassette_bin"]


def __getattr__(name: str) -> str:
    # Read on first use: importlib.metadata costs more than all of `python -m cassette_cli`.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("cassette-cli")
        except PackageNotFoundError:  # imported from a source checkout, not installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
