"""Broadcast QC: file-based quality control of a finished clip, the way a newsroom checks before air.

Streaming meters (`audio_meter`, `picture_meter`, fed by `source`) keep a few numbers per time bin; `checks` turns
them into pass / fail / skip answers against `limits` (each naming its standard: EBU R128 / ITU-R BS.1770-4, EBU
Tech 3342, EBU R103, EBU R37, ...); `lipsync` estimates the audio offset from mouth motion; `plot` draws the sheet;
`run` ties them together. Loudness uses pyloudnorm's K-weighting, true peak the one >= 192 kHz implementation the mastering limiter uses (`engines/common/true_peak.py`),
intelligibility the OmniVoice family's Whisper transcription and word-accuracy scoring.
"""
from .limits import DEFAULT_PROFILE, LAYOUTS, PROFILE_CHOICES, THRESHOLDS, QCLimits
from .run import QCResult, qc_file, qc_frames

__all__ = ["DEFAULT_PROFILE", "LAYOUTS", "PROFILE_CHOICES", "THRESHOLDS", "QCLimits", "QCResult", "qc_file",
           "qc_frames"]
