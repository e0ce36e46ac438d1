"""Broadcast QC node: a finished clip (VIDEO, or frames + AUDIO) in, a pass/fail verdict, a report and a sheet out.

All work is in `engines/qc/`. The node never blocks the export that feeds it: a failing clip is reported, not
raised (only unusable inputs raise). Its UI output carries `broadcast_qc`: a list with one
`{"verdict", "failed", "report"}` dict, which the batch runner records in its ledger.
"""
from __future__ import annotations

import inspect
import json
import logging

import numpy as np
import torch
from comfy_api.latest import InputImpl, io, ui

from ..engines.common.audio import check_audio
from ..engines.common.errors import InputError
from ..engines.common.images import check_image_batch
from ..engines.omnivoice import asr
from ..engines.captions import check as caption_checks
from ..engines.common import delivery
from ..engines.qc import lipsync
from ..engines.qc import DEFAULT_PROFILE, LAYOUTS, PROFILE_CHOICES, THRESHOLDS, QCLimits, qc_file, qc_frames
from . import comfy_bridge, core_features, types
from .inputs import validate
from .model_check import loader_check
from .tts_common import WHISPER_NONE, load_whisper, whisper_names

log = logging.getLogger("broadcast_avatar.qc")
CATEGORY = comfy_bridge.category("qc")
UI_KEY = "broadcast_qc"  # the batch runner's contract (team brief): a list with one verdict dict


# Marked advanced where the core's widget inputs take the flag (newer cores; 0.3.75's Float.Input does not): the
# frontend then folds the 25 limits away until asked. Detected from the signature, never from a version string.
ADVANCED = {"advanced": True} if "advanced" in inspect.signature(io.Float.Input.__init__).parameters else {}


def _threshold_inputs() -> list:
    return [io.Float.Input(t.name, default=t.default, min=t.minimum, max=t.maximum, step=t.step, tooltip=t.tooltip,
                           **ADVANCED) for t in THRESHOLDS]


def _transcriber(whisper_model: str, language: str):
    if whisper_model == WHISPER_NONE:
        return None
    whisper = load_whisper(whisper_model)

    def transcribe(samples: np.ndarray, rate: int) -> str:
        windows = int(samples.size / rate // asr.WINDOW_S) + 1
        return asr.transcribe(whisper, samples, rate, language.strip() or None, comfy_bridge.progress(windows))

    return transcribe


class BroadcastQC(io.ComfyNode):
    """Checks a finished clip the way a newsroom's file QC would: loudness, levels, freezes, sync, words."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastQC",
            **core_features.searchable("BroadcastQC", "Broadcast QC"),
            category=CATEGORY,
            description="Quality control of a finished clip, streamed: loudness / LRA / true peak (EBU R128, "
                        "BS.1770-5, by delivery profile), legal levels and colour tags (EBU R103), black / frozen frames, face flicker, "
                        "silence, dropouts, clipping, DC, A/V durations, lip-sync offset (EBU R37) and, with a "
                        "Whisper model, word accuracy. A failing clip is reported, never blocked.",
            inputs=[
                io.Float.Input("fps", default=25.0, min=1.0, max=240.0, step=0.001,
                               tooltip="Frame rate of 'images' (a video carries its own)."),
                io.String.Input("expected_text", multiline=True, default="",
                                tooltip="What the presenter should say (the script). With a Whisper model, the "
                                        "words heard are scored against it; empty skips that check."),
                io.Combo.Input("whisper_model", options=[WHISPER_NONE] + whisper_names(), default=WHISPER_NONE,
                               tooltip="A local Whisper folder in models/whisper for the intelligibility check "
                                       "(never downloaded); (none) skips it with a note."),
                io.String.Input("language", default="",
                                tooltip="Whisper language code (en, es); empty lets Whisper detect it. With es or en "
                                        "the words are compared in spoken form ('42,5%' = 'cuarenta y dos coma "
                                        "cinco por ciento')."),
                # Saved as loudness_preset (its place and name in older workflows); older values are mapped.
                io.Combo.Input("loudness_preset", options=list(PROFILE_CHOICES), default=DEFAULT_PROFILE,
                               display_name="delivery_profile",
                               tooltip=delivery.tooltip("target_lufs, loudness_tolerance_lu and "
                                                        "max_true_peak_dbtp below") +
                                       "\nNot used when 'delivery' is linked from the Audio Master that made the sound."),
                io.Combo.Input("channel_layout", options=list(LAYOUTS), default="mono_or_stereo",
                               tooltip="Required audio layout (EBU R128 meters mono and stereo alike)."),
                *_threshold_inputs(),
                # After the thresholds, optional: older saved workflows keep every value in its place.
                io.Combo.Input("lipsync_tolerance", options=[*lipsync.TOLERANCES, lipsync.CUSTOM],
                               default=lipsync.DEFAULT_TOLERANCE, optional=True,
                               tooltip="Lip-sync tolerance (audio early / late):\n" + "\n".join(
                                   f"- {t.name}: {t.source}" for t in lipsync.TOLERANCES.values()) +
                                       "\n- custom: max_audio_early_ms / max_audio_late_ms.\nA verdict needs "
                                       "evidence beyond chance (p <= 0.01 against the clip's audio rotated); "
                                       "otherwise the check is inconclusive (too little speech, no visible mouth, "
                                       "no significant correlation) and never fails the clip."),
                # Links last: the editor lists required inputs before optional ones, so this keeps one order.
                io.String.Input("delivery", optional=True, force_input=True,
                                tooltip="Broadcast Audio Master's 'delivery' output: when linked, loudness and true "
                                        "peak are checked against what the master was set to (its profile, or its "
                                        "custom target and ceiling with this node's tolerance), and this node's "
                                        "delivery_profile is not used. The profile is then chosen once."),
                io.Video.Input("video", optional=True,
                               tooltip="The exported clip (Broadcast Export Video's 'video'). Streamed from its "
                                       "file, never loaded whole."),
                io.Image.Input("images", optional=True,
                               tooltip="Instead of a video: frames [frames, height, width, 3], measured as the "
                                       "export would encode them (BT.601 limited range)."),
                io.Audio.Input("audio", optional=True, tooltip="The soundtrack that goes with 'images'."),
                types.Captions.Input("captions", optional=True,
                                     tooltip="From Broadcast Captions (the plan Export Video wrote): every caption "
                                             "over speech, none over long silence, reading speed and line limits, "
                                             "and the MP4 track and sidecar files read back as the same cues."),
            ],
            outputs=[
                io.Boolean.Output("passed", display_name="passed", tooltip="True when no check failed."),
                io.String.Output("verdict", display_name="verdict", tooltip="'pass' or 'fail'."),
                io.String.Output("report", display_name="report", tooltip="One line per check, in words."),
                io.String.Output("report_json", display_name="report_json",
                                 tooltip="Every measurement, limit and standard as JSON (what the batch runner "
                                         "records)."),
                io.Image.Output("sheet", display_name="sheet",
                                tooltip="Contact strip, loudness over time and the problems on a timeline."),
            ],
            is_output_node=True,
        )

    @classmethod
    def validate_inputs(cls, loudness_preset=None, whisper_model=None):
        # whisper_model: the graph's missing-model list (nodes/model_check.py). loudness_preset: named so that saved
        # workflows' older preset names still load (core refuses a value outside the combo of an input not named
        # here). ComfyUI repeats a refusal under every input named, so no other is: core checks channel_layout and
        # lipsync_tolerance (0.3.75, which does not, gets execute's refusal by name).
        found = loader_check("whisper", "whisper_model", whisper_model)
        if found is not True:
            return found
        return validate(("loudness_preset", loudness_preset, tuple(PROFILE_CHOICES), delivery.LEGACY))

    @classmethod
    def execute(cls, fps, expected_text, whisper_model, language, loudness_preset, channel_layout, video=None,
                images=None, audio=None, captions=None, lipsync_tolerance=lipsync.DEFAULT_TOLERANCE,
                delivery=None, **thresholds) -> io.NodeOutput:
        if delivery is not None:  # the master's choice wins over this node's combo: one profile per graph
            loudness_preset, figures = _delivery_handoff(delivery)
            thresholds.update(figures)
        limits = QCLimits.from_values({**thresholds, "channel_layout": channel_layout, "language": language.strip(),
                                       "lipsync_tolerance": lipsync_tolerance}, loudness_preset)
        transcribe = _transcriber(whisper_model, language) if expected_text.strip() else None
        caption_report = None
        if captions is not None:  # measured first: the caption checks join the verdict, the text and the sheet
            path = _file_of(video)
            whisper = load_whisper(whisper_model) if path is not None and whisper_model != WHISPER_NONE else None
            caption_report = caption_checks.for_qc(captions, path, whisper, language.strip() or None,
                                                   comfy_bridge.progress)
        if video is not None:
            result = cls._video(video, limits, expected_text, transcribe, caption_report)
        elif images is not None:
            images = check_image_batch(images, "images")
            track = None
            if audio is not None:
                wave, sr = check_audio(audio, "audio")
                track = (wave[0].numpy(), sr)
            result = qc_frames(images, float(fps), track, limits, expected_text, transcribe,
                               comfy_bridge.progress(int(images.shape[0])), caption_report)
        else:
            raise InputError("video", "a VIDEO (Broadcast Export Video's output) or IMAGE frames + AUDIO",
                             "nothing connected", "Connect the exported video to 'video'.")
        log.info("Broadcast QC: %s%s", result.verdict, f" ({', '.join(result.failed)})" if result.failed else "")
        sheet = torch.from_numpy(result.sheet.astype(np.float32) / 255.0)[None]
        ui_dict = dict(ui.PreviewImage(sheet, cls=cls).as_dict())
        ui_dict["text"] = [result.text]
        ui_dict[UI_KEY] = [result.contract()]
        return io.NodeOutput(result.verdict == "pass", result.verdict, result.text,
                             json.dumps(result.report, indent=1), sheet, ui=ui_dict)

    @staticmethod
    def _video(video, limits, expected_text, transcribe, more_checks):
        if isinstance(video, InputImpl.VideoFromComponents):
            parts = video.get_components()
            track = None
            if parts.audio is not None:
                wave, sr = check_audio(parts.audio, "video")
                track = (wave[0].numpy(), sr)
            return qc_frames(parts.images, float(parts.frame_rate), track, limits, expected_text, transcribe,
                             comfy_bridge.progress(int(parts.images.shape[0])), more_checks)
        source = video.get_stream_source()
        return qc_file(source, limits, expected_text, transcribe, comfy_bridge.progress(1), "video", more_checks)


def _delivery_handoff(text):
    # Module level: inside execute the input named 'delivery' (its id, as Audio Master's output) hides the module.
    return delivery.from_handoff(text, "delivery")


def _file_of(video):
    """The file a VIDEO was read from (what caption QC reads the track and sidecars of), or None."""
    source = video.get_stream_source() if isinstance(video, InputImpl.VideoFromFile) else None
    return source if isinstance(source, str) else None


NODES = [BroadcastQC]
