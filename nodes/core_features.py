"""What the running ComfyUI core can do for the editor, detected by feature, never by version string.

One pack runs on cores years apart (0.3.75 and 0.33.x in CI). Each check looks for the thing itself (a field of
`io.Schema`, a member of `io.UploadType`, a method of the prompt server), so a backport or a fork is handled right
and a version string is only ever logged. Every check takes the object it inspects as an argument (defaulting to the
running core's), so both branches are testable without a second core.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

# What users type into the node search, per node id. Where the core's schema has `search_aliases` (0.33.0: frontend
# 1.49 searches them) they go there; elsewhere the titles stay as they are and the pack's web extension gives the
# older frontend's search (1.32, which indexes only name and display_name) the same aliases, served by
# SEARCH_ROUTE (web/js/broadcast_media.js). Display names never carry them.
_WARDROBE = ("wardrobe", "outfit", "inpaint", "mask")
SEARCH_KEYWORDS: dict[str, tuple[str, ...]] = {
    "BroadcastOmniVoiceLoader": ("tts", "text to speech", "voice clone"),
    "BroadcastVoicePrompt": ("voice clone", "tts", "text to speech"),
    "BroadcastOmniVoiceSpeak": ("tts", "text to speech", "voice clone"),
    "BroadcastOmniVoiceDialogue": ("tts", "text to speech", "dialogue"),
    "BroadcastVoiceMorph": ("tts", "voice clone"),
    "BroadcastTextPrepare": ("tts", "text to speech", "script"),
    "BroadcastAudioMaster": ("loudness", "mastering", "lufs"),
    "BroadcastSpeechVerify": ("tts", "qc", "transcribe"),
    "BroadcastMuseTalkLoader": ("lip sync", "talking head", "avatar"),
    "BroadcastFaceTrack": ("lip sync", "avatar", "face"),
    "BroadcastMuseTalkAvatar": ("avatar", "lip sync", "talking head"),
    "BroadcastCaptions": ("subtitles", "captions", "srt", "webvtt", "closed captions"),
    "BroadcastMuseTalkLipSync": ("lip sync", "talking head", "avatar"),
    "BroadcastDittoLoader": ("talking head", "lip sync", "avatar"),
    "BroadcastDittoAvatar": ("avatar", "talking head", "lip sync"),
    "BroadcastDittoAudioFeatures": ("talking head", "lip sync"),
    "BroadcastDittoMotion": ("talking head", "lip sync"),
    "BroadcastDittoRender": ("talking head", "lip sync", "avatar"),
    "BroadcastSam3Loader": ("mask", "segment", "wardrobe"),
    "BroadcastSam3VideoMask": ("mask", "segment", "wardrobe", "outfit"),
    "BroadcastSam3TrackToMasks": ("mask", "segment", "wardrobe"),
    "BroadcastMaskShield": _WARDROBE,
    "BroadcastPixelMaskRefine": _WARDROBE,
    "BroadcastMaskGrow": _WARDROBE,
    "BroadcastMaskCombine": _WARDROBE,
    "BroadcastSubjectCrop": _WARDROBE,
    "BroadcastLatentInpaintMask": _WARDROBE,
    "BroadcastSubjectUncrop": _WARDROBE,
    "BroadcastRepasteLayer": _WARDROBE,
    "BroadcastMaskSequenceCache": _WARDROBE,
    "BroadcastMaskCheckPreview": _WARDROBE,
    "BroadcastConditioningCache": ("wardrobe", "outfit"),
    "BroadcastVaceSamplerMask": _WARDROBE,
    "BroadcastQC": ("qc", "quality check", "loudness"),
    "BroadcastExportVideo": ("export", "nvenc", "mp4", "encode"),
    "BroadcastLoadVideo": ("mp4", "video"),
    "BroadcastLoadAudio": ("audio", "wav"),
}
SEARCH_ROUTE = "/broadcast_avatar/search_keywords"


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
    """Schema fields that make a node findable by what users type: `search_aliases` where the schema has them; the
    display name (the node's title) unchanged everywhere (older cores get the aliases through SEARCH_ROUTE)."""
    words = SEARCH_KEYWORDS.get(node_id, ())
    if words and has_search_aliases(schema_cls):
        return {"display_name": display_name, "search_aliases": list(words)}
    return {"display_name": display_name}


def register_search_route() -> None:
    """GET SEARCH_ROUTE -> SEARCH_KEYWORDS, for the web extension to give an older frontend's search the aliases."""
    try:
        from aiohttp import web
        from server import PromptServer

        routes = PromptServer.instance.routes
    except Exception:  # not inside a running ComfyUI server
        return

    @routes.get(SEARCH_ROUTE)
    async def _keywords(request):
        return web.json_response({k: list(v) for k, v in SEARCH_KEYWORDS.items()})
