"""SAM3 decimation: detect interval 4 against 1 on the same frames, tiny random model, CPU, one run.

Prints, side by side, the detector calls and the wall time of the masking loop for each interval and their ratios
(the posts report 48 s -> 28 s, 1.7x, for 175 frames at 1080x1920 on an RTX 5090 Laptop with the full model).
The tiny model's detector is small next to its backbone, so the time ratio here understates the full model's; the
call ratio is exact. Runs alternate between the intervals and the best of `--repeats` is kept, so a busy machine
hurts both sides alike.

    bash scripts/bench.sh sam3 [--frames 48] [--height 90] [--width 160] [--repeats 3] [--prompts 2] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--height", type=int, default=90)
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=2, help="prompt lines (1-4)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads; 1 keeps the timing stable on a shared machine")
    parser.add_argument("--quick", action="store_true", help="smoke run: 12 frames, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.frames, args.repeats = 12, 1

    import torch
    from transformers.utils import logging as hf_logging

    from engines.sam3.hf_video import TransformersSegmenter, load_sam3_video
    from engines.sam3.segmenter import MaskSettings
    from engines.sam3.video_mask import segment_video
    from tests.fixtures.tiny_sam3 import install_tiny_sam3

    hf_logging.set_verbosity_error()  # the "hitting max_num_objects" notice would repeat on every detection
    torch.set_num_threads(max(1, args.threads))
    prompts = "\n".join(["dress", "hands", "hair", "face"][: max(1, min(4, args.prompts))])
    frames = torch.rand(args.frames, args.height, args.width, 3, generator=torch.Generator().manual_seed(0))

    with tempfile.TemporaryDirectory(prefix="bench-sam3-") as tmp:
        bundle = load_sam3_video(install_tiny_sam3(tmp))
        results = {4: [], 1: []}
        calls = {}
        segment_video(TransformersSegmenter(bundle), frames[:4], prompts,
                      MaskSettings(detection_threshold=0.0, detect_interval=1, max_objects=4))  # warm-up
        for _ in range(args.repeats):
            for interval in (4, 1):
                seg = TransformersSegmenter(bundle)
                settings = MaskSettings(detection_threshold=0.0, detect_interval=interval, max_objects=4)
                start = time.perf_counter()
                segment_video(seg, frames, prompts, settings)
                results[interval].append(time.perf_counter() - start)
                calls[interval] = seg.detector_calls

    t4, t1 = min(results[4]), min(results[1])
    print(f"SAM3 tiny model, CPU ({torch.get_num_threads()} threads), {args.frames} frames "
          f"{args.width}x{args.height}, {args.prompts} prompt(s), best of {args.repeats}")
    print(f"{'detect_interval':>16} {'detector calls':>15} {'wall s':>8} {'ms/frame':>9}")
    for interval, t in ((1, t1), (4, t4)):
        print(f"{interval:>16} {calls[interval]:>15} {t:>8.3f} {1000 * t / args.frames:>9.1f}")
    print(f"ratio interval 1 / interval 4: detector calls {calls[1] / calls[4]:.2f}x, wall time {t1 / t4:.2f}x "
          f"(posts, full model on GPU: 48 s / 28 s = 1.71x)")


if __name__ == "__main__":
    main()
