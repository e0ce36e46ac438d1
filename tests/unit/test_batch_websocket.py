"""scripts/comfyui/ws.py (websocket-client underneath) against a websocket server written here from RFC 6455 (no
ComfyUI): the watcher's wake-up on ComfyUI's end-of-prompt message through fragments, pings and binary frames, and a
refused or missing websocket turned into an OSError the caller answers by polling. The batch runner's use of it on real servers is in tests/comfy/test_batch_runner.py
and benchmarks/bench_batch.py."""
from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time

import pytest

from scripts.comfyui.ws import PromptWatcher

ACCEPT_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455


def _frame(op: int, payload: bytes, fin: bool = True) -> bytes:
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | op])
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + payload


def _read_client_frame(conn: socket.socket) -> tuple[int, bytes]:
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            assert chunk, "the client closed before sending a whole frame"
            data += chunk
        return data
    b0, b1 = exactly(2)
    assert b1 & 0x80, "a client frame must be masked"
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(exactly(2), "big")
    key, payload = exactly(4), exactly(n)
    return b0 & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(payload))


class FakeServer:
    """Accepts one websocket connection and plays `script(conn)`; records what the client sent and asked for."""

    def __init__(self, script, accept=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.script, self.accept = script, accept
        self.request, self.received, self.error = "", [], None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.sock.accept()
        conn.settimeout(10)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            self.request = head.decode()
            key = next(line.split(":", 1)[1].strip() for line in self.request.split("\r\n")
                       if line.lower().startswith("sec-websocket-key:"))
            accept = self.accept or base64.b64encode(hashlib.sha1((key + ACCEPT_GUID).encode()).digest()).decode()
            conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode())
            self.script(conn, self)
        except Exception as exc:  # reported by the test through self.error
            self.error = exc
        finally:
            conn.close()
            self.sock.close()


def test_a_wrong_accept_key_or_no_upgrade_is_refused():
    server = FakeServer(lambda conn, s: None, accept="bm90IHRoZSBrZXk=")
    with pytest.raises(OSError, match="no websocket here"):
        PromptWatcher(server.url, "abc")

    plain = socket.socket()
    plain.bind(("127.0.0.1", 0))
    plain.listen(1)

    def answer():
        conn, _ = plain.accept()
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        conn.close()
    threading.Thread(target=answer, daemon=True).start()
    with pytest.raises(OSError, match="404"):
        PromptWatcher(f"http://127.0.0.1:{plain.getsockname()[1]}", "abc")
    plain.close()


def test_the_watcher_wakes_on_the_end_of_its_prompt_only():
    go = threading.Event()

    def script(conn, server):
        def send(kind, data):
            conn.sendall(_frame(0x1, json.dumps({"type": kind, "data": data}).encode()))
        send("status", {"status": {"exec_info": {"queue_remaining": 1}}, "sid": "abc"})
        go.wait(10)
        send("execution_start", {"prompt_id": "p1"})
        send("executing", {"node": "3", "prompt_id": "p1"})   # a node, not the end
        send("execution_success", {"prompt_id": "p1"})       # before /history has the entry: not the end either
        conn.sendall(_frame(0x9, b"are you there"))          # a ping (answered), a preview image (skipped)
        server.received.append(_read_client_frame(conn))
        conn.sendall(_frame(0x2, b"\x00\x00\x00\x01" + b"p" * 70000))
        time.sleep(0.3)
        end = json.dumps({"type": "executing", "data": {"node": None, "prompt_id": "p1"}}).encode()
        conn.sendall(_frame(0x1, end[:20], fin=False) + _frame(0x0, end[20:]))  # the end, in two fragments
        time.sleep(0.3)
        conn.sendall(_frame(0x8, b""))
        _read_client_frame(conn)

    server = FakeServer(script)
    watcher = PromptWatcher(server.url, "abc")
    assert "clientId=abc" in server.request
    assert not watcher.wait_for("p1", 0.05)
    t0 = time.monotonic()
    go.set()
    assert watcher.wait_for("p1", 5)
    assert 0.25 < time.monotonic() - t0 < 3             # woken by the end, not by execution_success
    assert watcher.wait_for("p1", 0)                    # remembered
    assert not watcher.wait_for("p2", 0.01)
    t0 = time.monotonic()
    assert not watcher.wait_for("p2", 10) and not watcher.connected
    assert time.monotonic() - t0 < 3                    # a closed connection wakes the waiter (it polls instead)
    watcher.close()
    assert server.error is None, server.error
    assert server.received == [(0xA, b"are you there")]


def test_a_server_without_a_websocket_is_polled_and_not_asked_again_before_every_job(monkeypatch):
    """ComfyClient.wait still polls /history when no websocket answers; the batch backend does not retry the
    connection before every POST (a proxy that drops the upgrade would cost its timeout each time)."""
    import http.server

    from scripts.batch import servers as batch_servers
    from scripts.comfyui import client as comfy_client

    class Handler(http.server.BaseHTTPRequestHandler):
        polls = 0

        def do_GET(self):
            if self.path.startswith("/history/"):
                Handler.polls += 1
                entry = {"p1": {"status": {"status_str": "success", "completed": True, "messages": []},
                                "outputs": {}}} if Handler.polls >= 3 else {}
                body = json.dumps(entry).encode()
                self.send_response(200)
            else:
                body = b"no websocket here"
                self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"prompt_id": "p1", "number": 1, "node_errors": {}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        server = batch_servers.UrlServer(f"http://127.0.0.1:{httpd.server_address[1]}")
        tries = []
        real_watch = comfy_client.ComfyClient.watch
        monkeypatch.setattr(comfy_client.ComfyClient, "watch", lambda self: tries.append(1) or real_watch(self))
        server.submit({"1": {}}, "p1")
        assert tries == [1] and not server.client.watching()
        assert server.wait("p1", 30)["status"]["completed"] and Handler.polls >= 3
        server.submit({"1": {}}, "p1")
        assert tries == [1]  # not asked again within WATCH_RETRY
    finally:
        httpd.shutdown()
