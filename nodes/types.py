"""Every custom IO type of the pack, in one place.

Each wraps a plain engine object (a frozen dataclass or a model holder from `engines/`); ComfyUI only carries it
between nodes. The type names are part of saved workflows: never rename one.
"""
from comfy_api.latest import io

PREFIX = "BROADCAST_"

# Wardrobe: geometry + the pixel-accurate blend mask of a subject crop, consumed only by the uncrop compositor.
CropRecord = io.Custom(PREFIX + "CROP_RECORD")

# SAM3: a loaded text-prompted video segmenter.
Sam3Model = io.Custom(PREFIX + "SAM3_MODEL")
# ComfyUI core's own SAM3 track data (comfy_extras/nodes_sam3.py, newer cores): not ours, so no prefix.
CoreSam3TrackData = io.Custom("SAM3_TRACK_DATA")

# OmniVoice: the loaded TTS model, a reusable voice-clone prompt, and text split into clauses for batching.
OmniVoiceModel = io.Custom(PREFIX + "OMNIVOICE_MODEL")
VoicePrompt = io.Custom(PREFIX + "VOICE_PROMPT")
Clauses = io.Custom(PREFIX + "CLAUSES")

# MuseTalk: loaded networks, per-frame face boxes of a loop, and a precompiled avatar loop.
MuseTalkModel = io.Custom(PREFIX + "MUSETALK_MODEL")
FaceTrack = io.Custom(PREFIX + "FACE_TRACK")
MuseTalkAvatar = io.Custom(PREFIX + "MUSETALK_AVATAR")

# Ditto: loaded networks, a registered avatar packet, audio features and a motion sequence.
DittoModel = io.Custom(PREFIX + "DITTO_MODEL")
DittoAvatar = io.Custom(PREFIX + "DITTO_AVATAR")
DittoAudioFeatures = io.Custom(PREFIX + "DITTO_AUDIO_FEATURES")
DittoMotion = io.Custom(PREFIX + "DITTO_MOTION")

# A renderer's frames not rendered yet (engines/common/frames.FrameStream): MuseTalk Lip Sync / Ditto Render hand it
# to Export Video, which pulls the chunks while it encodes, so a long clip never exists whole in memory.
FrameStream = io.Custom(PREFIX + "FRAME_STREAM")

# Captions: where each clause of the script is heard in the TTS output, with its written text (engines/captions/
# timing.CaptionTiming), and the laid-out captions with the outputs chosen for them (engines/captions/plan).
CaptionTiming = io.Custom(PREFIX + "CAPTION_TIMING")
Captions = io.Custom(PREFIX + "CAPTIONS")
