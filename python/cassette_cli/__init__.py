"""cassette for Python: the `cassette` binary this distribution installs, and where it is.

`pip install cassette-cli` puts `cassette` on the environment's PATH; `python -m cassette_cli`
runs the same binary, and `find_cassette_bin()` gives its path to code that starts it (the
pytest plugin, assertion helpers). The binary does all the work; this package only finds it.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from cassette_cli._find_cassette import BINARY_ENV, find_cassette_bin

__all__ = ["BINARY_ENV", "__version__", "find_cassette_bin"]

try:
    __version__: str = version("cassette-cli")
except PackageNotFoundError:  # imported from a source checkout, not installed
    __version__ = "0+unknown"
