"""Caption starts refined by ASR word times, when a Whisper model is at hand (never downloaded).

The TTS timing is exact at clause boundaries, but a caption that starts inside a clause (a long sentence cut into
two captions) gets its start from the words' share of the clause's length. Whisper's word times (its cross-attention
alignment, `generate(return_token_timestamps=True)`, which needs ``alignment_heads`` in the model's
generation_config.json, as every OpenAI checkpoint has) say where the word really starts: each caption start moves to
the nearest word onset within `MAX_SHIFT_S`, so it starts with its first word, not the silence before it. A caption
with no word onset that close keeps its TTS time. Then the profile's timing rules run again (`layout.retime`).
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Optional, Sequence

import numpy as np
import torch

from ..common.audio import resample
from ..common.errors import InputError

MAX_SHIFT_S = 0.3
WHISPER_RATE = 16000
WINDOW_S = 30.0
_SPECIAL = re.compile(r"^<\|.*\|>$")


def whisper_words(whisper, samples: np.ndarray, rate: int, language: Optional[str] = None,
                  progress=None) -> list:
    """``(start s, end s, word)`` of every word Whisper hears in mono `samples`, window by window (30 s)."""
    config = whisper.model.generation_config
    if not getattr(config, "alignment_heads", None):
        raise InputError("whisper_model", "a Whisper model with alignment_heads in its generation_config.json "
                         "(word times; every OpenAI checkpoint has them)", f"{whisper.folder.name} without them")
    wave = resample(torch.as_tensor(np.asarray(samples, dtype=np.float32)), rate, WHISPER_RATE).numpy()
    tokenizer = whisper.processor.tokenizer
    device = next(whisper.model.parameters()).device
    kwargs = {"task": "transcribe", **({"language": language} if language else {})}
    step = int(WINDOW_S * WHISPER_RATE)
    words: list = []
    for start in range(0, max(wave.size, 1), step):
        feats = whisper.processor(wave[start:start + step], sampling_rate=WHISPER_RATE, return_tensors="pt",
                                  return_attention_mask=True)
        with torch.inference_mode():
            out = whisper.model.generate(feats.input_features.to(device),
                                         attention_mask=feats.attention_mask.to(device),
                                         return_token_timestamps=True, return_dict_in_generate=True, **kwargs)
        ids, times = out["sequences"][0].tolist(), out["token_timestamps"][0].tolist()
        offset = start / WHISPER_RATE
        heard = min(step, wave.size - start) / WHISPER_RATE  # the window is padded to 30 s: no word after its audio
        times = [min(max(t, 0.0), heard) for t in times]
        for i, token in enumerate(ids):
            text = tokenizer.decode([token], skip_special_tokens=True)
            if not text.strip() or _SPECIAL.match(text.strip()):
                continue
            end = offset + (times[i + 1] if i + 1 < len(times) else times[i])
            if text.startswith(" ") or not words or words[-1][3] != start:
                words.append([offset + times[i], end, text.strip(), start])
            else:
                words[-1][1], words[-1][2] = end, words[-1][2] + text.strip()
        if progress is not None:
            progress.step()
    return [(float(a), float(max(a, b)), w) for a, b, w, _ in words]


def snap_starts(cues: Sequence, words: Sequence, max_shift: float = MAX_SHIFT_S) -> list:
    """Each cue's start moved to the nearest ASR word onset within `max_shift` seconds (see the module docstring)."""
    onsets = np.array(sorted(w[0] for w in words), dtype=np.float64)
    if onsets.size == 0:
        return list(cues)
    out = []
    for cue in cues:
        nearest = float(onsets[np.argmin(np.abs(onsets - cue.start))])
        out.append(replace(cue, start=nearest) if abs(nearest - cue.start) <= max_shift else cue)
    return out
