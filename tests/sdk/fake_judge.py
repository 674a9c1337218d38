"""A fake judge: an OpenAI-compatible chat endpoint that reads cassette's judge question
(criterion, context, text, vote) and answers PASS or FAIL by a rule, so that verdicts are known
in advance and votes can split. It counts every TCP connection it accepts; `stop()` keeps the
port and only counts and drops connections, so a replay that reached for the judge is seen.

Rules, the first that applies:
- criterion holding "[split]": PASS on odd votes, FAIL on even ones;
- "The text expresses this intent: X" (or "does not express"): the intent is there when the
  text holds the intent's marker word (`MARKERS`, else the intent itself);
- "The tone of the text is X": there when the text holds the tone's marker word;
- "Every claim the text makes is supported by the context": every number of the text is in the
  context;
- anything else: FAIL when the text holds "rude".
"""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKERS = {"apology": "sorry", "a refund offer": "refund", "empathetic": "understand", "curt": "whatever"}


def _fenced(question: str, label: str) -> str:
    """What the question holds under `label:`, between `<<<` and `>>>`, or between `<<<TAG` and
    `TAG>>>` for a text that holds `>>>` (docs/suite.md, "The judge")."""
    head = f"{label}:\n<<<"
    if head not in question:
        return ""
    tag, _, rest = question.split(head, 1)[1].partition("\n")
    return rest.split(f"\n{tag}>>>", 1)[0]


def verdict(question: str) -> str:
    criterion = question.split("\n", 1)[0].removeprefix("Criterion: ")
    graded = _fenced(question, "Text")
    context = _fenced(question, "Context")
    vote = int(re.search(r"\(Vote (\d+) of \d+\.\)", question).group(1))  # type: ignore[union-attr]
    lower = graded.lower()
    if "[split]" in criterion:
        return f"PASS. Vote {vote} is odd." if vote % 2 else f"FAIL. Vote {vote} is even."
    for prefix, wanted in (
        ("The text expresses this intent: ", True),
        ("The text does not express this intent: ", False),
        ("The tone of the text is ", True),
    ):
        if criterion.startswith(prefix):
            name = criterion.removeprefix(prefix)
            marker = MARKERS.get(name, name)
            found = marker in lower
            if found == wanted:
                return f'PASS. The text {"says" if found else "never says"} "{marker}".'
            return f'FAIL. The text {"says" if found else "never says"} "{marker}".'
    if criterion == "Every claim the text makes is supported by the context":
        missing = [n for n in re.findall(r"\d+", graded) if n not in re.findall(r"\d+", context)]
        if missing:
            return f"FAIL. {missing[0]} is not in the context."
        return "PASS. Every number is in the context."
    return "FAIL. The text is rude." if "rude" in lower else "PASS. Nothing rude."


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw or b"{}")
        question = body["messages"][-1]["content"]
        reply = verdict(question)
        with self.server.owner.lock:
            self.server.owner.questions.append(question)
            self.server.owner.credentials.append(self.headers.get("authorization") or "")
        payload = json.dumps(
            {
                "id": "chatcmpl-judge",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: FakeJudge) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self):  # type: ignore[no-untyped-def]
        conn = super().get_request()
        with self.owner.lock:
            self.owner.connections += 1
        return conn


class FakeJudge:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connections = 0
        self.questions: list[str] = []
        # The Authorization header of each question, to check the route's real key reached it.
        self.credentials: list[str] = []
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._sink: threading.Thread | None = None

    def stop(self) -> None:
        """Stops answering; keeps counting (and dropping) connections to the port."""
        if self._sink is not None:
            return
        self._server.shutdown()
        self._thread.join()
        listener = self._server.socket

        def drop() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with self.lock:
                    self.connections += 1
                conn.close()

        self._sink = threading.Thread(target=drop, daemon=True)
        self._sink.start()

    def close(self) -> None:
        if self._sink is None:
            self._server.shutdown()
        else:
            try:
                self._server.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sink.join(timeout=10)
        self._server.server_close()
