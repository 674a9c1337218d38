"""A small MCP server written with the official `mcp` SDK, for the `cassette mcp` tests.

Its `next_number` tool returns the next value of a counter kept in a file, so a live call
never answers like an earlier one: a replayed answer is told apart from a live call. Every
start appends a line to the file named by MCP_STARTS, so tests count the starts.

    python mcp_counter_server.py                 # stdio
    python mcp_counter_server.py --http PORT     # Streamable HTTP on 127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

STARTS = os.environ.get("MCP_STARTS")
COUNTER = Path(os.environ.get("MCP_COUNTER") or (Path(STARTS).with_suffix(".counter") if STARTS else "counter.txt"))

mcp = MCPServer("counter")


@mcp.tool()
def next_number(label: str) -> str:
    """Returns the label with the next number of a counter that survives restarts."""
    n = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(n))
    return f"{label}: {n}"


@mcp.tool()
def now() -> str:
    """The current time, in nanoseconds."""
    return str(time.time_ns())


if __name__ == "__main__":
    if STARTS:
        with open(STARTS, "a") as f:
            f.write(f"{os.getpid()}\n")
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        import uvicorn

        # The session-based (handshake-era) transport answers in server-sent events.
        app = mcp.streamable_http_app(json_response=os.environ.get("MCP_JSON_RESPONSE") == "1")
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        mcp.run()
