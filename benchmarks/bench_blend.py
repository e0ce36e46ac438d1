"""Paste-back blends side by side: cost per frame of feather, Reinhard-Lab colour transfer and Poisson
(cv2.seamlessClone) in the three compositors, on 1080x1920 frames, CPU, one thread, one run (printed, never
pass/fail):

1. MuseTalk: the mouth window of a 420 px face box (`MouthPaster`);
2. Ditto: the putback of a 512 crop covering a ~560 px face (reinhard recolours the mouth box only, poisson
   clones the whole face);
3. wardrobe: Subject Uncrop of a torso-sized garment box (640x864) (reinhard fits on the ring of context around the garment);
4. seam visibility on real faces (`--seams`): MuseTalk's mouth paste (mouth mask of the shipped crop) on real
   photographs scikit-image ships that OpenCV's Haar cascade finds a face in (the astronaut, Eileen Collins; the
   cameraman, if found), with a "generated" mouth made from the same face taken 0, 4 or 8 px lower (another pose's
   crop, as a mouth made over another loop frame) under
   a colour cast in Lab (none, warm, cool, darker: the tone errors a VAE decode makes). Per mode: the seam (the
   mean-colour step from a 4 px band inside the mouth's core, alpha > 0.5, to a 4 px band just outside the paste
   region, minus the same step in the untouched photo; CIE76 Delta E of the difference) and the cast left in the
   mouth (Delta E between the mean colours of the core in the composite and in the photo).

    python benchmarks/bench_blend.py              # 40 MuseTalk frames, 8 Ditto and wardrobe frames per mode
    python benchmarks/bench_blend.py --quick      # 5 / 2
    python benchmarks/bench_blend.py --seams      # only 4 (seconds)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.common import blend_modes  # noqa: E402
from engines.common.blend_modes import MODES  # noqa: E402
from engines.ditto import putback  # noqa: E402
from engines.musetalk.blend import MouthPaster, mouth_mask  # noqa: E402
from engines.wardrobe import crop as wardrobe_crop  # noqa: E402


def report(title: str, times: dict) -> None:
    base = statistics.median(times["feather"])
    print(f"\n{title}")
    print(f"   {'mode':<9} {'ms/frame':>9} {'x feather':>10}")
    for mode in MODES:
        t = statistics.median(times[mode])
        print(f"   {mode:<9} {t * 1000:>9.2f} {t / base:>10.1f}")


def bench_ditto(frames: int) -> dict:
    g = torch.Generator().manual_seed(1)
    frame = (torch.rand(1, 1920, 1080, 3, generator=g) * 255).to(torch.uint8)
    crop = torch.rand(1, 3, 512, 512, generator=g)
    m_c2o = torch.tensor([[1.1, 0.02, 260.0], [-0.02, 1.1, 420.0], [0, 0, 1]], dtype=torch.float64).numpy()[None]
    m_o2c = torch.linalg.inv(torch.from_numpy(m_c2o[0])).numpy()[None]
    out = torch.empty(1, 1920, 1080, 3)
    times = {}
    for _ in range(2):
        for mode in MODES:
            putback.putback(frame, crop, m_o2c, m_c2o, out=out, blend=mode)
            t0 = time.perf_counter()
            for _ in range(frames):
                putback.putback(frame, crop, m_o2c, m_c2o, out=out, blend=mode)
            times.setdefault(mode, []).append((time.perf_counter() - t0) / frames)
    return times


def bench_wardrobe(frames: int) -> dict:
    g = torch.Generator().manual_seed(2)
    images = torch.rand(frames, 1920, 1080, 3, generator=g)
    masks = torch.zeros(frames, 1920, 1080)
    masks[:, 900:1700, 260:820] = 1.0                       # a torso-sized garment
    masks[:, 1100:1250, 400:520] = 0.0                      # a hand cut out of it
    crops, _, record = wardrobe_crop.crop(images, masks, padding=32, multiple=32, feather=16)
    gen = (crops * 0.9 + 0.05).clamp(0, 1)                  # an "inpainted" crop with a cast
    times = {}
    for _ in range(2):
        for mode in MODES:
            t0 = time.perf_counter()
            wardrobe_crop.uncrop(images, gen, record, blend=mode)
            times.setdefault(mode, []).append((time.perf_counter() - t0) / frames)
    print(f"\n(wardrobe box {record.box_size[1]}x{record.box_size[0]}; every mode includes the frame copies)")
    return times


# Colour casts of the "generated" mouth (Delta L, Delta a, Delta b): none, warm (the posts' sunburned/pink VAE
# failure), cool, darker.
CASTS = {"none": (0.0, 0.0, 0.0), "warm": (2.0, 6.0, 4.0), "cool": (0.0, -3.0, -6.0), "darker": (-6.0, 0.0, 0.0)}
# How much lower the "generated" mouth's crop is taken (px of the photo): 0 = the same pixels, then a pose's worth.
POSE_SHIFTS = (0, 4, 8)


def _real_faces() -> list:
    """(name, RGB float photo [H, W, 3], face box) for the real photographs scikit-image ships, faces found by
    OpenCV's Haar cascade (the pack's fallback detector)."""
    import numpy as np
    from skimage import data

    from engines.musetalk.face_track import HaarDetector, pick_face

    faces = []
    for name, img in (("astronaut", data.astronaut()), ("camera", np.repeat(data.camera()[..., None], 3, -1))):
        box = pick_face(HaarDetector()(np.ascontiguousarray(img)))
        if box is not None:
            faces.append((name, torch.from_numpy(img.astype("float32") / 255.0), [float(v) for v in box]))
    return faces


def _crop(photo, box, dy: int = 0):
    """MuseTalk's 256 crop of `photo` for face `box` (the shipped margins: 8 % above, 22 % below), `dy` px lower."""
    from engines.musetalk.avatar import CropSettings, lanczos_crop

    s = CropSettings()
    x1, y1, x2, y2 = box
    h = y2 - y1
    crop_box = [round(x1), round(y1 - s.top * h) + dy, round(x2), round(y2 + s.bottom * h) + dy]
    return lanczos_crop(photo, crop_box)


def _ring(mask, width: int, outside: bool):
    from scipy.ndimage import binary_dilation, binary_erosion

    m = mask.numpy()
    if outside:
        return torch.from_numpy(binary_dilation(m, iterations=width) & ~m)
    return torch.from_numpy(m & ~binary_erosion(m, iterations=width))


def seam_figures(bg, fg, alpha) -> dict:
    """Per mode (seam, cast) in CIE76 Delta E for one composite: see the module docstring, section 4."""
    core = alpha > 0.5
    inner, outer = _ring(core, 4, False), _ring(alpha > 0, 4, True)
    lab_bg = blend_modes.rgb_to_lab(bg)

    def step(lab):       # mean Lab just inside the mouth's core minus just outside the paste region
        return lab[:, inner].mean(1) - lab[:, outer].mean(1)

    out = {}
    for mode in MODES:
        lab = blend_modes.rgb_to_lab(blend_modes.composite(fg, bg, alpha, mode))
        seam = float(torch.linalg.norm(step(lab) - step(lab_bg)))
        cast = float(torch.linalg.norm(lab[:, core].mean(1) - lab_bg[:, core].mean(1)))
        out[mode] = (seam, cast)
    return out


def bench_seams() -> None:
    import numpy as np

    alpha = mouth_mask()
    print("\nseam visibility of MuseTalk's mouth paste on real photographs (CIE76 Delta E; seam = colour step across "
          "the paste border beyond the photo's own, cast = the mouth core's mean colour against the photo's):")
    print(f"   {'face, shift':<14} {'cast':<7} " + " ".join(f"{m + ' seam':>13} {m + ' cast':>13}" for m in MODES))
    rows = {m: [] for m in MODES}
    for name, photo, box in _real_faces():
        bg = _crop(photo, box)
        for dy in POSE_SHIFTS:
            lab = blend_modes.rgb_to_lab(_crop(photo, box, dy=dy))
            for cast_name, shift in CASTS.items():
                fg = blend_modes.lab_to_rgb(lab + torch.tensor(shift, dtype=lab.dtype).view(3, 1, 1)).float()
                figures = seam_figures(bg, fg, alpha)
                for m in MODES:
                    rows[m].append(figures[m])
                print(f"   {name + f' +{dy}px':<14} {cast_name:<7} "
                      + " ".join(f"{figures[m][0]:>13.2f} {figures[m][1]:>13.2f}" for m in MODES))
    for m in MODES:
        seam, cast = np.asarray(rows[m]).T
        print(f"   {m:<9} seam median {np.median(seam):.2f} [{seam.min():.2f} to {seam.max():.2f}], cast median "
              f"{np.median(cast):.2f} [{cast.min():.2f} to {cast.max():.2f}] over {len(seam)} cases")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--box", type=int, default=420, help="face box side in frame pixels (a 1080p anchor)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seams", action="store_true", help="only the seam visibility on real faces")
    args = parser.parse_args(argv)
    if args.seams:
        bench_seams()
        return 0
    frames = 5 if args.quick else args.frames
    big = 2 if args.quick else 8
    # One thread for every mode (torch and OpenCV): on a shared machine, thread hand-offs on these small tensors
    # swamp the work being measured (a 2-thread run under load gave Reinhard 3.4x to 12.9x feather from run to run).
    import cv2

    cv2.setNumThreads(1)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    frame = torch.rand(1920, 1080, 3, generator=g)
    faces = [torch.rand(3, 256, 256, generator=g) for _ in range(4)]
    box = (330, 500, 330 + args.box, 500 + args.box)
    times = {}
    for _ in range(2):  # interleaved rounds: load changes hit every mode alike
        for mode in MODES:
            paster = MouthPaster(mouth_mask(), mode)
            paster.paste(frame.clone(), faces[0], box)  # plan built outside the timing
            work = frame.clone()
            t0 = time.perf_counter()
            for k in range(frames):
                paster.paste(work, faces[k % 4], box)
            times.setdefault(mode, []).append((time.perf_counter() - t0) / frames)
    report(f"MuseTalk paste-back on a {args.box}x{args.box} face box of a 1080x1920 frame, {frames} frames per mode "
           "per round", times)
    report(f"Ditto putback of a 512 crop (~560 px face) into a 1080x1920 frame, {big} frames per mode per round",
           bench_ditto(big))
    report(f"wardrobe Subject Uncrop, 1080x1920 frames, {big} frames per mode per round", bench_wardrobe(big))
    bench_seams()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
