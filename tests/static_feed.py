"""A real HTTP server answering each path of a dict with its JSON document (404 otherwise): a feed
for documents srsim cannot produce (a play-by-play of a test's own, malformed schedule entries)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def serve_documents(documents: dict[str, Any], *, name: str = "static-feed") -> ThreadingHTTPServer:
    """Serve ``documents`` (read at each request, so a test may add to it) until ``shutdown()``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            doc = documents.get(self.path)
            body = json.dumps(doc if doc is not None else {"message": "not found"}).encode()
            self.send_response(200 if doc is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def base_url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"
