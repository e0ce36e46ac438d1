"""What the running ComfyUI core can do for the editor, detected by feature, never by version string.

One pack runs on cores years apart (0.3.75 and 0.33.x in CI). Each check looks for the thing itself (a field of
`io.Schema`, a member of `io.UploadType`, a method of the prompt server), so a backport or a fork is handled right
and a version string is only ever logged. Every check takes the object it inspects as an argument (defaulting to the
running core's), so both branches are testable without a second core.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

# What users type into the node search, per node id: found through `search_aliases` where the core has them, and
# through the display name (the keywords in brackets) where it does not.
SEARCH_KEYWORDS: dict[str, tuple[str, ...]] = {
    "BroadcastOmniVoiceSpeak": ("tts", "text to speech", "voice clone"),
    "BroadcastVoicePrompt": ("voice clone", "tts"),
    "BroadcastOmniVoiceLoader": ("tts", "text to speech"),
    "BroadcastTextPrepare": ("tts", "script"),
    "BroadcastAudioMaster": ("loudness", "mastering"),
    "BroadcastCaptions": ("subtitles", "srt", "webvtt", "closed captions"),
    "BroadcastMuseTalkLipSync": ("lip sync", "talking head", "avatar"),
    "BroadcastMuseTalkAvatar": ("avatar", "lip sync"),
    "BroadcastDittoRender": ("talking head", "lip sync", "avatar"),
    "BroadcastDittoAvatar": ("avatar", "talking head"),
    "BroadcastSam3VideoMask": ("mask", "segment"),
    "BroadcastLatentInpaintMask": ("inpaint", "mask"),
    "BroadcastVaceSamplerMask": ("inpaint", "mask"),
    "BroadcastExportVideo": ("nvenc", "mp4", "encode"),
    "BroadcastLoadVideo": ("mp4", "video"),
}


def _io():
    from comfy_api.latest import io

    return io


def has_search_aliases(schema_cls: Any = None) -> bool:
    """True when node schemas take `search_aliases` (a dataclass field of `io.Schema` in newer cores)."""
    schema_cls = schema_cls if schema_cls is not None else _io().Schema
    return dataclasses.is_dataclass(schema_cls) and "search_aliases" in {f.name for f in dataclasses.fields(schema_cls)}


def upload_type(kind: str, io_module: Any = None) -> Optional[Any]:
    """The core's upload type for `kind` ("video", "audio"), or None where the core has no such upload widget (the
    pack's web extension then adds the button and the preview)."""
    io_module = io_module if io_module is not None else _io()
    upload = getattr(io_module, "UploadType", None)
    return getattr(upload, kind, None) if upload is not None else None


def has_progress_text(server: Any = None) -> bool:
    """True when the prompt server can show a line of text in a running node (`send_progress_text`)."""
    if server is None:
        try:
            from server import PromptServer

            server = PromptServer.instance
        except Exception:  # not inside a running ComfyUI (unit tests of the engines)
            return False
    return callable(getattr(server, "send_progress_text", None))


def searchable(node_id: str, display_name: str, schema_cls: Any = None) -> dict:
    """Schema keywords that make a node findable by what users type: `search_aliases` where supported, else the
    keywords appended to the display name, e.g. "Broadcast OmniVoice Speak (tts, text to speech, voice clone)"."""
    words = SEARCH_KEYWORDS.get(node_id, ())
    if not words:
        return {"display_name": display_name}
    if has_search_aliases(schema_cls):
        return {"display_name": display_name, "search_aliases": list(words)}
    missing = [w for w in words if w.lower() not in display_name.lower()]
    return {"display_name": f"{display_name} ({', '.join(missing)})" if missing else display_name}
