"""A scripted HTTP server on 127.0.0.1 for protocol edge cases the emulator does not cover
(a non-SGLang OpenAI-compatible server, odd streams). Standard library only."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sse(obj):
    return ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()


def openai_stream(tokens=16, per_chunk=1, spec=None, usage=True, delay=0.0, model="plain-model"):
    """Chunks of an OpenAI chat stream; ``spec`` adds the sglext spec chunk SGLang sends."""
    out = [sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    sent = 0
    while sent < tokens:
        n = min(per_chunk, tokens - sent)
        sent += n
        chunk = {"choices": [{"index": 0, "delta": {"content": "x" * n},
                              "finish_reason": "length" if sent == tokens else None}]}
        if usage:
            chunk["usage"] = {"prompt_tokens": 10, "completion_tokens": sent,
                              "total_tokens": 10 + sent}
        out.append((delay, sse(chunk)))
    if spec:
        out.append(sse({"choices": [], "sglext": {"spec_tokens_details": spec}}))
    if usage:
        out.append(sse({"choices": [], "usage": {"prompt_tokens": 10,
                                                 "completion_tokens": tokens,
                                                 "total_tokens": 10 + tokens}}))
    out.append(sse("[DONE]"))
    return out


class FakeServer(object):
    """routes: {(method, path): callable(body_dict) -> (status, list of bytes or (delay, bytes))}"""

    def __init__(self, routes):
        self.routes = routes
        self.seen = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *a):
                pass

            def _serve(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                owner.seen.append((method, self.path, dict(self.headers), body))
                route = owner.routes.get((method, self.path))
                if route is None:
                    self.send_response(404)
                    self.end_headers()
                    self.wfile.write(b'{"detail":"Not Found"}')
                    return
                status, parts = route(body)
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream" if method == "POST"
                                 else "application/json")
                self.end_headers()
                try:
                    for part in parts:
                        if isinstance(part, tuple):
                            time.sleep(part[0])
                            part = part[1]
                        self.wfile.write(part)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def models(*names):
    return lambda body: (200, [json.dumps({"object": "list", "data": [
        {"id": n, "object": "model"} for n in names]}).encode()])
