"""`python -m cassette_cli ARGS...`: runs the installed `cassette` binary with ARGS.

On POSIX the binary replaces this process (so its exit status, a miss's 2 included, and its
signals are the caller's directly); Windows has no exec, so it runs as a child whose exit
status is passed on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from cassette_cli._find_cassette import find_cassette_bin

# cassette's status for errors that are not a test verdict (a miss, a missing file).
EXIT_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        cassette = find_cassette_bin()
    except FileNotFoundError as error:
        print(f"cassette_cli: {error}", file=sys.stderr)
        return EXIT_ERROR
    if sys.platform == "win32":
        # The console sends Ctrl-C to the child too: let it decide, and wait for its status.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return subprocess.run([cassette, *args], check=False).returncode
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cassette, [cassette, *args])


if __name__ == "__main__":
    sys.exit(main())
