"""Voice prompts: a reference clip + its exact transcript, encoded once into OmniVoice's audio codes.

A prompt is built once per (tokenizer weights, reference samples, transcript, silence trimming) and kept in the
pack's content-hash cache as safetensors + JSON, so every later run is a lookup (the posts went from seconds per
request to a table lookup this way). Prompts can also be saved under a name as one ``.safetensors`` file whose
metadata holds the transcript; files are read with safetensors only, never unpickled.

The transcript is required: without it OmniVoice downloads Whisper from the hub. It can come from a local Whisper
folder instead (see `asr.py`).
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..common.cache import ContentCache, content_hash
from ..common.errors import InputError

CACHE_NAMESPACE = "omnivoice_prompt"
FORMAT_VERSION = 1
MIN_REFERENCE_S = 1.0
SILENCE_RMS = 10 ** (-60 / 20)  # below -60 dBFS RMS a reference holds no voice to clone
FILE_SUFFIX = ".safetensors"


@dataclass(frozen=True)
class VoicePrompt:
    """OmniVoice's audio codes of the reference (``tokens`` int64 [codebooks, frames]) with its transcript."""

    tokens: torch.Tensor
    ref_text: str
    ref_rms: float
    fingerprint: str  # the audio tokenizer that made the codes
    key: str = ""

    def to_upstream(self):
        from omnivoice import VoiceClonePrompt

        return VoiceClonePrompt(ref_audio_tokens=self.tokens, ref_text=self.ref_text, ref_rms=float(self.ref_rms))


def check_reference(samples: np.ndarray, sample_rate: int, input_name: str = "reference_audio") -> None:
    """Refuse references that cannot clone a voice: too short, silent, or holding NaN/inf."""
    if not np.isfinite(samples).all():
        raise InputError(input_name, "finite samples", "NaN or infinite values")
    seconds = samples.shape[-1] / float(sample_rate)
    if seconds < MIN_REFERENCE_S:
        raise InputError(input_name, f"at least {MIN_REFERENCE_S:.0f} s of speech (3-10 s works best)",
                         f"{seconds:.2f} s")
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    if rms < SILENCE_RMS:
        raise InputError(input_name, "a recording of the voice to clone", f"silence (RMS {20 * np.log10(max(rms, 1e-12)):.0f}"
                         " dBFS)", "Check the reference file and its level.")


def check_transcript(ref_text: Optional[str], input_name: str = "reference_text") -> str:
    text = (ref_text or "").strip()
    if not text:
        raise InputError(input_name, "the exact transcript of the reference audio", "an empty text",
                         "Type what the reference says, or pick a local Whisper model to transcribe it; a wrong "
                         "transcript makes OmniVoice stutter at the start.")
    return text


def prompt_key(fingerprint: str, samples: np.ndarray, ref_text: str, trim_silence: bool) -> str:
    return content_hash("omnivoice-voice-prompt", FORMAT_VERSION, fingerprint, samples.astype(np.float32),
                        ref_text, bool(trim_silence))


def build_prompt(loaded, samples: np.ndarray, ref_text: str, trim_silence: bool = True,
                 cache: Optional[ContentCache] = None) -> tuple[VoicePrompt, bool]:
    """Encode a mono reference at the model's rate into a `VoicePrompt`. Returns ``(prompt, cache_hit)``."""
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    check_reference(samples, loaded.sample_rate)
    ref_text = check_transcript(ref_text)
    key = prompt_key(loaded.fingerprint, samples, ref_text, trim_silence)
    if cache is not None:
        entry = cache.load(CACHE_NAMESPACE, key, FORMAT_VERSION)
        if entry is not None:
            return _from_record(entry.tensors, entry.meta, key), True
    try:
        with torch.inference_mode():  # upstream leaves autograd on for the tokenizer's encoder
            upstream = loaded.model.create_voice_clone_prompt(ref_audio=(torch.from_numpy(samples)[None],
                                                                         loaded.sample_rate),
                                                              ref_text=ref_text, preprocess_prompt=bool(trim_silence))
    except ValueError as exc:  # "empty after silence removal"
        raise InputError("reference_audio", "speech above OmniVoice's -50 dBFS silence threshold", str(exc),
                         "Raise the reference level or turn trim_silence off.") from exc
    prompt = VoicePrompt(tokens=upstream.ref_audio_tokens.to("cpu", torch.int64).clone(),
                         ref_text=upstream.ref_text, ref_rms=float(upstream.ref_rms),
                         fingerprint=loaded.fingerprint, key=key)
    if cache is not None:
        cache.store(CACHE_NAMESPACE, key, FORMAT_VERSION, {"tokens": prompt.tokens}, _meta(prompt))
    return prompt, False


def _meta(prompt: VoicePrompt) -> dict:
    return {"ref_text": prompt.ref_text, "ref_rms": prompt.ref_rms, "fingerprint": prompt.fingerprint}


def _from_record(tensors: dict, meta: dict, key: str) -> VoicePrompt:
    tokens = tensors["tokens"]
    if tokens.dim() != 2 or tokens.dtype != torch.int64:
        raise ValueError(f"voice prompt tokens must be int64 [codebooks, frames], got {tokens.dtype} "
                         f"{tuple(tokens.shape)}")
    return VoicePrompt(tokens=tokens.clone(), ref_text=str(meta["ref_text"]), ref_rms=float(meta["ref_rms"]),
                       fingerprint=str(meta.get("fingerprint", "")), key=key)


def save_prompt(prompt: VoicePrompt, path: os.PathLike | str) -> Path:
    """Write the prompt as one safetensors file (transcript in its metadata), atomically."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{uuid.uuid4().hex[:8]}-{path.name}")
    try:
        save_file({"tokens": prompt.tokens.contiguous()}, str(tmp),
                  metadata={"format": "broadcast-omnivoice-prompt", "format_version": str(FORMAT_VERSION),
                            "meta": json.dumps(_meta(prompt))})
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_prompt(path: os.PathLike | str, input_name: str = "saved_voice") -> VoicePrompt:
    """Read a prompt written by `save_prompt` (safetensors only)."""
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            if header.get("format") != "broadcast-omnivoice-prompt" or header.get("format_version") != str(FORMAT_VERSION):
                raise ValueError(f"not a voice prompt of format {FORMAT_VERSION}")
            tensors = {"tokens": f.get_tensor("tokens")}
        return _from_record(tensors, json.loads(header["meta"]), key=path.stem)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(input_name, "a voice prompt saved by the Voice Prompt node (.safetensors)",
                         f"'{path.name}' ({exc})") from exc


def check_compatible(prompt: VoicePrompt, loaded, input_name: str = "voice_prompt") -> None:
    """A prompt's codes only mean something to the tokenizer that made them."""
    if prompt.fingerprint and prompt.fingerprint != loaded.fingerprint:
        raise InputError(input_name, "a voice prompt made with this model's audio tokenizer",
                         "a prompt from another OmniVoice tokenizer", "Rebuild the prompt from its reference audio.")
    if prompt.tokens.shape[0] != loaded.num_codebooks:
        raise InputError(input_name, f"{loaded.num_codebooks} codebooks", f"{prompt.tokens.shape[0]}")


def voice_prompt(loaded, *, saved_path: Optional[Path] = None, reference: Optional[np.ndarray] = None,
                 ref_text: str = "", transcribe=None, trim_silence: bool = True,
                 cache: Optional[ContentCache] = None, save_path: Optional[Path] = None) -> VoicePrompt:
    """The Voice Prompt node's job: a saved prompt, or one built from a mono reference at the model's rate.

    ``transcribe(samples)`` supplies the transcript when ``ref_text`` is empty (a local Whisper; None: the transcript
    is required). The prompt must suit ``loaded``'s tokenizer; with ``save_path`` it is also saved under a name.
    """
    if saved_path is not None:
        if not Path(saved_path).is_file():
            raise InputError("saved_voice", "a prompt file in models/omnivoice_voices",
                             f"'{Path(saved_path).stem}' (not found)",
                             "Refresh the node list, or build the prompt from a reference.")
        prompt = load_prompt(saved_path)
    else:
        if reference is None:
            raise InputError("reference_audio", "a reference clip (or a saved_voice)", "nothing connected")
        check_reference(reference, loaded.sample_rate)
        text = (ref_text or "").strip()
        if not text:
            if transcribe is None:
                check_transcript(text)
            text = (transcribe(reference) or "").strip()
            if not text:  # the transcript check's advice ("pick a Whisper model") would be wrong here
                raise InputError("whisper_model", "a Whisper model that hears words in the reference",
                                 "an empty transcript", "Type what the reference says into reference_text, or "
                                 "check that the reference is speech in reference_language.")
        prompt, _hit = build_prompt(loaded, reference, text, trim_silence, cache=cache)
    check_compatible(prompt, loaded)
    if save_path is not None:
        save_prompt(prompt, save_path)
    return prompt
