"""Broadcast Captions: the TTS node's caption timing in, captions laid out by a broadcast profile out, for Export
Video to write as SRT/WebVTT sidecars, a soft subtitle track and (optionally) burned-in text.

The work is in engines/captions/ (`render.plan_captions`). Export Video takes the result on its optional
`captions` input, so the soft track is muxed and the captions are burned in the export's single streaming pass.
"""
from __future__ import annotations

from comfy_api.latest import io, ui

from ..engines.captions import refine
from ..engines.captions.burn import STYLES
from ..engines.captions.layout import LANGUAGES, PROFILES, LayoutSettings
from ..engines.captions.render import plan_captions
from ..engines.captions.srt import srt_text
from ..engines.common.audio import check_audio, to_mono
from ..engines.common.errors import InputError
from . import core_features, types
from .comfy_bridge import category, progress
from .inputs import validate
from .tts_common import WHISPER_NONE, load_whisper, whisper_names

CATEGORY = category("captions")
AUTO = "auto"
LANGUAGE_CHOICES = (AUTO,) + LANGUAGES


def _profile_tooltip() -> str:
    return "Broadcast caption rules. " + "; ".join(f"{name}: {p.description}" for name, p in PROFILES.items()) + "."


class BroadcastCaptions(io.ComfyNode):
    """Caption timing from OmniVoice Speak / Dialogue -> captions for Export Video."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastCaptions",
            **core_features.searchable("BroadcastCaptions", "Broadcast Captions"),
            category=CATEGORY,
            description="Captions from the script as written, timed from the speech: laid out by a broadcast "
                        "profile (lines, reading speed, display time), for Export Video to write as SRT + WebVTT "
                        "files, a soft subtitle track and optionally burned-in text.",
            inputs=[
                types.CaptionTiming.Input("caption_timing",
                                          tooltip="From OmniVoice Speak or OmniVoice Dialogue: where every sentence "
                                                  "is heard, with the script as written."),
                io.Audio.Input("audio", optional=True,
                               tooltip="The final speech (after Audio Master): checked to be the audio the timing "
                                       "belongs to (same length, to the sample). Not connected: not checked."),
                io.Combo.Input("profile", options=list(PROFILES), default="standard", tooltip=_profile_tooltip()),
                io.Combo.Input("language", options=list(LANGUAGE_CHOICES), default=AUTO,
                               tooltip="auto: the script's language from the TTS node. Line-break rules exist for "
                                       "es and en; the soft track is tagged spa / eng."),
                io.Float.Input("max_cps", default=0.0, min=0.0, max=40.0, step=0.5,
                               tooltip="Reading-speed limit in characters a second; 0 uses the profile's (adults: "
                                       "20 English / 17 Spanish in standard, about 17 in bbc; children: 13-17)."),
                io.Float.Input("fps", default=25.0, min=1.0, max=240.0, step=0.001,
                               tooltip="The video's frame rate: captions start and end on frames, at least 2 "
                                       "frames apart. Link the renderer's fps."),
                io.Boolean.Input("speaker_names", default=True,
                                 tooltip="Dialogue: put the speaker's name ('Anchor: ...') before the first caption "
                                         "of each turn."),
                io.Boolean.Input("sidecars", default=True,
                                 tooltip="Write <video>.<lang>.srt and .vtt beside the MP4."),
                io.Boolean.Input("soft_track", default=True,
                                 tooltip="Mux a subtitle track (mov_text, language-tagged) into the MP4, in the same "
                                         "pass; players can switch it on and off."),
                io.Boolean.Input("burn_in", default=False,
                                 tooltip="Draw the captions onto the frames (open captions, always visible), inside "
                                         "the safe area, sized for 9:16 and 16:9."),
                io.Combo.Input("burn_style", options=list(STYLES), default="outline",
                               tooltip="outline: white text with a black outline; box: white text on a 75 % "
                                       "opaque black box (busier backgrounds)."),
                io.Combo.Input("whisper_model", options=[WHISPER_NONE] + whisper_names(), default=WHISPER_NONE,
                               optional=True,
                               tooltip="A local Whisper folder in models/whisper (never downloaded): its word times "
                                       "move each caption's start to its first word (within 0.3 s). Needs 'audio'. "
                                       "(none): the TTS timing alone, exact at every clause boundary."),
            ],
            outputs=[types.Captions.Output("captions", display_name="captions",
                                           tooltip="For Broadcast Export Video's captions input."),
                     io.String.Output("srt", display_name="srt", tooltip="The captions as SRT text.")],
        )

    @classmethod
    def validate_inputs(cls, profile=None, language=None, burn_style=None):
        return validate(("profile", profile, list(PROFILES)), ("language", language, LANGUAGE_CHOICES),
                        ("burn_style", burn_style, STYLES))

    @classmethod
    def execute(cls, caption_timing, profile, language, max_cps, fps, speaker_names, sidecars, soft_track, burn_in,
                burn_style, audio=None, whisper_model=WHISPER_NONE) -> io.NodeOutput:
        samples = rate = words = None
        lang = getattr(caption_timing, "language", "") if language == AUTO else language
        if audio is not None:
            wave, rate = check_audio(audio, "audio")
            samples = int(wave.shape[-1])
        if whisper_model and whisper_model != WHISPER_NONE:
            if audio is None:
                raise InputError("audio", "the mastered speech, for the Whisper model to hear", "nothing connected",
                                 "Connect Audio Master's audio, or set whisper_model to (none).")
            mono, _ = to_mono(audio, None, "audio")
            words = lambda: refine.whisper_words(load_whisper(whisper_model), mono, rate, lang,  # noqa: E731
                                                 progress(int(mono.size / rate // refine.WINDOW_S) + 1))
        settings = LayoutSettings(profile=profile, language=lang, fps=float(fps), max_cps=float(max_cps),
                                  speaker_names=bool(speaker_names))
        plan = plan_captions(caption_timing, settings, audio_samples=samples, audio_rate=rate, sidecars=sidecars,
                             soft_track=soft_track, burn_in=burn_in, burn_style=burn_style, words=words)
        text = srt_text(plan.cues)
        return io.NodeOutput(plan, text, ui=ui.PreviewText(text))


NODES = [BroadcastCaptions]
