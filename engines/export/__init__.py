"""Export: a streaming, one-pass, atomic MP4 writer (NVENC with a libx264 fallback, AAC in the same pass), the
matching streaming reader for the Load nodes, and output-path checks (the synthetic sample clip
is a fixture: `scripts/sample_clip.py`).

Every clip is written by `write_stream` (Export, and the MuseTalk and Ditto renderers, whose frame-chunk generators
it consumes, so a long render never exists whole in memory).
"""
from .audio_track import AudioTrack
from .encoders import choose_encoder, probe_encoder, reset_probe_cache
from .paths import OutputName, check_prefix, next_output
from .settings import AUDIO_MODES, ENCODER_CHOICES, PRESET_CHOICES, RATE_CONTROLS, TUNE_CHOICES, EncodeSettings
from .subtitle_track import SubtitleTrack
from .writer import ExportResult, VideoWriter, split_frames, write_stream

__all__ = [
    "AudioTrack", "EncodeSettings", "SubtitleTrack", "ExportResult", "VideoWriter", "OutputName",
    "AUDIO_MODES", "ENCODER_CHOICES", "PRESET_CHOICES", "RATE_CONTROLS", "TUNE_CHOICES",
    "check_prefix", "choose_encoder", "next_output", "probe_encoder", "reset_probe_cache", "split_frames",
    "write_stream",
]
