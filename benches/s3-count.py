#!/usr/bin/env python3
"""Counts the requests that reach an S3 server: an HTTP/1.1 forwarder between cassette and the
bucket, so a benchmark can state how many objects a run read (benches/run-suite.sh, S3 rows).

    s3-count.py UPSTREAM_URL PORT_FILE

Listens on a free loopback port (written to PORT_FILE once listening) and forwards every
request as it came, Host header included, so SigV4 signatures made for this address still
verify upstream. Counts requests by method and by kind (object GET, listing, PUT, ...):

    GET  /__counts          the counts so far, as JSON
    POST /__counts/reset    zero them

Standard library only; stops on SIGTERM.
"""

import http.client
import http.server
import json
import os
import signal
import sys
import threading
import urllib.parse
from collections import Counter

upstream = urllib.parse.urlsplit(sys.argv[1])
port_file = sys.argv[2]
counts = Counter()
lock = threading.Lock()
local = threading.local()

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
}


def kind(method, path):
    """What an S3 request does: an object read, a listing, a write..."""
    parts = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    if method == "GET" and ("list-type" in query or "prefix" in query or parts.path.count("/") <= 1):
        return "list"
    return {"GET": "get", "HEAD": "head", "PUT": "put", "DELETE": "delete", "POST": "post"}.get(method, method)


def connection():
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port or 80, timeout=60)
        local.conn = conn
    return conn


class Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def forward(self):
        if self.path.startswith("/__counts"):
            with lock:
                if self.path == "/__counts/reset":
                    counts.clear()
                body = json.dumps(dict(counts), sort_keys=True).encode()
            return self.reply(200, body)
        data = self.body()
        with lock:
            counts["requests"] += 1
            counts[kind(self.command, self.path)] += 1
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if data or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(data))
        for attempt in (1, 2):
            conn = connection()
            try:
                conn.request(self.command, self.path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                local.conn = None
                if attempt == 2:
                    raise
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if self.command != "HEAD":
            self.send_header("content-length", str(len(payload)))
        elif response.getheader("content-length"):
            self.send_header("content-length", response.getheader("content-length"))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
server.daemon_threads = True
signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
