"""OmniVoice voice cloning nodes: load a local model, build a voice prompt, speak prepared text.

The work is in engines/omnivoice/: `model.py` (loader), `prompt.py` (voice prompts and their cache), `speak.py`
(batched generation and joins). The model sits behind a ComfyUI ModelPatcher, so core's model management moves it
to the GPU for a run and offloads it when memory is needed.
"""
from __future__ import annotations

import re

from comfy_api.latest import io, ui

from ..engines.common.audio import to_mono
from ..engines.common.errors import InputError
from ..engines.omnivoice import model as ov_model
from ..engines.omnivoice import prompt as ov_prompt
from ..engines.omnivoice import speak as ov_speak
from ..engines.omnivoice.normalize import NormalizeSettings
from ..engines.omnivoice.text import MAX_WORDS, prepare_text
from . import core_features, types
from .comfy_bridge import ManagedModel, cache, category, model_dir, model_names, progress, with_audio_player
from .inputs import PRECISIONS, resolve_precision, validate
from .model_check import loader_check
from .tts_common import WHISPER_NONE, transcribe_reference, voices_dir, whisper_names

FAMILY = "omnivoice"
VOICE_NONE = "(build from reference)"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")

CATEGORY = category("omnivoice")


class OmniVoiceHandle(ManagedModel):
    """What flows on a BROADCAST_OMNIVOICE_MODEL link: the loaded model behind ComfyUI's model management;
    `ready()` gives ``(loaded model, device)``. Always loaded whole: the omnivoice package builds its inputs on
    the first parameter's device, so a partial low-VRAM load mixes devices ("Tensor on device cpu is not on the
    expected device", found by the device-placement audit of docs/accel.md)."""

    def __init__(self, loaded, name: str):
        super().__init__(loaded.model, name, wrap=True, engine=loaded, full_load=True)


def _save_name(save_as) -> str:
    """The voice name to save under, stripped; it must be safe as a file name. Empty (do not save) and None (a
    linked input, at queue time) give ""."""
    name = (save_as or "").strip()
    if name and not _NAME.match(name):
        raise InputError("save_as", "a plain name (letters, digits, space, _ . -)", repr(save_as))
    return name


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
            **core_features.searchable("BroadcastOmniVoiceLoader", "Broadcast OmniVoice Loader"),
            category=CATEGORY,
            description="Load OmniVoice (Qwen3 + Higgs-Audio-v2 tokenizer) from a local folder; the audio decoder "
                        "always runs in fp32.",
            inputs=[
                io.Combo.Input("model_name", options=model_names(FAMILY),
                               tooltip="A folder in models/omnivoice holding config.json, model.safetensors, the "
                                       "tokenizer files and an audio_tokenizer/ subfolder."),
                io.Combo.Input("precision", options=list(PRECISIONS), default="auto",
                               tooltip="Backbone precision. auto: bf16 on a GPU that runs it well, else fp16 "
                                       "there, fp32 on the CPU (fp16 is refused there). The audio decoder always "
                                       "runs in fp32: in fp16 it overflows to NaN."),
                io.Combo.Input("warmup", options=list(ov_model.WARMUPS), default="none",
                               tooltip="Generate throw-away speech at load time (one clause, then three) so the "
                                       "first real call does not pay one-off costs."),
            ],
            outputs=[types.OmniVoiceModel.Output("omnivoice_model", display_name="omnivoice_model")],
        )

    @classmethod
    def validate_inputs(cls, model_name=None):
        # Only model_name: ComfyUI repeats a refusal under every input named here; core checks the other combos.
        return loader_check(FAMILY, "model_name", model_name)

    @classmethod
    def execute(cls, model_name, precision, warmup) -> io.NodeOutput:
        import comfy.model_management as mm

        folder = model_dir(FAMILY, model_name)
        device = mm.get_torch_device()
        loaded = ov_model.load_omnivoice(folder, precision=resolve_precision(precision, device), device=device,
                                         load_on=mm.unet_offload_device())
        handle = OmniVoiceHandle(loaded, model_name)
        if warmup != "none":
            ov_model.warm_up(handle.ready()[0], warmup, progress=progress(2 if warmup == "B1+B3" else 1))
        return io.NodeOutput(handle)


class BroadcastVoicePrompt(io.ComfyNode):
    """Reference audio + its transcript -> a reusable voice prompt (built once, then read from the cache)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastVoicePrompt",
            **core_features.searchable("BroadcastVoicePrompt", "Broadcast Voice Prompt"),
            category=CATEGORY,
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
    def validate_inputs(cls, save_as=None):  # only this input: 0.3.75 skips range checks of named/**kwargs inputs
        return validate(lambda: _save_name(save_as))

    @classmethod
    def execute(cls, omnivoice_model, saved_voice, reference_text, whisper_model, reference_language, trim_silence,
                save_as, reference_audio=None) -> io.NodeOutput:
        loaded, _ = omnivoice_model.ready()
        name = _save_name(save_as)
        saved = saved_voice if saved_voice and saved_voice != VOICE_NONE else None
        reference = to_mono(reference_audio, loaded.sample_rate, "reference_audio")[0] \
            if reference_audio is not None and saved is None else None
        transcribe = None if whisper_model == WHISPER_NONE else (
            lambda samples: transcribe_reference(whisper_model, samples, loaded.sample_rate, reference_language))
        prompt = ov_prompt.voice_prompt(
            loaded, saved_path=voices_dir() / f"{saved}{ov_prompt.FILE_SUFFIX}" if saved else None,
            reference=reference, ref_text=reference_text, transcribe=transcribe, trim_silence=trim_silence,
            cache=cache(), save_path=voices_dir() / f"{name}{ov_prompt.FILE_SUFFIX}" if name else None)
        return io.NodeOutput(prompt, prompt.ref_text)


class BroadcastOmniVoiceSpeak(io.ComfyNode):
    """Prepared clauses (or plain text) + a voice prompt -> 24 kHz speech, clauses batched and joined seamlessly."""

    @classmethod
    def define_schema(cls):
        s = ov_speak.SpeakSettings()
        return io.Schema(
            node_id="BroadcastOmniVoiceSpeak",
            **core_features.searchable("BroadcastOmniVoiceSpeak", "Broadcast OmniVoice Speak"),
            category=CATEGORY,
            description="Speak clauses in the cloned voice; clauses are generated in sub-batches and joined at zero "
                        "crossings with equal-power crossfades (25 ms at ellipsis joins). Output is 24 kHz.",
            inputs=[
                types.OmniVoiceModel.Input("omnivoice_model", tooltip="From Broadcast OmniVoice Loader."),
                types.VoicePrompt.Input("voice_prompt", optional=True,
                                        tooltip="From Broadcast Voice Prompt or Voice Morph. Not connected: voice "
                                                "design, a voice made from instruct and cadence (or OmniVoice's "
                                                "own voice with neither)."),
                types.Clauses.Input("clauses", optional=True,
                                    tooltip="From Broadcast Text Prepare (carries its language). When connected, "
                                            "text and language below are not used."),
                io.String.Input("text", multiline=True, default="",
                                tooltip="Text to speak when no clauses are connected; prepared with Text "
                                        "Prepare's defaults (normalised, no voseo or yeísmo)."),
                io.String.Input("language", default="en",
                                tooltip="Language code or name of `text` (es, en, Spanish...). Used only with text."),
                io.Combo.Input("preset", options=list(ov_speak.PRESETS) + ["custom"], default="upstream",
                               tooltip="upstream: OmniVoice's own defaults (32 steps, t_shift 0.1, layer penalty "
                                       "5), the most careful decoding. posts: a third of the steps with a later "
                                       "time shift and a light layer penalty (10 steps, t_shift 0.9, layer penalty "
                                       "0.05): about 3x faster, tuned on broadcast narration. custom: the four "
                                       "values below."),
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
                io.Combo.Input("cadence", options=list(ov_speak.CADENCES), default="none", optional=True,
                               tooltip="Delivery presets as voice-design items: breaking_urgent = young adult, "
                                       "moderate pitch; commercial_hook = young adult, high pitch; narrative_slow "
                                       "= middle-aged, low pitch; casual_banter = young adult."),
                io.String.Input("instruct", default="", optional=True,
                                tooltip="Voice-design items, comma separated: male/female; child, teenager, young "
                                        "adult, middle-aged, elderly; very low ... very high pitch; whisper; an "
                                        "accent (british accent...). Added to the cadence's items."),
            ],
            outputs=[io.Audio.Output("audio", display_name="audio"),
                     io.String.Output("info", display_name="info"),
                     types.CaptionTiming.Output("caption_timing", display_name="caption_timing",
                                             tooltip="Where every sentence is heard in this audio, with the script "
                                                     "as written: for Broadcast Captions (valid for this audio "
                                                     "after Audio Master too).")],
        )

    @classmethod
    def validate_inputs(cls, preset=None):  # only this input: 0.3.75 skips range checks of named/**kwargs inputs
        return validate(("preset", preset, list(ov_speak.PRESETS) + ["custom"]))

    @classmethod
    def execute(cls, omnivoice_model, text, language, preset, steps, guidance, t_shift, layer_penalty,
                speed, seed, trim_silence, voice_prompt=None, clauses=None, cadence="none",
                instruct="") -> io.NodeOutput:
        from ..engines.common.audio import make_audio

        if clauses is None:
            clauses = prepare_text(text, language, normalization=NormalizeSettings(), max_words=MAX_WORDS)
        elif text.strip():
            raise InputError("text", "either connected clauses or typed text, not both", "both",
                             "Clear the text widget or disconnect the clauses.")
        custom = {"num_step": steps, "guidance_scale": guidance, "t_shift": t_shift,
                  "layer_penalty_factor": layer_penalty} if preset == "custom" else {}
        settings = ov_speak.SpeakSettings.from_preset(preset, speed=speed, seed=seed, trim_silence=trim_silence,
                                                      instruct=instruct or "", cadence=cadence or "none", **custom)
        loaded, _ = omnivoice_model.ready()
        if voice_prompt is not None:
            ov_prompt.check_compatible(voice_prompt, loaded)
        result = ov_speak.speak(loaded, clauses, voice_prompt, settings, progress(len(clauses.sub_batches)))
        info = (f"{len(clauses.clauses)} clauses in {len(clauses.sub_batches)} batches, "
                f"{result.samples.size / result.sample_rate:.2f} s of audio in {result.wall_seconds:.2f} s "
                f"(real-time factor {result.real_time_factor:.2f}); language {clauses.language}; "
                f"steps {settings.num_step}, t_shift {settings.t_shift}, layer penalty {settings.layer_penalty_factor}; "
                f"voice {'cloned' if voice_prompt is not None else 'designed'}"
                f"{', instruct ' + repr(ov_speak.resolve_instruct(instruct, cadence)) if (instruct or cadence != 'none') else ''}")
        speech = make_audio(result.samples, result.sample_rate)
        # A player in the node (the pack's web extension shows ui "audio" in every pack node) and the info line.
        shown = dict(ui.PreviewAudio(speech, cls=cls).as_dict())
        shown["text"] = [info]
        return io.NodeOutput(speech, info, result.timing, ui=shown)


class BroadcastVoiceMorph(io.ComfyNode):
    """Two voice prompts -> one prompt mixing their recordings frame by frame, usable and savable like any voice."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastVoiceMorph",
            **core_features.searchable("BroadcastVoiceMorph", "Broadcast Voice Morph"),
            category=CATEGORY,
            description="Mix two voice prompts' recordings frame by frame: weight x A + (1 - weight) x B (B's "
                        "recording stretched to A's length) in the audio tokenizer's latent space, quantised back "
                        "into a prompt with A's transcript. Both utterances' content is overlaid in it (B's words "
                        "included), so it is not a voice halfway between A and B; whether the cloned voice sounds "
                        "between them has not been measured. Closest to a blend of voices when A and B read the "
                        "same text at the same pace.",
            inputs=[
                types.OmniVoiceModel.Input("omnivoice_model", tooltip="The model whose tokenizer made both voices."),
                types.VoicePrompt.Input("voice_a", tooltip="The first voice (its timing and transcript are kept)."),
                types.VoicePrompt.Input("voice_b", tooltip="The second voice."),
                io.Float.Input("weight", default=0.5, min=0.0, max=1.0, step=0.05,
                               tooltip="Share of A's recording in each frame of the mix: 1 is A unchanged, 0 is B "
                                       "unchanged, 0.7 mixes 70 % of A's frame with 30 % of B's frame at the same "
                                       "relative time (content included, not the voice alone)."),
                io.String.Input("save_as", default="",
                                tooltip="Save the blend as models/omnivoice_voices/<name>.safetensors, like any "
                                        "voice. Empty: do not save."),
            ],
            outputs=[types.VoicePrompt.Output("voice_prompt", display_name="voice_prompt")],
        )

    @classmethod
    def validate_inputs(cls, save_as=None):
        return validate(lambda: _save_name(save_as))

    @classmethod
    def execute(cls, omnivoice_model, voice_a, voice_b, weight, save_as) -> io.NodeOutput:
        from ..engines.omnivoice.morph import blend_prompts

        name = _save_name(save_as)
        blend = blend_prompts(omnivoice_model.ready()[0], voice_a, voice_b, float(weight))
        if name:
            ov_prompt.save_prompt(blend, voices_dir() / f"{name}{ov_prompt.FILE_SUFFIX}")
        return io.NodeOutput(blend)


class BroadcastOmniVoiceDialogue(io.ComfyNode):
    """A script with speaker tags, read by saved voices into one 24 kHz track."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastOmniVoiceDialogue",
            **core_features.searchable("BroadcastOmniVoiceDialogue", "Broadcast OmniVoice Dialogue"),
            category=CATEGORY,
            description="Read a script whose lines start with a speaker tag ('Anchor: ...' or '[anchor] ...') with "
                        "the saved voice each tag is cast to; every turn is prepared and joined like single-voice "
                        "speech, speakers are levelled, turns joined at zero crossings. Master the result with "
                        "Broadcast Audio Master.",
            inputs=[
                types.OmniVoiceModel.Input("omnivoice_model", tooltip="From Broadcast OmniVoice Loader."),
                io.String.Input("script", multiline=True, default="Anchor: Good evening.\nCorrespondent: Thank you.",
                                tooltip="One turn per line, starting with a tag from the speakers list; a line "
                                        "without a tag continues the previous turn."),
                io.String.Input("speakers", multiline=True, default="anchor = \ncorrespondent = ",
                                tooltip="'tag = saved voice' per line: voices saved in models/omnivoice_voices "
                                        "(by Voice Prompt or Voice Morph)."),
                io.String.Input("language", default="en", tooltip="Language of the script (es, en, Spanish...)."),
                io.Combo.Input("preset", options=list(ov_speak.PRESETS), default="upstream",
                               tooltip="Sampling values: upstream (32 steps) or posts (10 steps, t_shift 0.9)."),
                io.Float.Input("speed", default=1.0, min=0.25, max=4.0, step=0.05, tooltip="Speaking rate factor."),
                io.Int.Input("seed", default=0, min=0, max=2**31 - 1, tooltip="Same seed, same audio."),
                io.Combo.Input("cadence", options=list(ov_speak.CADENCES), default="none",
                               tooltip="Delivery preset for every speaker (see OmniVoice Speak)."),
                io.Boolean.Input("normalize", default=True,
                                 tooltip="Broadcast text normalisation of each turn (figures, currency, acronyms...)."),
                io.Boolean.Input("voseo", default=False, tooltip="Rioplatense voseo (Spanish only)."),
                io.Boolean.Input("yeismo", default=False, tooltip="Rioplatense yeísmo as 'sh' (Spanish only)."),
                io.Boolean.Input("level_match", default=True,
                                 tooltip="Bring every speaker to the same loudness before the turns are joined."),
                io.Int.Input("max_sub_batch", default=4, min=1, max=16,
                             tooltip="Clauses generated together (of any speakers)."),
                io.Boolean.Input("trim_silence", default=True, tooltip="OmniVoice's output clean-up per clause."),
            ],
            outputs=[io.Audio.Output("audio", display_name="audio"),
                     io.String.Output("turns", display_name="turns",
                                      tooltip="JSON: speaker, start and end second, clause count of every turn."),
                     types.CaptionTiming.Output("caption_timing", display_name="caption_timing",
                                             tooltip="Where every sentence is heard in this audio, with the script "
                                                     "as written: for Broadcast Captions (valid for this audio "
                                                     "after Audio Master too).")],
        )

    @classmethod
    def validate_inputs(cls, preset=None, cadence=None):
        return validate(("preset", preset, ov_speak.PRESETS), ("cadence", cadence, ov_speak.CADENCES))

    @classmethod
    def execute(cls, omnivoice_model, script, speakers, language, preset, speed, seed, cadence, normalize, voseo,
                yeismo, level_match, max_sub_batch, trim_silence) -> io.NodeOutput:
        import json

        from ..engines.common.audio import make_audio
        from ..engines.omnivoice import dialogue

        cast = dialogue.parse_cast(speakers)
        turns = dialogue.parse_script(script, cast)
        loaded, _ = omnivoice_model.ready()
        voices = {}
        for tag, voice in cast.items():
            path = voices_dir() / f"{voice}{ov_prompt.FILE_SUFFIX}"
            if not path.is_file():
                raise InputError("speakers", "voices saved in models/omnivoice_voices", f"'{voice}' for '{tag}' "
                                 "(not found)", f"Saved voices: {', '.join(_saved_voices()) or 'none yet'}.")
            voices[tag] = ov_prompt.load_prompt(path, "speakers")
            ov_prompt.check_compatible(voices[tag], loaded, "speakers")
        settings = ov_speak.SpeakSettings.from_preset(preset, speed=speed, seed=seed, trim_silence=trim_silence,
                                                      cadence=cadence)
        prepare = {"voseo": voseo, "yeismo": yeismo, "max_words": MAX_WORDS,
                   "normalization": NormalizeSettings() if normalize else None}
        result = dialogue.speak_dialogue(loaded, turns, voices, language, settings, prepare, max_sub_batch,
                                         level_match, progress(1))
        spans = [{"speaker": s, "start": a, "end": b, "clauses": n} for s, a, b, n in result.turns]
        audio = make_audio(result.samples, result.sample_rate)
        return io.NodeOutput(audio, json.dumps(spans, indent=1), result.timing,
                             ui=with_audio_player(None, audio, cls))


NODES = [BroadcastOmniVoiceLoader, BroadcastVoicePrompt, BroadcastOmniVoiceSpeak, BroadcastVoiceMorph,
         BroadcastOmniVoiceDialogue]
