"""ComfyUI's websocket (`/ws`) as a wake-up for a client waiting on a prompt, through websocket-client.

ComfyUI tells the client that queued a prompt (by its ``client_id``) when that prompt has ended, successfully or
not: an ``executing`` message with ``node: null`` and the prompt's id, sent by the prompt worker right *after* the
history entry is written (main.py, 0.3.75 and 0.33.0 alike; ``execution_success`` comes before it, when
/history may not have the entry yet). `PromptWatcher` holds one connection for one client id, records the ids of
the prompts that ended, and wakes whoever waits for one: `ComfyClient.wait` sleeps on it between /history polls
instead of a fixed delay, so the end of a prompt is seen as soon as the server says so rather than up to a polling
interval later. It is only a wake-up: /history stays the answer, and polling goes on (less often) should the
connection drop, a message be missed, or websocket-client (scripts/env/test.txt, the runner's environment) be
missing: every failure to connect is an `OSError` the caller turns into polling.
"""
from __future__ import annotations

import json
import threading
import urllib.parse
from collections import OrderedDict

REMEMBER = 4096          # ended prompt ids kept (a waiter checks right after its own prompt ends)


def connect(url: str, timeout: float = 5.0):
    """A websocket-client connection to `url` (ws:// or wss://); OSError naming the reason if there is none."""
    try:
        import websocket  # websocket-client
    except ImportError as exc:
        raise OSError("websocket-client is not installed (pip install websocket-client): polling /history "
                      "instead") from exc
    try:
        return websocket.create_connection(url, timeout=timeout, enable_multithread=True)
    except websocket.WebSocketException as exc:  # no upgrade (e.g. 404), a bad accept key, a bad frame
        raise OSError(f"{url}: no websocket here ({exc})") from exc


def ws_url(http_url: str, client_id: str) -> str:
    scheme, rest = http_url.rstrip("/").split("://", 1)
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws?clientId={urllib.parse.quote(client_id)}"


class PromptWatcher:
    """Follows one client id's websocket in a daemon thread and knows which of its prompts have ended.

    `wait_for(prompt_id, seconds)` returns True as soon as the prompt ended (at once if it already had), False
    after `seconds` or when the connection is gone (`connected` then says so; the caller polls instead).
    """

    def __init__(self, url: str, client_id: str, timeout: float = 5.0):
        self.ws = connect(ws_url(url, client_id), timeout=timeout)
        self.ws.settimeout(None)  # the reader blocks until a message comes or close() shuts the socket
        self.cond = threading.Condition()
        self.ended: OrderedDict = OrderedDict()
        self.connected = True
        self.thread = threading.Thread(target=self._read, name="comfy-ws", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                raw = self.ws.recv()
                if raw == "":
                    break  # the server's close (answered by websocket-client); ComfyUI sends no empty text
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
        except Exception:  # websocket-client's closed-connection and protocol errors, socket errors: polling
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
        """Say goodbye (best effort), wake the reader blocked in recv, close."""
        try:
            self.ws.send_close()
        except Exception:
            pass
        self.ws.abort()
        self.thread.join(5)
        self.ws.shutdown()
