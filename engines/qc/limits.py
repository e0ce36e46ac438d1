"""Every QC threshold in one table: its default, its range and the standard it follows.

The node builds one widget per row (so the tooltips name the standard), and `QCLimits` holds the values the checks
compare against. Defaults are the delivery specs a newsroom works to:

- loudness and true peak: a delivery profile (`engines/common/delivery.py`, the same table Audio Master aims at:
  EBU R128, ATSC A/85, streaming, podcast) sets target, tolerance and ceiling; `custom` uses the three widgets;
  loudness range at most 15 LU (EBU Tech 3343's guidance for speech-led programmes);
- video levels: EBU R103 (luma -1 % .. 103 %, chroma within the same share of its excursion, violations over less than
  1 % of the picture tolerated);
- black frames: FFmpeg blackdetect's picture rule (98 % of pixels below 10 % luma);
- freeze: any picture unchanged for 0.5 s or longer (a talking head is never still that long);
- lip sync: EBU R37 (sound at most 40 ms early or 60 ms late).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple


class Threshold(NamedTuple):
    name: str
    default: float
    minimum: float
    maximum: float
    step: float
    tooltip: str


from ..common import delivery

PROFILE_CHOICES = delivery.CHOICES
DEFAULT_PROFILE = delivery.DEFAULT

THRESHOLDS = (
    Threshold("target_lufs", -14.0, -40.0, 0.0, 0.1,
              "Integrated loudness target in LUFS (ITU-R BS.1770 gated measurement), used when the delivery profile "
              "is 'custom'. Streaming platforms deliver at -14, EBU R128 broadcast at -23, ATSC A/85 at -24."),
    Threshold("loudness_tolerance_lu", 1.0, 0.1, 5.0, 0.1,
              "Allowed deviation of the integrated loudness from the target, in LU, with the 'custom' profile "
              "(EBU R128 v5: +-0.2 LU in file QC, +-1 LU live; ATSC A/85: +-2 dB)."),
    Threshold("max_true_peak_dbtp", -1.0, -10.0, 0.0, 0.1,
              "Highest allowed true peak in dBTP with the 'custom' profile (ITU-R BS.1770-5 annex 2, over-sampled "
              "to >= 192 kHz at every rate; EBU R128 and streaming: -1 dBTP, ATSC A/85: -2)."),
    Threshold("max_loudness_range_lu", 15.0, 1.0, 40.0, 0.5,
              "Highest allowed loudness range (LRA, EBU Tech 3342: 10th-95th percentile of gated short-term "
              "loudness). EBU Tech 3343 suggests at most ~15 LU for speech."),
    Threshold("min_speech_dbfs", -40.0, -70.0, -10.0, 1.0,
              "RMS level (dBFS, 10 ms windows) above which audio counts as speech; silence and dropouts are only "
              "looked for between the first and the last speech."),
    Threshold("dropout_ms", 20.0, 2.0, 500.0, 1.0,
              "Digital silence (below -90 dBFS) at least this long, cut into speech (sound right before and after), "
              "is a dropout (file-QC practice: any mid-speech cut-out of 20 ms is audible)."),
    Threshold("max_silence_s", 2.0, 0.1, 30.0, 0.1,
              "Longest allowed stretch below the speech level between the first and the last speech, in seconds "
              "(newsroom file QC flags dead air of 2 s and more)."),
    Threshold("max_clipped_samples", 0.0, 0.0, 100000.0, 1.0,
              "Samples allowed at or above full scale (|x| >= 0.999, 'over' in EBU Tech 3341 meter terms). A "
              "decoded AAC track of clipped audio overshoots full scale, so any over means the mix was clipped."),
    Threshold("max_dc_offset_percent", 1.0, 0.01, 20.0, 0.01,
              "Largest allowed DC offset (mean of each channel) in percent of full scale (AES17 practice: 1 %, "
              "-40 dBFS)."),
    Threshold("sample_rate_hz", 48000.0, 8000.0, 192000.0, 1.0,
              "Required audio sample rate (EBU R128 / broadcast delivery: 48 kHz)."),
    Threshold("luma_min_percent", -1.0, -10.0, 10.0, 0.1,
              "Lowest legal luma in percent of the declared range (0 % = code 16, 100 % = 235 in limited range; "
              "EBU R103: -1 %)."),
    Threshold("luma_max_percent", 103.0, 90.0, 110.0, 0.1,
              "Highest legal luma in percent of the declared range (EBU R103: 103 %; 100 % = code 235)."),
    Threshold("chroma_max_percent", 103.0, 90.0, 110.0, 0.1,
              "Largest legal chroma excursion from neutral in percent of the nominal +-112 codes (limited range "
              "16-240; EBU R103 allows the same 3 % headroom as luma)."),
    Threshold("max_out_of_range_area_percent", 1.0, 0.0, 100.0, 0.1,
              "A frame is out of range when more than this share of its pixels is (EBU R103: gamut errors over "
              "less than 1 % of the picture are tolerated)."),
    Threshold("black_luma_percent", 10.0, 0.0, 50.0, 0.5,
              "Luma (percent of range) under which a pixel counts as black (FFmpeg blackdetect pix_th 0.10)."),
    Threshold("black_area_percent", 98.0, 50.0, 100.0, 0.5,
              "A frame is black when this share of its pixels is (FFmpeg blackdetect pic_th 0.98)."),
    Threshold("max_black_s", 0.0, 0.0, 10.0, 0.04,
              "Longest allowed run of black frames in seconds (0: none; a news clip has no black)."),
    Threshold("freeze_noise", 0.5, 0.0, 10.0, 0.05,
              "A picture is unchanged when no 16x16 analysis block moves more than this many 8-bit code values on "
              "average (mean absolute difference; FFmpeg freezedetect measures the same way, over the whole frame)."),
    Threshold("max_freeze_s", 0.5, 0.04, 10.0, 0.04,
              "Longest allowed run of unchanged pictures in seconds (a talking head never holds still this long)."),
    Threshold("max_face_flicker", 8.0, 1.0, 100.0, 0.5,
              "Largest allowed flicker of the face region in 8-bit codes: a frame brighter or darker than both of "
              "its neighbours, taken as the median over the region's blocks (frame-difference statistics; a pasted "
              "mouth patch that pops shows up here, the mouth's own motion does not)."),
    Threshold("max_av_difference_frames", 1.0, 0.0, 25.0, 0.5,
              "Largest allowed difference between the declared audio and video durations, in video frames (one "
              "frame: a muxer's rounding)."),
    Threshold("max_audio_early_ms", 40.0, 0.0, 500.0, 1.0,
              "Largest allowed audio lead over the lips in ms with the 'custom' lip-sync tolerance (EBU R37: 40 ms; "
              "ATSC IS-191: 15; ITU-R BT.1359 detectability 45, acceptability 90)."),
    Threshold("max_audio_late_ms", 60.0, 0.0, 500.0, 1.0,
              "Largest allowed audio lag behind the lips in ms with the 'custom' lip-sync tolerance (EBU R37: 60 ms; "
              "ATSC IS-191: 45; ITU-R BT.1359 detectability 125, acceptability 185)."),
    Threshold("min_sync_confidence", 0.45, 0.0, 1.0, 0.01,
              "Lowest peak correlation (mouth-block luma against the audio level) for a lip-sync verdict, on top of "
              "significance (p <= 0.01 against 99 rotations of the clip's own audio). 0.45 is calibrated on "
              "unrelated espeak-ng pairs (their best correlation reached 0.38 in 24 pairs; synchronous clips "
              "0.52-0.65). Below either, the check is inconclusive, never failed."),
    Threshold("min_word_accuracy", 0.9, 0.0, 1.0, 0.01,
              "Lowest allowed Whisper word accuracy (1 - WER after normalisation) against the expected text."),
)

DEFAULTS = {t.name: t.default for t in THRESHOLDS}


@dataclass(frozen=True)
class QCLimits:
    """The values every check compares against (defaults as in `THRESHOLDS`)."""

    target_lufs: float = DEFAULTS["target_lufs"]
    loudness_tolerance_lu: float = DEFAULTS["loudness_tolerance_lu"]
    max_true_peak_dbtp: float = DEFAULTS["max_true_peak_dbtp"]
    max_loudness_range_lu: float = DEFAULTS["max_loudness_range_lu"]
    min_speech_dbfs: float = DEFAULTS["min_speech_dbfs"]
    dropout_ms: float = DEFAULTS["dropout_ms"]
    max_silence_s: float = DEFAULTS["max_silence_s"]
    max_clipped_samples: float = DEFAULTS["max_clipped_samples"]
    max_dc_offset_percent: float = DEFAULTS["max_dc_offset_percent"]
    sample_rate_hz: float = DEFAULTS["sample_rate_hz"]
    luma_min_percent: float = DEFAULTS["luma_min_percent"]
    luma_max_percent: float = DEFAULTS["luma_max_percent"]
    chroma_max_percent: float = DEFAULTS["chroma_max_percent"]
    max_out_of_range_area_percent: float = DEFAULTS["max_out_of_range_area_percent"]
    black_luma_percent: float = DEFAULTS["black_luma_percent"]
    black_area_percent: float = DEFAULTS["black_area_percent"]
    max_black_s: float = DEFAULTS["max_black_s"]
    freeze_noise: float = DEFAULTS["freeze_noise"]
    max_freeze_s: float = DEFAULTS["max_freeze_s"]
    max_face_flicker: float = DEFAULTS["max_face_flicker"]
    max_av_difference_frames: float = DEFAULTS["max_av_difference_frames"]
    max_audio_early_ms: float = DEFAULTS["max_audio_early_ms"]
    max_audio_late_ms: float = DEFAULTS["max_audio_late_ms"]
    min_sync_confidence: float = DEFAULTS["min_sync_confidence"]
    min_word_accuracy: float = DEFAULTS["min_word_accuracy"]
    # "mono", "stereo" or "mono_or_stereo" (EBU R128 measures either; 5.1 is not a talking-head delivery).
    channel_layout: str = "mono_or_stereo"
    # The speech's language (es, en): the word check compares Whisper's words with the script in spoken form
    # (engines/omnivoice/verify.py); empty: compared as written.
    language: str = ""
    # The delivery profile the loudness and true-peak limits came from, and its source (custom: the widgets).
    # The lip-sync tolerance profile (engines/qc/lipsync.TOLERANCES; custom: the two widgets).
    lipsync_tolerance: str = "EBU R37"
    delivery_profile: str = delivery.CUSTOM
    profile_source: str = "the node's target_lufs, loudness_tolerance_lu and max_true_peak_dbtp"

    @classmethod
    def from_values(cls, values: dict, preset: str = DEFAULT_PROFILE,
                    input_name: str = "loudness_preset") -> "QCLimits":
        """Limits from widget values (unknown keys ignored); a delivery profile other than 'custom' sets target,
        tolerance and true-peak ceiling (an older saved loudness preset is mapped to its profile)."""
        from ..common.errors import InputError

        chosen = delivery.profile(preset, input_name)
        names = {f.name for f in fields(cls)}
        kept = {k: (v if k in TEXT_SETTINGS else float(v)) for k, v in values.items() if k in names}
        for t in THRESHOLDS:
            if t.name in kept and not t.minimum <= kept[t.name] <= t.maximum:
                raise InputError(t.name, f"a value from {t.minimum:g} to {t.maximum:g}", f"{kept[t.name]:g}")
        if chosen is not None:
            kept.update(target_lufs=chosen.target_lufs, loudness_tolerance_lu=chosen.tolerance_lu,
                        max_true_peak_dbtp=chosen.max_true_peak_dbtp, delivery_profile=chosen.name,
                        profile_source=chosen.source)
        from .lipsync import tolerance

        tolerance(kept.get("lipsync_tolerance", "EBU R37"), 0.0, 0.0)  # an unknown name is refused here
        layout = kept.get("channel_layout", "mono_or_stereo")
        if layout not in LAYOUTS:
            raise InputError("channel_layout", f"one of {', '.join(LAYOUTS)}", repr(layout))
        return cls(**kept)


LAYOUTS = ("mono_or_stereo", "stereo", "mono")
TEXT_SETTINGS = ("channel_layout", "language", "delivery_profile", "profile_source", "lipsync_tolerance")   # QCLimits fields that are words, not numbers
