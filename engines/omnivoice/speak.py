"""Speech from prepared clauses: batched OmniVoice generation, then seamless joins.

Sampling settings map one to one onto ``OmniVoiceGenerationConfig`` fields of omnivoice 0.2.1 (``num_step``,
``guidance_scale``, ``t_shift``, ``layer_penalty_factor``, ``position_temperature``, ``class_temperature``,
``denoise``, ``postprocess_output``); ``speed`` is an argument of ``generate``. Two presets:

- ``upstream``: the package defaults (32 steps, guidance 2.0, t_shift 0.1, layer penalty 5.0);
- ``posts``: the broadcast posts' values (10 steps, t_shift 0.9, layer penalty 0.05). Measured against the package
  docstrings they work against the posts' own stated intent (a larger t_shift means *less* low-SNR emphasis, and
  0.05 barely orders the codebook layers), so they are offered as a named choice, never as the default.

Voice design: ``instruct`` is upstream's voice-design text (comma-separated items: gender, age, pitch, whisper,
accent), checked with upstream's own validator before anything runs; a cadence preset adds the items the posts map
it onto (``breaking_urgent`` -> "young adult, moderate pitch", ...). With a voice prompt, OmniVoice clones the voice
and takes the items as style; without one it designs a voice from them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..captions.timing import CaptionTiming, ClauseSpan, timing
from ..common.errors import InputError
from ..common.progress import ensure
from .joins import join_with_spans, quiet_samples
from .text import PreparedText

PRESETS = {
    "upstream": {"num_step": 32, "guidance_scale": 2.0, "t_shift": 0.1, "layer_penalty_factor": 5.0},
    "posts": {"num_step": 10, "guidance_scale": 2.0, "t_shift": 0.9, "layer_penalty_factor": 0.05},
}
# The posts' cadence presets, as the instruct items they map them onto.
CADENCES = {"none": "", "breaking_urgent": "young adult, moderate pitch", "commercial_hook": "young adult, high pitch",
            "narrative_slow": "middle-aged, low pitch", "casual_banter": "young adult"}


def resolve_instruct(instruct: str = "", cadence: str = "none") -> Optional[str]:
    """The cadence preset's items followed by the user's, validated by upstream; None when there are none."""
    if cadence not in CADENCES:
        raise InputError("cadence", f"one of {', '.join(CADENCES)}", repr(cadence))
    items = [i.strip() for part in (CADENCES[cadence], instruct or "") for i in part.split(",") if i.strip()]
    seen = []
    for item in items:  # the same item from the preset and the user counts once
        if item.lower() not in (s.lower() for s in seen):
            seen.append(item)
    if not seen:
        return None
    text = ", ".join(seen)
    try:
        from omnivoice.models.omnivoice import _resolve_instruct  # upstream's validator (private in 0.2.1)
    except ImportError:
        return text  # generate() validates it again
    try:
        return _resolve_instruct(text)
    except ValueError as exc:
        raise InputError("instruct", "voice-design items OmniVoice knows (gender: male, female; age: child, "
                         "teenager, young adult, middle-aged, elderly; pitch: very low ... very high pitch; "
                         "whisper; an accent such as british accent), one of each kind",
                         repr(text), str(exc).split("\n\n")[0].replace("\n", " ")) from exc


@dataclass(frozen=True)
class SpeakSettings:
    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0
    speed: float = 1.0
    seed: int = 0
    denoise: bool = True
    trim_silence: bool = True
    instruct: str = ""      # voice-design items (validated by `resolve_instruct`)
    cadence: str = "none"   # a key of CADENCES

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "SpeakSettings":
        if name not in PRESETS and name != "custom":
            raise InputError("preset", f"one of {', '.join(list(PRESETS) + ['custom'])}", repr(name))
        return cls(**{**PRESETS.get(name, {}), **overrides})

    def generation_kwargs(self) -> dict:
        """The ``OmniVoice.generate`` keyword arguments; every name is checked against the installed config."""
        from omnivoice import OmniVoiceGenerationConfig

        kwargs = {"num_step": int(self.num_step), "guidance_scale": float(self.guidance_scale),
                  "t_shift": float(self.t_shift), "layer_penalty_factor": float(self.layer_penalty_factor),
                  "position_temperature": float(self.position_temperature),
                  "class_temperature": float(self.class_temperature), "denoise": bool(self.denoise),
                  "postprocess_output": bool(self.trim_silence)}
        known = {f.name for f in dataclasses.fields(OmniVoiceGenerationConfig)}
        unknown = sorted(set(kwargs) - known)
        if unknown:  # a newer omnivoice renamed a field: fail loudly rather than have from_dict drop it
            raise RuntimeError(f"installed omnivoice has no generation fields {unknown}")
        return kwargs


@contextlib.contextmanager
def seeded(seed: int, device: torch.device):
    """Seed torch's RNG for one call without disturbing the caller's random state."""
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(seed))
        yield


@dataclass
class SpeakResult:
    samples: np.ndarray  # float32 [T] at `sample_rate`
    sample_rate: int
    clause_seconds: list
    wall_seconds: float
    timing: Optional[CaptionTiming] = None  # where each clause is heard, with its written text (captions)

    @property
    def real_time_factor(self) -> float:
        return self.wall_seconds / max(self.samples.size / self.sample_rate, 1e-9)


def speak(loaded, prepared: PreparedText, prompt, settings: SpeakSettings = SpeakSettings(),
          progress=None) -> SpeakResult:
    """Generate every clause (in `prepared.sub_batches`), check each clip, join them in order.

    `prompt` None is voice design (from ``settings.instruct``/``cadence``) or, with neither, OmniVoice's own voice.
    """
    t0 = time.perf_counter()
    clips = generate_clips(loaded, prepared.clauses, [prompt] * len(prepared.clauses), prepared.language,
                           prepared.sub_batches, settings, progress)
    wall = time.perf_counter() - t0
    samples, spans = join_with_spans(clips, prepared.joins, loaded.sample_rate)
    placed = clause_spans(clips, spans, prepared.clauses, prepared.written)
    return SpeakResult(samples=samples, sample_rate=loaded.sample_rate,
                       clause_seconds=[c.size / loaded.sample_rate for c in clips], wall_seconds=wall,
                       timing=timing(placed, loaded.sample_rate, samples.size, prepared.language))


def clause_spans(clips, spans, clauses, written=(), speaker: str = "") -> list:
    """A `ClauseSpan` per clip placed at ``spans[i]`` by the joins; its speech is where the clip rises above the
    joins' quiet level. `written` empty (clauses made by hand) shows the clauses themselves."""
    written = tuple(written) or tuple(clauses)
    out = []
    for clip, (start, end), clause, text in zip(clips, spans, clauses, written):
        onset = start + quiet_samples(clip, from_end=False)
        stop = start + clip.size - quiet_samples(clip, from_end=True)
        if stop <= onset:  # all quiet: the whole clip is its span
            onset, stop = start, end
        out.append(ClauseSpan(start=int(start), end=int(end), voice_start=int(min(onset, end)),
                              voice_end=int(min(stop, end)), written=text, spoken=clause, speaker=speaker))
    return out


def check_settings(settings: SpeakSettings) -> None:
    if settings.num_step < 1:
        raise InputError("steps", "at least 1 decoding step", str(settings.num_step))
    if not 0.25 <= settings.speed <= 4.0:
        raise InputError("speed", "a speed factor between 0.25 and 4", str(settings.speed))


def generate_clips(loaded, clauses, prompts, language: str, batches, settings: SpeakSettings,
                   progress=None) -> list:
    """One checked float32 clip per clause; ``prompts[i]`` is clause i's voice (None: designed or auto voice).

    Each batch in `batches` (clause indices) is one ``generate`` call seeded with ``seed + batch number``, so the
    same settings give the same audio; clauses of different voices may share a batch (upstream takes one prompt per
    item).
    """
    progress = ensure(progress)
    check_settings(settings)
    kwargs = settings.generation_kwargs()
    instruct = resolve_instruct(settings.instruct, settings.cadence)
    upstream = {id(p): p.to_upstream() for p in prompts if p is not None}
    clips: list[Optional[np.ndarray]] = [None] * len(clauses)
    progress.reset(len(batches))
    for b, batch in enumerate(batches):
        texts = [clauses[i] for i in batch]
        voices = [upstream.get(id(prompts[i])) if prompts[i] is not None else None for i in batch]
        if all(v is None for v in voices):
            voice_arg = None
        elif any(v is None for v in voices):
            raise ValueError("a batch mixes cloned and designed voices")  # callers batch them apart
        else:
            voice_arg = voices if len({id(v) for v in voices}) > 1 else voices[0]
        with seeded(settings.seed + b, loaded.device):
            out = loaded.model.generate(text=texts, language=language, voice_clone_prompt=voice_arg,
                                        instruct=instruct,
                                        speed=None if settings.speed == 1.0 else float(settings.speed), **kwargs)
        for i, clip in zip(batch, out):
            clips[i] = _check_clip(np.asarray(clip, dtype=np.float32).reshape(-1), clauses[i], loaded)
        progress.step()
    return clips


def _check_clip(clip: np.ndarray, clause: str, loaded) -> np.ndarray:
    if not np.isfinite(clip).all():
        raise InputError("precision", "finite audio from the model", f"NaN/inf in the clip for {clause!r}",
                         f"The backbone ran in {loaded.backbone_dtype}; reload with precision fp32 or bf16.")
    if clip.size == 0:
        raise InputError("trim_silence", "audio for every clause", f"an empty clip for {clause!r} after OmniVoice "
                         "removed silence", "Turn trim_silence off, or check the voice prompt's level.")
    return clip
