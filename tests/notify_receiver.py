"""A real webhook receiver on loopback for the notification tests: stdlib ``http.server`` on its own thread, which
answers 200, answers 500, holds a request until released (a slow receiver), or is down (its socket closed)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = b"a-secret-of-at-least-16-bytes"


class Receiver:
    """Records each request it got (before answering): its id header, its body, whether its signature checks."""

    def __init__(self) -> None:
        self.status = 200
        self.hold = threading.Event()  # set: requests wait until :attr:`release` is set
        self.release = threading.Event()
        self.got = threading.Condition()
        self.requests: list[dict[str, object]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                timestamp = self.headers["X-Edgevoice-Timestamp"]
                mac = hmac.new(SECRET, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
                with receiver.got:
                    receiver.requests.append(
                        {
                            "id": self.headers["X-Edgevoice-Id"],
                            "body": json.loads(body),
                            "signed": hmac.compare_digest(self.headers["X-Edgevoice-Signature"], f"sha256={mac}"),
                        }
                    )
                    receiver.got.notify_all()
                if receiver.hold.is_set():
                    receiver.release.wait(30)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def wait_for(self, n: int, timeout: float = 20.0) -> bool:
        with self.got:
            return self.got.wait_for(lambda: len(self.requests) >= n, timeout)

    def ids(self) -> list[object]:
        with self.got:
            return [r["id"] for r in self.requests]

    def down(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)
