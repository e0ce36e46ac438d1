"""What the editor gets from the pack on this core: search keywords in /object_info, live progress text in a running
node (feature-detected: nodes/core_features.py)."""
from __future__ import annotations

import struct
import threading

from scripts.workflow.api import apply_overrides, load_workflow
from tests.workflow_cases import case_for, shipped_api_twin

KEYWORD_NODES = {"BroadcastOmniVoiceSpeak": ("tts", "text to speech", "voice clone"),
                 "BroadcastMuseTalkLipSync": ("lip sync", "talking head", "avatar"),
                 "BroadcastExportVideo": ("nvenc", "mp4")}


def test_search_keywords_reach_the_editor(comfy):
    info = comfy.object_info()
    status, served = comfy.request("GET", "/broadcast_avatar/search_keywords")
    assert status == 200
    for node_id, words in KEYWORD_NODES.items():
        spec = info[node_id]
        # Where the core has search aliases they carry the keywords; elsewhere the pack serves them to its web
        # extension (which gives the older frontend's search index the same aliases); the title never does.
        aliases = spec.get("search_aliases") or served.get(node_id, [])
        assert "(" not in spec["display_name"], spec["display_name"]
        for word in words:
            assert word in " ".join(aliases).lower(), f"{node_id}: '{word}' not in {aliases}"


def test_long_nodes_show_live_progress_text(comfy):
    """The export's live progress text reaches the websocket, ending with the finished line. The reader stops on the
    prompt's own end message read from the same socket (ComfyUI sends a client's messages in order, the progress text
    before execution_success), never after a delay, so a loaded machine cannot cut the last line off."""
    import json
    import uuid

    import websocket

    ws = websocket.create_connection(comfy.url.replace("http", "ws", 1) + f"/ws?clientId={comfy.client_id}",
                                     timeout=10)
    texts, ended, prompt_id = [], threading.Event(), str(uuid.uuid4())   # chosen here: known before its messages

    def read():
        ws.settimeout(300)
        while not ended.is_set():
            try:
                msg = ws.recv()
            except Exception:
                break
            if isinstance(msg, bytes):
                if len(msg) > 8 and struct.unpack(">I", msg[:4])[0] == 3:
                    n = struct.unpack(">I", msg[4:8])[0]
                    texts.append((msg[8:8 + n].decode(), msg[8 + n:].decode(errors="replace")))
                continue
            event = json.loads(msg)
            data = event.get("data") or {}
            if event.get("type") in ("execution_success", "execution_error", "execution_interrupted") \
                    and data.get("prompt_id") == prompt_id:
                ended.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        prompt, _ = load_workflow(shipped_api_twin("demo_export"))
        overrides = case_for("demo_export").prepare(comfy)
        overrides["Broadcast Export Video.filename_prefix"] = "broadcast/progress_text"
        comfy.queue(apply_overrides(prompt, overrides, comfy.object_info()), prompt_id=prompt_id)
        comfy.finish(prompt_id)
        assert ended.wait(120), "the websocket never brought the prompt's end message"
    finally:
        ended.set()
        ws.close()
        reader.join(timeout=10)
    export_id = next(k for k, n in prompt.items() if n["class_type"] == "BroadcastExportVideo")
    lines = [t for node, t in texts if node == export_id]
    assert lines and all(" done" in t for t in lines), f"progress text of the export node: {texts}"
    done, total = lines[-1].split(" ")[0].split("/")
    assert done == total, f"the last progress line is not the finished one: {lines}"
