"""OmniVoice voice cloning nodes: load a local model, build a voice prompt, speak prepared text.

The work is in engines/omnivoice/: `model.py` (loader), `prompt.py` (voice prompts and their cache), `speak.py`
(batched generation and joins). The model sits behind a ComfyUI ModelPatcher, so core's model management moves it
to the GPU for a run and offloads it when memory is needed.
"""
from __future__ import annotations

import re

from comfy_api.latest import io

from ..engines.common.audio import to_mono
from ..engines.common.errors import InputError
from ..engines.omnivoice import model as ov_model
from ..engines.omnivoice import prompt as ov_prompt
from ..engines.omnivoice import speak as ov_speak
from ..engines.omnivoice.normalize import NormalizeSettings
from ..engines.omnivoice.text import MAX_WORDS, prepare_text
from . import types
from .comfy_bridge import CATEGORY, ManagedModel, cache, model_dir, model_names, progress
from .tts_common import WHISPER_NONE, transcribe_reference, voices_dir, whisper_names

FAMILY = "omnivoice"
VOICE_NONE = "(build from reference)"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")


class OmniVoiceHandle(ManagedModel):
    """What flows on a BROADCAST_OMNIVOICE_MODEL link: the loaded model behind ComfyUI's model management."""

    def __init__(self, loaded, name: str):
        super().__init__(loaded.model, name, wrap=True)
        self.loaded = loaded

    def ready(self):
        """Load onto ComfyUI's compute device (a no-op when it is there already) and return the engine object."""
        self.load(full=False)
        return self.loaded


def _saved_voices() -> list[str]:
    folder = voices_dir()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob(f"*{ov_prompt.FILE_SUFFIX}") if not p.name.startswith("."))


class BroadcastOmniVoiceLoader(io.ComfyNode):
    """Loads an OmniVoice folder from models/omnivoice (never downloads)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastOmniVoiceLoader",
            display_name="Broadcast OmniVoice Loader",
            category=f"{CATEGORY}/omnivoice",
            description="Load OmniVoice (Qwen3 + Higgs-Audio-v2 tokenizer) from a local folder; the audio decoder "
                        "always runs in fp32.",
            inputs=[
                io.Combo.Input("model_name", options=model_names(FAMILY),
                               tooltip="A folder in models/omnivoice holding config.json, model.safetensors, the "
                                       "tokenizer files and an audio_tokenizer/ subfolder."),
                io.Combo.Input("precision", options=list(ov_model.PRECISIONS), default="auto",
                               tooltip="Backbone precision. auto: bf16 on a GPU that supports it, fp32 on the CPU. "
                                       "The audio decoder stays fp32 (fp16 gave NaN)."),
                io.Combo.Input("warmup", options=list(ov_model.WARMUPS), default="none",
                               tooltip="Generate throw-away speech at load time (one clause, then three) so the "
                                       "first real call does not pay one-off costs."),
            ],
            outputs=[types.OmniVoiceModel.Output("omnivoice_model", display_name="omnivoice_model")],
        )

    @classmethod
    def validate_inputs(cls, model_name, precision, warmup):
        if precision not in ov_model.PRECISIONS:
            return f"precision must be one of {', '.join(ov_model.PRECISIONS)}, got {precision!r}"
        if warmup not in ov_model.WARMUPS:
            return f"warmup must be one of {', '.join(ov_model.WARMUPS)}, got {warmup!r}"
        return True

    @classmethod
    def execute(cls, model_name, precision, warmup) -> io.NodeOutput:
        import comfy.model_management as mm

        folder = model_dir(FAMILY, model_name)
        loaded = ov_model.load_omnivoice(folder, precision=precision, device=mm.get_torch_device(),
                                         load_on=mm.unet_offload_device())
        handle = OmniVoiceHandle(loaded, model_name)
        if warmup != "none":
            ov_model.warm_up(handle.ready(), warmup, progress=progress(2 if warmup == "B1+B3" else 1))
        return io.NodeOutput(handle)


class BroadcastVoicePrompt(io.ComfyNode):
    """Reference audio + its transcript -> a reusable voice prompt (built once, then read from the cache)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastVoicePrompt",
            display_name="Broadcast Voice Prompt",
            category=f"{CATEGORY}/omnivoice",
            description="Encode a reference voice (3-10 s + exact transcript) into an OmniVoice prompt, or load one "
                        "saved in models/omnivoice_voices; optionally save it under a name.",
            inputs=[
                types.OmniVoiceModel.Input("omnivoice_model", tooltip="From Broadcast OmniVoice Loader."),
                io.Combo.Input("saved_voice", options=[VOICE_NONE] + _saved_voices(), default=VOICE_NONE,
                               tooltip="A prompt saved earlier in models/omnivoice_voices. Anything but the first "
                                       "entry loads it and ignores the reference inputs."),
                io.Audio.Input("reference_audio", optional=True,
                               tooltip="The voice to clone: 3-10 s of clean speech (at least 1 s)."),
                io.String.Input("reference_text", multiline=True, default="",
                                tooltip="Exactly what the reference says. Leave empty only with a Whisper model "
                                        "selected below; a wrong transcript makes OmniVoice stutter."),
                io.Combo.Input("whisper_model", options=[WHISPER_NONE] + whisper_names(), default=WHISPER_NONE,
                               tooltip="A local Whisper folder in models/whisper that transcribes the reference "
                                       "when reference_text is empty. Never downloaded."),
                io.String.Input("reference_language", default="",
                                tooltip="Language of the reference for Whisper (e.g. es, en); empty lets Whisper "
                                        "detect it. Unused when reference_text is given."),
                io.Boolean.Input("trim_silence", default=True,
                                 tooltip="Let OmniVoice trim silences of the reference (below -50 dBFS) before "
                                         "encoding."),
                io.String.Input("save_as", default="",
                                tooltip="Save the prompt as models/omnivoice_voices/<name>.safetensors (letters, "
                                        "digits, space, _ . -). Empty: do not save."),
            ],
            outputs=[types.VoicePrompt.Output("voice_prompt", display_name="voice_prompt"),
                     io.String.Output("transcript", display_name="transcript")],
        )

    @classmethod
    def validate_inputs(cls, save_as=""):  # only this input: 0.3.75 skips range checks of named/**kwargs inputs
        if save_as and not _NAME.match(save_as.strip()):
            return f"save_as must be a plain name (letters, digits, space, _ . -), got {save_as!r}"
        return True

    @classmethod
    def execute(cls, omnivoice_model, saved_voice, reference_text, whisper_model, reference_language, trim_silence,
                save_as, reference_audio=None) -> io.NodeOutput:
        loaded = omnivoice_model.ready()
        name = save_as.strip()
        if name and not _NAME.match(name):
            raise InputError("save_as", "a plain name (letters, digits, space, _ . -)", repr(save_as))
        if saved_voice and saved_voice != VOICE_NONE:
            path = voices_dir() / f"{saved_voice}{ov_prompt.FILE_SUFFIX}"
            if not path.is_file():
                raise InputError("saved_voice", "a prompt file in models/omnivoice_voices", f"'{saved_voice}' "
                                 "(not found)", "Refresh the node list, or build the prompt from a reference.")
            prompt = ov_prompt.load_prompt(path)
        else:
            if reference_audio is None:
                raise InputError("reference_audio", "a reference clip (or a saved_voice)", "nothing connected")
            samples, _ = to_mono(reference_audio, loaded.sample_rate, "reference_audio")
            ov_prompt.check_reference(samples, loaded.sample_rate)
            text = reference_text.strip()
            if not text:
                if whisper_model == WHISPER_NONE:
                    ov_prompt.check_transcript(text)
                text = transcribe_reference(whisper_model, samples, loaded.sample_rate, reference_language)
            prompt, _hit = ov_prompt.build_prompt(loaded, samples, text, trim_silence, cache=cache())
        ov_prompt.check_compatible(prompt, loaded)
        if name:
            ov_prompt.save_prompt(prompt, voices_dir() / f"{name}{ov_prompt.FILE_SUFFIX}")
        return io.NodeOutput(prompt, prompt.ref_text)


class BroadcastOmniVoiceSpeak(io.ComfyNode):
    """Prepared clauses (or plain text) + a voice prompt -> 24 kHz speech, clauses batched and joined seamlessly."""

    @classmethod
    def define_schema(cls):
        s = ov_speak.SpeakSettings()
        return io.Schema(
            node_id="BroadcastOmniVoiceSpeak",
            display_name="Broadcast OmniVoice Speak",
            category=f"{CATEGORY}/omnivoice",
            description="Speak clauses in the cloned voice; clauses are generated in sub-batches and joined at zero "
                        "crossings with equal-power crossfades (25 ms at ellipsis joins). Output is 24 kHz.",
            inputs=[
                types.OmniVoiceModel.Input("omnivoice_model", tooltip="From Broadcast OmniVoice Loader."),
                types.VoicePrompt.Input("voice_prompt", tooltip="From Broadcast Voice Prompt."),
                types.Clauses.Input("clauses", optional=True,
                                    tooltip="From Broadcast Text Prepare (carries its language). When connected, "
                                            "text and language below are not used."),
                io.String.Input("text", multiline=True, default="",
                                tooltip="Text to speak when no clauses are connected; prepared with Text "
                                        "Prepare's defaults (normalised, no voseo or yeísmo)."),
                io.String.Input("language", default="en",
                                tooltip="Language code or name of `text` (es, en, Spanish...). Used only with text."),
                io.Combo.Input("preset", options=list(ov_speak.PRESETS) + ["custom"], default="upstream",
                               tooltip="upstream: omnivoice's defaults (32 steps, t_shift 0.1, layer penalty 5). "
                                       "posts: the broadcast posts' values (10 steps, t_shift 0.9, layer penalty "
                                       "0.05). custom: the four values below."),
                io.Int.Input("steps", default=s.num_step, min=1, max=128,
                             tooltip="Decoding steps (custom preset only). Fewer than 10 sounds raspy."),
                io.Float.Input("guidance", default=s.guidance_scale, min=0.0, max=10.0, step=0.1,
                               tooltip="Classifier-free guidance scale (custom preset only); 0 turns it off."),
                io.Float.Input("t_shift", default=s.t_shift, min=0.01, max=2.0, step=0.01,
                               tooltip="Time-step shift (custom preset only); smaller spends more steps at low "
                                       "signal-to-noise."),
                io.Float.Input("layer_penalty", default=s.layer_penalty_factor, min=0.0, max=20.0, step=0.01,
                               tooltip="How strongly earlier codebook layers unmask first (custom preset only)."),
                io.Float.Input("speed", default=1.0, min=0.25, max=4.0, step=0.05,
                               tooltip="Speaking rate factor: >1 faster, <1 slower (all presets)."),
                io.Int.Input("seed", default=0, min=0, max=2**31 - 1,
                             tooltip="Seed of the sampler; the same seed gives the same audio."),
                io.Boolean.Input("trim_silence", default=True,
                                 tooltip="OmniVoice's output clean-up: trim long silences and edges, then fade and "
                                         "pad 0.1 s."),
            ],
            outputs=[io.Audio.Output("audio", display_name="audio"),
                     io.String.Output("info", display_name="info")],
        )

    @classmethod
    def validate_inputs(cls, preset):  # only this input: 0.3.75 skips range checks of named/**kwargs inputs
        if preset not in list(ov_speak.PRESETS) + ["custom"]:
            return f"preset must be one of {', '.join(list(ov_speak.PRESETS) + ['custom'])}, got {preset!r}"
        return True

    @classmethod
    def execute(cls, omnivoice_model, voice_prompt, text, language, preset, steps, guidance, t_shift, layer_penalty,
                speed, seed, trim_silence, clauses=None) -> io.NodeOutput:
        from ..engines.common.audio import make_audio

        if clauses is None:
            clauses = prepare_text(text, language, normalization=NormalizeSettings(), max_words=MAX_WORDS)
        elif text.strip():
            raise InputError("text", "either connected clauses or typed text, not both", "both",
                             "Clear the text widget or disconnect the clauses.")
        custom = {"num_step": steps, "guidance_scale": guidance, "t_shift": t_shift,
                  "layer_penalty_factor": layer_penalty} if preset == "custom" else {}
        settings = ov_speak.SpeakSettings.from_preset(preset, speed=speed, seed=seed, trim_silence=trim_silence,
                                                      **custom)
        loaded = omnivoice_model.ready()
        ov_prompt.check_compatible(voice_prompt, loaded)
        result = ov_speak.speak(loaded, clauses, voice_prompt, settings, progress(len(clauses.sub_batches)))
        info = (f"{len(clauses.clauses)} clauses in {len(clauses.sub_batches)} batches, "
                f"{result.samples.size / result.sample_rate:.2f} s of audio in {result.wall_seconds:.2f} s "
                f"(real-time factor {result.real_time_factor:.2f}); language {clauses.language}; "
                f"steps {settings.num_step}, t_shift {settings.t_shift}, layer penalty {settings.layer_penalty_factor}")
        return io.NodeOutput(make_audio(result.samples, result.sample_rate), info)


NODES = [BroadcastOmniVoiceLoader, BroadcastVoicePrompt, BroadcastOmniVoiceSpeak]
