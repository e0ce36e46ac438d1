"""Can QC be trusted? Two measurements on independent speech (espeak-ng, not the pack's voice), printed, never
pass/fail.

--aac      AAC overshoot: espeak-ng readings (en/es, several voices and rates) mastered by Broadcast Audio Master's
           engine at a target with the limiter held at the ceiling itself (codec headroom 0), through the export's
           48 kHz resampler and AAC muxer at a bit rate, decoded with PyAV; prints each reading's decoded true
           peak minus the master's, and their spread. This is what `codec_headroom_db` must cover.
--lipsync  False verdicts on unrelated pairs: a mouth animated from one reading's phoneme timings, muxed with
           another, unrelated reading; prints how often the lip-sync estimator gives a verdict (in sync / out of
           sync) instead of "inconclusive". Goal <= 5 %.

    python benchmarks/bench_qc_trust.py --aac [--target -14] [--kbps 192]
    python benchmarks/bench_qc_trust.py --lipsync [--pairs 60]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures import espeak  # noqa: E402

TEXTS = {
    "en": ("Good evening. The tram line was approved tonight by the city council, after six years of debate. "
           "Fares will rise by forty two cents from March, the mayor said."),
    "es": ("Buenas noches. El tranvía fue aprobado esta noche por el consejo municipal, tras seis años de debate. "
           "Los billetes subirán cuarenta y dos céntimos en marzo, dijo la alcaldesa."),
}
VOICES = {"en": ("en", "en-us", "en+f3", "en+m3"), "es": ("es", "es-419", "es+f2")}


def aac_overshoot(target: float, kbps: int) -> None:
    import av
    import torch

    from engines.common import true_peak
    from engines.common.audio import resample
    from engines.export.audio_track import AudioMuxer, AudioTrack
    from engines.omnivoice import master

    settings = master.MasterSettings(target_lufs=target, ceiling_dbtp=-1.0, codec_headroom_db=0.0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for lang, voices in VOICES.items():
            for voice in voices:
                for wpm in (140, 175):
                    said = espeak.say(TEXTS[lang], voice, wpm)
                    x = resample(torch.tensor(said.samples[None], dtype=torch.float32), said.rate, 24000)[0]
                    y, report = master.master(x.double().numpy(), 24000, settings)
                    track = AudioTrack.from_array(y[None], 24000)
                    path = Path(tmp) / f"{voice}{wpm}.mp4"
                    with av.open(str(path), "w", format="mp4") as container:
                        AudioMuxer(container, track, kbps).finish(track.length)
                    with av.open(str(path)) as container:
                        decoded = np.concatenate([f.to_ndarray().reshape(-1)
                                                  for f in container.decode(container.streams.audio[0])])
                    after = true_peak.true_peak_db(decoded, 48000)
                    rows.append(after - report.output_true_peak_db)
                    print(f"{voice:8} {wpm} wpm: master {report.output_true_peak_db:7.3f} dBTP, decoded AAC "
                          f"{after:7.3f} dBTP, overshoot {rows[-1]:+.3f} dB", flush=True)
    rows = np.array(rows)
    print(f"target {target:g} LUFS, AAC {kbps} kbps mono, {rows.size} readings: overshoot mean {rows.mean():+.3f} "
          f"dB, median {np.median(rows):+.3f}, max {rows.max():+.3f}, min {rows.min():+.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aac", action="store_true")
    ap.add_argument("--lipsync", action="store_true")
    ap.add_argument("--target", type=float, default=-14.0)
    ap.add_argument("--kbps", type=int, default=192)
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="a smoke run (bash scripts/bench.sh --quick): 6 pairs")
    args = ap.parse_args()
    if args.quick:
        args.pairs = min(args.pairs, 6)
    if not espeak.available():
        sys.exit("espeak-ng is not installed (scripts/env.sh installs it)")
    if args.aac or not args.lipsync:
        aac_overshoot(args.target, args.kbps)
    if args.lipsync:
        from tests.fixtures.lipsync_clips import false_verdict_rate

        false_verdict_rate(args.pairs, verbose=True)


if __name__ == "__main__":
    main()
