"""One QC pass: measure (streaming), check, render; the verdict never raises for a bad clip, only for bad input.

    result = qc_file("clip.mp4", QCLimits(), expected_text="Good evening.")
    result.verdict, result.failed, result.report["checks"]["lip_sync"], result.sheet   # sheet: uint8 [H, W, 3]

`more_checks`: checks measured elsewhere, in the report's shape (``{name: {"status", "value", "limit", "standard",
"detail", "events"}}``, e.g. `engines.captions.check.for_qc`); they join the verdict, the report, the text and the
sheet like the QC's own, so the sheet's banner and the text's first line always agree with the verdict.

`result.contract()` is what the node puts under `broadcast_qc` in its UI output for the batch runner:
`{"verdict": "pass"|"fail", "failed": [check names], "report": {...}}`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import numpy as np

from ..common.progress import Progress
from . import checks as C
from . import loudness, plot, source
from .limits import QCLimits

Transcriber = Callable[[np.ndarray, int], str]


@dataclass
class QCResult:
    verdict: str
    failed: list
    report: dict
    text: str
    sheet: np.ndarray

    def contract(self) -> dict:
        return {"verdict": self.verdict, "failed": list(self.failed), "report": self.report}


def qc_file(path, limits: QCLimits, expected_text: str = "", transcribe: Optional[Transcriber] = None,
            progress: Optional[Progress] = None, input_name: str = "video",
            more_checks: Optional[Mapping[str, dict]] = None) -> QCResult:
    t0 = time.perf_counter()
    measured = source.measure_file(path, limits, keep_mono=transcribe is not None and bool(expected_text.strip()),
                                   progress=progress, input_name=input_name)
    return evaluate(measured, limits, expected_text, transcribe, time.perf_counter() - t0, more_checks)


def qc_frames(images, fps: float, audio, limits: QCLimits, expected_text: str = "",
              transcribe: Optional[Transcriber] = None, progress: Optional[Progress] = None,
              more_checks: Optional[Mapping[str, dict]] = None) -> QCResult:
    """`audio`: `(samples [C, T], rate)` or None."""
    t0 = time.perf_counter()
    measured = source.measure_frames(images, fps, audio, limits,
                                     keep_mono=transcribe is not None and bool(expected_text.strip()),
                                     progress=progress)
    return evaluate(measured, limits, expected_text, transcribe, time.perf_counter() - t0, more_checks)


def evaluate(measured: source.Measured, limits: QCLimits, expected_text: str = "",
             transcribe: Optional[Transcriber] = None, measure_seconds: float = 0.0,
             more_checks: Optional[Mapping[str, dict]] = None) -> QCResult:
    t0 = time.perf_counter()
    results = C.audio_checks(measured, limits) + C.picture_checks(measured, limits)
    av, sync, face = C.av_checks(measured, limits)
    results += av
    words, transcript = C.intelligibility(measured, limits, expected_text, transcribe)
    results.append(words)
    results += [C.Check.from_report(name, entry) for name, entry in (more_checks or {}).items()]
    failed = [c.name for c in results if c.status == C.FAIL]  # skipped and inconclusive checks never fail
    verdict = "fail" if failed else "pass"
    info = measured.info
    report = {
        "verdict": verdict,
        "failed": failed,
        "source": {k: v for k, v in info.as_dict().items() if v is not None},
        "limits": {k: v for k, v in limits.__dict__.items()},
        "checks": {c.name: c.as_dict() for c in results},
        "notes": list(measured.notes),
    }
    if measured.audio is not None and measured.audio.subblock_power.size:
        st = loudness.short_term(measured.audio.subblock_power)
        mo = loudness.momentary(measured.audio.subblock_power)
        report["loudness"] = {"max_momentary_lufs": _finite(mo.max() if mo.size else None),
                              "max_short_term_lufs": _finite(st.max() if st.size else None)}
    if sync is not None:
        report["lip_sync"] = {"state": sync.state, "reason": sync.reason,
                              "offset_ms": None if sync.offset_ms is None else round(float(sync.offset_ms), 1),
                              "sign": "positive = audio late (after the picture); the standards write audio early "
                                      "as +",
                              "correlation": round(float(sync.correlation), 3),
                              "p_value": None if sync.p_value is None else round(float(sync.p_value), 3),
                              "speech_s": round(float(sync.speech_s), 2), "tolerance": limits.lipsync_tolerance,
                              "face_region_blocks": list(map(int, face)), "grid": list(measured.picture.grid),
                              "block_px": list(measured.picture.block_px)}
    if transcript is not None:
        report["transcript"] = transcript
    report["seconds"] = {"measure": round(measure_seconds, 3), "checks": round(time.perf_counter() - t0, 3)}
    sheet = plot.render(measured, results, verdict, failed, limits.target_lufs, limits.loudness_tolerance_lu)
    return QCResult(verdict, failed, report, summary(report, results), sheet)


def _finite(v):
    return None if v is None or not np.isfinite(v) else round(float(v), 2)


def summary(report: dict, results: list) -> str:
    src = report["source"]
    head = (f"Broadcast QC: {report['verdict'].upper()}"
            + (f" ({', '.join(report['failed'])})" if report["failed"] else "")
            + f"\n{src.get('name')}: {src.get('width')}x{src.get('height')} at {src.get('fps', 0):g} fps, "
              f"{src.get('video_seconds', 0):.2f} s")
    lines = [head]
    for c in results:
        lines.append(f"{c.status.upper():4}  {c.name}: {c.detail} [limit {c.limit}; {c.standard}]")
    return "\n".join(lines)
