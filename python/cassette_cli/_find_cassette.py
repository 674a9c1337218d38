"""Finds the `cassette` binary installed with this package, in every layout pip installs to.

The wheel carries the binary as a script, so pip puts it in the scripts directory of whichever
scheme it installed into: the environment's (a venv, the system, `--prefix`), the user's
(`--user`), or `bin/` beside the package (`--target`). The same search as ruff's `_find_ruff.py`
and uv's `find_uv_bin`.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

# Set to a binary's path, it wins over the installed one (a development build, for instance).
BINARY_ENV = "CASSETTE_BINARY"


def find_cassette_bin() -> str:
    """The path of the `cassette` binary: `$CASSETTE_BINARY` if set, else the installed one.

    Raises `FileNotFoundError` naming every place searched when there is none.
    """
    override = os.environ.get(BINARY_ENV)
    if override:
        if Path(override).is_file():
            return override
        # A wrong override is an error, not a reason to run some other binary silently.
        raise FileNotFoundError(f"{BINARY_ENV} is set to {override!r}, which is not a file")

    exe = "cassette" + (sysconfig.get_config_var("EXE") or "")
    searched = [Path(directory, exe) for directory in _candidate_dirs()]
    for path in searched:
        if path.is_file():
            return str(path)
    places = "\n  ".join(str(path) for path in dict.fromkeys(searched))
    raise FileNotFoundError(
        f"the cassette binary of cassette-cli is not installed; looked in:\n  {places}\n"
        "reinstall it (`pip install --force-reinstall cassette-cli`) or set "
        f"{BINARY_ENV} to a cassette binary"
    )


def _candidate_dirs() -> list[str]:
    dirs = [sysconfig.get_path("scripts")]
    user_scheme = _user_scheme()
    if user_scheme is not None:
        dirs.append(sysconfig.get_path("scripts", scheme=user_scheme))
    # The package's own directory is .../site-packages/cassette_cli.
    site_packages = Path(__file__).resolve().parent.parent
    # `pip install --target DIR` puts the scripts in DIR/bin.
    dirs.append(str(site_packages / "bin"))
    # `pip install --prefix P`: P/lib/pythonX.Y/site-packages, scripts in P/bin (P/Lib/site-packages
    # and P/Scripts on Windows).
    if site_packages.name == "site-packages":
        lib = site_packages.parent
        prefix = lib.parent if lib.name.lower() == "lib" else lib.parent.parent
        dirs.append(str(prefix / ("Scripts" if os.name == "nt" else "bin")))
    return dirs


def _user_scheme() -> str | None:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"
