"""Voice morph: a new voice prompt mixed from two saved voices' recordings, saved and used like any other.

The posts blend the prompts' audio embeddings, ``E = a * E_A + (1 - a) * Resample(E_B, L_A)`` (B stretched to A's
length by linear interpolation in time), and inject the result through a hook inside generation. A voice prompt is
OmniVoice's discrete audio codes, so a blend that must be saved like any voice is done one level down, in the audio
tokenizer's own continuous space: both prompts' codes are turned back into the residual quantiser's latent
(the sum of their codebook vectors, ``quantizer.decode``), blended with the posts' formula, and quantised again with
the same residual quantiser (``quantizer.encode``). The result is a prompt of A's length and transcript (the blend
keeps A's timing, so A's words still match it), its level ``a * rms_A + (1 - a) * rms_B``. Weight 1 returns A and
weight 0 returns B unchanged.

What that is: each frame of the new prompt mixes A's frame with B's frame at the same relative time, so B's
recording, content included, is overlaid on A's (tests/unit/test_tts_morph_content.py shows the mix follows B's
frame order, not only its voice statistics). It is a mix of two recordings, not a voice halfway between two
speakers: OmniVoice has no separate speaker vector to blend, only the prompt's codes and its transcript. Whether
the voice cloned from it sounds between A and B (speaker similarity) and whether B's words leak into the speech
(an ASR round trip) has not been measured: the real model, Whisper and a speaker encoder are not available to the
tests. It comes closest to a blend of voices when A and B read the same text at the same pace.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.cache import content_hash
from ..common.errors import InputError
from .prompt import VoicePrompt


def resample_time(latent: torch.Tensor, length: int) -> torch.Tensor:
    """``[1, channels, T]`` -> ``[1, channels, length]`` by linear interpolation along time."""
    if latent.shape[-1] == length:
        return latent
    return F.interpolate(latent, size=length, mode="linear", align_corners=True)


def blend_prompts(loaded, voice_a: VoicePrompt, voice_b: VoicePrompt, weight: float) -> VoicePrompt:
    """``weight`` of A and ``1 - weight`` of B (see the module docstring)."""
    if not 0.0 <= float(weight) <= 1.0:
        raise InputError("weight", "a weight between 0 (all B) and 1 (all A)", str(weight))
    for name, voice in (("voice_a", voice_a), ("voice_b", voice_b)):
        if voice.fingerprint and voice.fingerprint != loaded.fingerprint:
            raise InputError(name, "a voice made with this model's audio tokenizer", "a voice from another "
                             "OmniVoice tokenizer", "Rebuild it from its reference audio.")
        if voice.tokens.shape[0] != loaded.num_codebooks:
            raise InputError(name, f"{loaded.num_codebooks} codebooks", str(voice.tokens.shape[0]))
    if weight == 1.0:
        return voice_a
    if weight == 0.0:
        return voice_b
    quantizer = loaded.model.audio_tokenizer.quantizer
    device = next(loaded.model.audio_tokenizer.parameters()).device
    with torch.inference_mode():
        # quantizer.decode/encode take codes as [codebooks, batch, frames] and latents as [batch, channels, frames].
        latent_a = quantizer.decode(voice_a.tokens.to(device)[:, None, :]).float()
        latent_b = quantizer.decode(voice_b.tokens.to(device)[:, None, :]).float()
        blended = weight * latent_a + (1.0 - weight) * resample_time(latent_b, latent_a.shape[-1])
        codes = quantizer.encode(blended)[: loaded.num_codebooks, 0, :]
    tokens = codes.to("cpu", torch.int64).contiguous()
    key = content_hash("omnivoice-voice-morph", voice_a.tokens, voice_b.tokens,
                       float(weight))
    return VoicePrompt(tokens=tokens, ref_text=voice_a.ref_text,
                       ref_rms=float(weight * voice_a.ref_rms + (1.0 - weight) * voice_b.ref_rms),
                       fingerprint=loaded.fingerprint, key=key)


def latent_distance(loaded, a: VoicePrompt, b: VoicePrompt) -> float:
    """Mean squared distance between two prompts' quantiser latents, B stretched to A's length (for tests and
    reports: how far a blend sits from each parent)."""
    quantizer = loaded.model.audio_tokenizer.quantizer
    device = next(loaded.model.audio_tokenizer.parameters()).device
    with torch.inference_mode():
        la = quantizer.decode(a.tokens.to(device)[:, None, :]).float()
        lb = resample_time(quantizer.decode(b.tokens.to(device)[:, None, :]).float(), la.shape[-1])
        return float(torch.mean((la - lb) ** 2))
