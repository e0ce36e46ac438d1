"""The checks every wardrobe end-to-end test makes on a sampled swap (VACE, MiniMax H3, core SAM3 masks), in one place.

The shipped workflow is queued unchanged except for output taps: core PreviewImage nodes on image outputs, whose
PNGs are lossless (the exported MP4 is 4:2:0 H.264 and cannot show pixel-exact equality). Against the synthetic
clip's ground truth (tests/fixtures/wardrobe_clip.py):
- `check_swap_keeps_source`: outside the garment and on every hand pixel the output is the source exactly, the
  garment changed, and the 3-6 px gaps between fingers are repainted where the graph subtracts the hands as they are,
  or keep the source where it grows them enough to close the gaps (MiniMax H3's Grow Hands);
- `check_token_blocks_stay_inside`: the sampler's token blocks spill past the garment inside the crop (else the
  check proves nothing), and none of that reaches the output;
- `exported_video`: one MP4 of the clip's length and size, with the source audio.
"""
from __future__ import annotations

import io
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

import numpy as np


def with_image_taps(prompt: dict, taps: dict, node_by_title: Callable[[dict, str], str]) -> tuple[dict, dict]:
    """The prompt plus one PreviewImage per tap (``{tap: (node title, output slot)}``); returns it and
    ``{tap: tap node id}``."""
    out, ids = dict(prompt), {}
    for i, (tap, (title, slot)) in enumerate(taps.items()):
        out[f"tap{i}"] = {"class_type": "PreviewImage", "inputs": {"images": [node_by_title(prompt, title), slot]},
                          "_meta": {"title": f"test tap: {tap}"}}
        ids[tap] = f"tap{i}"
    return out, ids


def tap_frames(comfy, entry: dict, node_id: str) -> np.ndarray:
    """A tap's PNGs as uint8 [T, H, W, 3], fetched through the server's /view (where ComfyUI keeps temp files is its
    business)."""
    from PIL import Image

    frames = []
    for it in entry["outputs"][node_id]["images"]:
        query = urllib.parse.urlencode({"filename": it["filename"], "subfolder": it["subfolder"], "type": it["type"]})
        with urllib.request.urlopen(f"{comfy.url}/view?{query}", timeout=60) as resp:
            frames.append(np.asarray(Image.open(io.BytesIO(resp.read())).convert("RGB")))
    return np.stack(frames)


def find_box(crop: np.ndarray, frame: np.ndarray) -> tuple[int, int]:
    """Top-left of `crop` inside `frame` (a fixed crop is an exact copy of source pixels where it overlaps)."""
    ch, cw = crop.shape[:2]
    H, W = frame.shape[:2]
    for y0 in range(-ch + 1, H):
        for x0 in range(-cw + 1, W):
            sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + ch), max(0, x0), min(W, x0 + cw)
            if sy1 - sy0 < ch // 2 or sx1 - sx0 < cw // 2:
                continue
            if np.array_equal(crop[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0], frame[sy0:sy1, sx0:sx1]):
                return y0, x0
    raise AssertionError("the cropped frames are not a copy of the source frames")


def check_swap_keeps_source(src: np.ndarray, out: np.ndarray, truth: dict, grow_hands: int = 0) -> None:
    """`grow_hands`: the px the graph grows the hands by before subtracting them from the compositor's mask."""
    from tests.fixtures.wardrobe_clip import GAP_WIDTHS

    garment, hands, gaps = (truth[k].numpy() > 0.5 for k in ("garment", "hands", "gaps"))
    assert src.shape == out.shape == garment.shape + (3,)
    # The compositor's pixel mask lies inside the garment (the refine only feathers inward): outside it, and on
    # every hand pixel, the output is the source exactly.
    assert np.array_equal(out[~garment], src[~garment])
    assert np.array_equal(out[hands], src[hands])
    # The sampler really painted the garment, away from the grown hands; within `grow_hands` px of a hand the garment
    # is the source exactly (the growth is a Euclidean disk: the distance transform is the independent measure).
    diff = np.abs(out.astype(np.int16) - src.astype(np.int16)).max(axis=-1)
    far = garment.copy()
    if grow_hands:
        from scipy.ndimage import distance_transform_edt

        dist = np.stack([distance_transform_edt(~h) for h in hands])
        ring = garment & (dist < grow_hands)
        assert ring.any() and np.array_equal(out[ring], src[ring]), "the garment next to the grown hands changed"
        far &= dist > grow_hands
    assert (diff[far] > 0).mean() > 0.9, (diff[far] > 0).mean()
    # Gaps between fingers: the compositor's mask is the garment minus the hands grown by a disk of `grow_hands` px,
    # so a gap up to 2 x grow_hands wide is closed there and keeps the source (the old garment); a wider one stays
    # garment and is repainted (not closed, not left as the old garment).
    assert gaps.sum() > 0
    if 2 * grow_hands >= max(GAP_WIDTHS):
        assert np.array_equal(out[gaps], src[gaps]), "a finger gap the grown hands close was repainted"
    else:
        assert 2 * grow_hands < min(GAP_WIDTHS), "the clip's gaps would be partly closed: no clear expectation"
        assert (diff[gaps] > 0).mean() > 0.9, (diff[gaps] > 0).mean()


def check_token_blocks_stay_inside(src: np.ndarray, crops: np.ndarray, decoded: np.ndarray, out: np.ndarray,
                                   garment: np.ndarray, block: int) -> None:
    """The sampler's `block`-px token blocks spill past the garment in the crops; the compositor leaves no block
    (nor its edge) outside it."""
    assert decoded.shape == crops.shape, "frames in must equal frames out"
    ch, cw = crops.shape[1:3]
    assert ch % block == 0 and cw % block == 0
    y0, x0 = find_box(crops[0], src[0])
    spill = np.zeros((ch, cw), dtype=bool)  # inside the crop, inside the frame, outside every frame's garment
    H, W = garment.shape[1:]
    sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + ch), max(0, x0), min(W, x0 + cw)
    spill[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = ~garment[:, sy0:sy1, sx0:sx1].any(axis=0)
    changed = np.abs(decoded.astype(np.int16) - crops.astype(np.int16)).max(axis=-1) > 0
    assert spill.any() and changed[:, spill].mean() > 0.2, \
        "the sampler changed nothing outside the garment: the test proves nothing"
    outside = ~garment.any(axis=0)
    assert np.array_equal(out[:, outside], src[:, outside])


def exported_video(comfy, entry: dict, frames: int, width: int, height: int) -> Path:
    """The run's one MP4: `frames` frames of width x height, with an audio track."""
    from engines.export import reader

    videos = [Path(comfy.output_dir) / it["subfolder"] / it["filename"]
              for out in entry["outputs"].values() for it in out.get("images", []) if it.get("type") == "output"
              and it["filename"].endswith(".mp4")]
    assert len(videos) == 1, entry["outputs"]
    info = reader.probe(videos[0], "video")
    assert info.frame_count == frames and (info.width, info.height) == (width, height)
    assert reader.read_audio(videos[0]) is not None, "the source audio must be in the export"
    return videos[0]
