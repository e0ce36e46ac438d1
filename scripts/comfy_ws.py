"""ComfyUI's websocket (`/ws`) as a wake-up for a client waiting on a prompt. Only the standard library is used.

ComfyUI tells the client that queued a prompt (by its ``client_id``) when that prompt has ended, successfully or
not: an ``executing`` message with ``node: null`` and the prompt's id, sent by the prompt worker right *after* the
history entry is written (main.py, 0.3.75 and 0.33.0 alike; ``execution_success`` comes before it, when
/history may not have the entry yet). `PromptWatcher` holds one connection for one client id, records the ids of
the prompts that ended, and wakes whoever waits for one: `ComfyClient.wait` sleeps on it between /history polls
instead of a fixed delay, so the end of a prompt is seen as soon as the server says so rather than up to a polling
interval later. It is only a wake-up: /history stays the answer, and polling goes on (less often) should the
connection drop or a message be missed.

`WebSocket` is a minimal RFC 6455 client: the opening handshake (checking ``Sec-WebSocket-Accept``), unmasked server
frames of any length (fragments reassembled), ping answered with pong, close answered with close; frames it sends
are masked, as a client's must be. ``https`` URLs go over TLS.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import threading
import urllib.parse
from collections import OrderedDict
from typing import Optional, Union

ACCEPT_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 256 << 20  # preview images are the largest frames ComfyUI sends; anything beyond this is an error
REMEMBER = 4096          # ended prompt ids kept (a waiter checks right after its own prompt ends)

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class WebSocketError(OSError):
    """The server did not accept the websocket, or sent something that is not one."""


def _mask(payload: bytes, key: bytes) -> bytes:
    if not payload:
        return b""
    whole = (key * (len(payload) // 4 + 1))[:len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(whole, "big")).to_bytes(len(payload), "big")


class WebSocket:
    """One client connection. `recv()` returns the next text (str) or binary (bytes) message, None once closed."""

    def __init__(self, url: str, timeout: float = 5.0):
        parts = urllib.parse.urlsplit(url)
        tls = parts.scheme in ("https", "wss")
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if tls else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            if tls:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            key = base64.b64encode(os.urandom(16)).decode()
            sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                         .encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk or len(head) > 65536:
                    raise WebSocketError(f"{url}: the server closed the connection during the websocket handshake")
                head += chunk
            head, rest = head.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            status = lines[0].split()
            if len(status) < 2 or status[1] != "101":
                raise WebSocketError(f"{url}: no websocket here (the server answered {lines[0]!r})")
            headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            expect = base64.b64encode(hashlib.sha1((key + ACCEPT_GUID).encode()).digest()).decode()
            if headers.get("sec-websocket-accept") != expect:
                raise WebSocketError(f"{url}: the server's Sec-WebSocket-Accept does not match the key sent")
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._buf = bytearray(rest)
        self._send_lock = threading.Lock()
        self.closed = False

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise EOFError("the websocket connection was closed")
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def recv(self) -> Optional[Union[str, bytes]]:
        """The next message; None when the connection closed (either side), an error if the frames are bad."""
        if self.closed:
            return None
        message, kind = bytearray(), None
        try:
            while True:
                b0, b1 = self._read(2)
                fin, op = b0 & 0x80, b0 & 0x0F
                n = b1 & 0x7F
                if n == 126:
                    n = int.from_bytes(self._read(2), "big")
                elif n == 127:
                    n = int.from_bytes(self._read(8), "big")
                if n + len(message) > MAX_MESSAGE:
                    raise WebSocketError(f"a websocket message of more than {MAX_MESSAGE >> 20} MiB")
                key = self._read(4) if b1 & 0x80 else None
                payload = self._read(n)
                if key is not None:
                    payload = _mask(payload, key)
                if op == OP_CLOSE:
                    self._send(OP_CLOSE, payload[:2])
                    self.close()
                    return None
                if op == OP_PING:
                    self._send(OP_PONG, payload)
                    continue
                if op == OP_PONG:
                    continue
                if op in (OP_TEXT, OP_BINARY):
                    kind, message = op, bytearray(payload)
                elif op == OP_CONT and kind is not None:
                    message += payload
                else:
                    raise WebSocketError(f"unexpected websocket frame (opcode {op})")
                if fin:
                    return message.decode("utf-8", errors="replace") if kind == OP_TEXT else bytes(message)
        except (EOFError, OSError):
            if self.closed:
                return None
            self.close()
            raise

    def _send(self, op: int, payload: bytes = b"") -> None:
        key = os.urandom(4)
        n = len(payload)
        head = bytes([0x80 | op])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        with self._send_lock:
            self.sock.sendall(head + key + _mask(payload, key))

    def close(self) -> None:
        """Say goodbye (best effort) and close; a `recv()` blocked in another thread returns None."""
        if self.closed:
            return
        self.closed = True
        try:
            self._send(OP_CLOSE, (1000).to_bytes(2, "big"))
        except OSError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def ws_url(http_url: str, client_id: str) -> str:
    scheme, rest = http_url.rstrip("/").split("://", 1)
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws?clientId={urllib.parse.quote(client_id)}"


class PromptWatcher:
    """Follows one client id's websocket in a daemon thread and knows which of its prompts have ended.

    `wait_for(prompt_id, seconds)` returns True as soon as the prompt ended (at once if it already had), False
    after `seconds` or when the connection is gone (`connected` then says so; the caller polls instead).
    """

    def __init__(self, url: str, client_id: str, timeout: float = 5.0):
        self.ws = WebSocket(ws_url(url, client_id), timeout=timeout)
        self.ws.sock.settimeout(None)  # the reader blocks until a message comes or close() shuts the socket
        self.cond = threading.Condition()
        self.ended: OrderedDict = OrderedDict()
        self.connected = True
        self.thread = threading.Thread(target=self._read, name="comfy-ws", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                raw = self.ws.recv()
                if raw is None:
                    break
                if not isinstance(raw, str):
                    continue  # binary preview frames
                try:
                    message = json.loads(raw)
                except ValueError:
                    continue
                data = message.get("data") if isinstance(message, dict) else None
                if (isinstance(data, dict) and message.get("type") == "executing" and data.get("node") is None
                        and isinstance(data.get("prompt_id"), str)):
                    with self.cond:
                        self.ended[data["prompt_id"]] = None
                        while len(self.ended) > REMEMBER:
                            self.ended.popitem(last=False)
                        self.cond.notify_all()
        except (OSError, EOFError, ValueError):
            pass
        finally:
            with self.cond:
                self.connected = False
                self.cond.notify_all()

    def wait_for(self, prompt_id: str, seconds: float) -> bool:
        with self.cond:
            self.cond.wait_for(lambda: prompt_id in self.ended or not self.connected, timeout=max(seconds, 0))
            return prompt_id in self.ended

    def close(self) -> None:
        self.ws.close()
        self.thread.join(5)
