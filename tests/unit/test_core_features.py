"""nodes/core_features.py: each feature is detected from the object itself, both ways, with no second core needed."""
from __future__ import annotations

import dataclasses
import enum
import types

from nodes import core_features as cf


@dataclasses.dataclass
class OldSchema:            # the shape of 0.3.75's io.Schema: no search_aliases field
    node_id: str
    display_name: str = None


@dataclasses.dataclass
class NewSchema(OldSchema):  # newer cores add the field
    search_aliases: list = dataclasses.field(default_factory=list)


def test_search_aliases_where_the_schema_has_them():
    assert cf.has_search_aliases(NewSchema)
    out = cf.searchable("BroadcastOmniVoiceSpeak", "Broadcast OmniVoice Speak", NewSchema)
    assert out == {"display_name": "Broadcast OmniVoice Speak",
                   "search_aliases": ["tts", "text to speech", "voice clone"]}


def test_titles_never_carry_the_keywords():
    """Where the schema has no aliases the title stays as it is (the web extension gives the older frontend's
    search the aliases from SEARCH_ROUTE instead: tests/comfy/test_editor_first_hour.py types into it)."""
    assert not cf.has_search_aliases(OldSchema)
    assert cf.searchable("BroadcastOmniVoiceSpeak", "Broadcast OmniVoice Speak", OldSchema) == \
        {"display_name": "Broadcast OmniVoice Speak"}
    assert cf.searchable("SomethingElse", "Plain", NewSchema) == {"display_name": "Plain"}


def test_every_keyword_the_issue_names_finds_a_node():
    words = {w for ws in cf.SEARCH_KEYWORDS.values() for w in ws}
    for wanted in ("tts", "text to speech", "voice clone", "lip sync", "talking head", "avatar", "wardrobe",
                   "outfit", "mask", "inpaint", "loudness", "mastering", "qc", "export", "nvenc", "mp4"):
        assert wanted in words


def test_upload_types_only_where_the_core_defines_them():
    class UploadType(str, enum.Enum):
        image = "image_upload"
        audio = "audio_upload"
        video = "video_upload"

    with_uploads = types.SimpleNamespace(UploadType=UploadType)
    assert cf.upload_type("video", with_uploads) is UploadType.video
    assert cf.upload_type("audio", with_uploads) is UploadType.audio
    assert cf.upload_type("video", types.SimpleNamespace()) is None          # no UploadType at all
    assert cf.upload_type("model3d", with_uploads) is None                   # a kind this core lacks


def test_progress_text_where_the_server_can_send_it():
    assert cf.has_progress_text(types.SimpleNamespace(send_progress_text=lambda text, node_id: None))
    assert not cf.has_progress_text(types.SimpleNamespace())
