"""Which encoder runs: the NVENC probe (asked once per process) and the fallback chain.

NVENC needs an NVIDIA GPU, its driver and an FFmpeg build with NVENC; any of them can be missing, and a present
NVENC can still refuse (no free session, unsupported size or bit depth). Asking `av.codecs_available` is not enough,
so the probe opens a tiny real encoder and encodes one frame. The answer is cached: opening NVENC costs ~100 ms and
the hardware does not appear mid-process.

Where NVENC is missing or refuses, the software encoder of the same format takes over (H.264 -> libx264,
HEVC -> libx265) with one logged warning per process giving the precise reason, and a plain sentence in the export's
result ("NVENC: not available on this machine, encoded with libx264").
"""
from __future__ import annotations

import logging
import threading
from fractions import Fraction
from dataclasses import dataclass
from typing import Callable, Optional

from .settings import ENCODERS, NVENC_CODECS, SOFTWARE_TWIN

log = logging.getLogger("broadcast_avatar.export")

# probe(codec) -> None when the encoder works, else a one-line reason.
Probe = Callable[[str], Optional[str]]

_probe_cache: dict[str, Optional[str]] = {}
_probe_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()


def probe_encoder(codec: str) -> Optional[str]:
    """Open `codec` on a 256x256 frame and encode it; return None if that works, else why not (cached)."""
    with _probe_lock:
        if codec not in _probe_cache:
            _probe_cache[codec] = _try_encoder(codec)
        return _probe_cache[codec]


def _try_encoder(codec: str) -> Optional[str]:
    import av
    import numpy as np

    if codec not in av.codecs_available:
        return f"{codec} is not in this FFmpeg build"
    try:
        ctx = av.CodecContext.create(codec, "w")
        ctx.width, ctx.height = 256, 256
        ctx.pix_fmt = "nv12" if codec in NVENC_CODECS else "yuv420p"
        ctx.time_base = Fraction(1, 25)
        ctx.framerate = 25
        ctx.open()
        frame = av.VideoFrame.from_ndarray(np.zeros((384, 256), np.uint8), format="nv12")
        if ctx.pix_fmt != "nv12":
            frame = frame.reformat(format=ctx.pix_fmt)
        frame.pts = 0
        ctx.encode(frame)
        ctx.encode(None)
    except Exception as exc:  # any refusal (no device, no driver, no session) means "not usable here"
        return f"{codec} refused to open: {type(exc).__name__}: {exc}".strip()
    return None


def reset_probe_cache() -> None:
    """Forget probe answers and issued warnings (tests; a process that gained a GPU)."""
    with _probe_lock:
        _probe_cache.clear()
        _warned.clear()


@dataclass(frozen=True)
class Choice:
    """An encoder to try, and the one to fall back to if it refuses at open time."""

    codec: str
    fallback: Optional[str]
    # Why an earlier candidate was skipped (probe said no); None when the first choice is used as asked.
    skipped_reason: Optional[str] = None


def choose_encoder(encoder: str, bit_depth: int = 8, probe: Optional[Probe] = None) -> Choice:
    """Resolve the user's encoder choice into the codec to open first and its software fallback.

    "auto" means H.264 on NVENC for 8 bit (plays everywhere) and HEVC on NVENC for 10 bit (H.264 10-bit is neither
    widely encodable on NVENC nor playable in browsers); each falls back to its software twin.
    """
    probe = probe or probe_encoder
    if encoder == "auto":
        wanted = "hevc_nvenc" if bit_depth == 10 else "h264_nvenc"
    else:
        wanted = ENCODERS[encoder]
    if wanted not in NVENC_CODECS:
        return Choice(wanted, None)
    reason = probe(wanted)
    if reason is None:
        return Choice(wanted, SOFTWARE_TWIN[wanted])
    return Choice(SOFTWARE_TWIN[wanted], None, skipped_reason=reason)


# What the export's summary says when the probe turned NVENC down: the user cannot act on the driver's exact words
# (a CPU-only server answers "PermissionError: Operation not permitted"), so the summary says it plainly and the log
# keeps the precise reason.
NVENC_ABSENT = "NVENC: not available on this machine"


def warn_fallback(requested: str, used: str, reason: str, *, probed: bool = True) -> str:
    """Log the fallback with its precise reason once per process (per pair) and return the sentence for the export's
    summary: `probed` (the probe said no) gives NVENC_ABSENT; otherwise NVENC opened in the probe but refused this
    stream (size, bit depth, no free session), which the sentence says, the reason staying in the log."""
    key = (requested, used)
    if key not in _warned:
        _warned.add(key)
        log.warning("Broadcast export: %s unavailable (%s); encoded with %s instead. This warning is shown once per "
                    "session.", requested, reason, used)
    if probed:
        return f"{NVENC_ABSENT}, encoded with {used}"
    return f"NVENC ({requested}) refused this stream, encoded with {used} (the reason is in the log)"
