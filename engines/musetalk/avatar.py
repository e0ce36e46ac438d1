"""Avatar precompile: a loop's crop boxes, reference latents and blend mask, computed once and cached.

For each loop frame the face crop (box from the face track, widened to MuseTalk's crop: brows' top to below the
chin) is resized to 256x256 as upstream does it (an 8-bit crop through OpenCV's Lanczos-4, `lanczos_crop`) and
VAE-encoded twice: once with its lower half blanked (the part the UNet repaints)
and once whole (the reference). The two ``[4, 32, 32]`` latents, concatenated, are the UNet's 8-channel input for
any speech frame shown over that loop frame. The encoder's distribution mode is used, not a random sample, so an
avatar is deterministic and its cache entry reproducible (upstream samples; the difference is below the VAE noise).

Stored through the shared content-hash cache (safetensors, memory-mapped on load) under a key made of the frames'
content inside the crop boxes, the boxes, the mask settings, the VAE files and the compute dtype: a second run with
the same frames loads instead of recomputing. The loop frames themselves are not stored there: the avatar keeps a
reference to the IMAGE tensor it was built from.

Cold boots: when the node knows what produced the frames (a loop file picked in Load Video, see
engines/common/source_cache.py), `build_avatar` is given a `source_key` too. A link under that key holds the loop's
frames (uint8) and names the avatar entry; on a hit both are read memory-mapped and the frames are never decoded,
tracked or hashed (the node does not even ask for them). The link is written after every build or content hit.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace
from typing import Optional

import cv2
import numpy as np
import torch

from ..common import source_cache
from ..common.cache import ContentCache, content_hash
from ..common.errors import InputError
from ..common.frames import ByteFrames, frames_to_uint8
from ..common.images import RGB, check_image_batch
from ..common.progress import Progress, ensure
from .blend import CROP, MouthEllipse, mouth_mask
from .face_track import FaceTrack, sanitize_boxes

CACHE_NAMESPACE = "musetalk_avatar"
AVATAR_VERSION = 2   # 2: crops resized with Lanczos-4 as upstream (1: triangle filter)


@dataclass(frozen=True)
class CropSettings:
    """How a face box becomes MuseTalk's crop, in fractions of the face box height (top, bottom) and width (side).

    The defaults put the nose base near row 145, the lip seam near 180 and the chin near 235 of the 256 crop for a
    frontal-detector box, which is where MuseTalk v1.5's landmark crop puts them and where the mouth mask sits.
    """

    top: float = 0.08
    bottom: float = 0.22
    side: float = 0.0
    mouth: MouthEllipse = field(default_factory=MouthEllipse)


@dataclass(frozen=True)
class Avatar:
    """A precompiled avatar loop.

    Attributes:
        frames: ``[L, H, W, 3]`` the loop as uint8 (`engines.common.frames.ByteFrames`, which reads as a float
            IMAGE): the render copies bytes from it (the byte path, lipsync.py). Built from an IMAGE, the bytes are
            made once here (a quarter of the IMAGE's size; the IMAGE itself is not kept); on a hit by source, the
            cached frames, memory-mapped.
        boxes: ``[L, 4]`` int64 crop boxes ``(x1, y1, x2, y2)``.
        latents: ``[L, 8, 32, 32]`` float32: masked-crop latent then reference latent, scaled by the VAE factor.
        mask: ``[256, 256]`` float32 mouth blend mask in crop pixels.
        fps: the loop's frame rate (video time -> loop frame).
        key: its cache key; ``from_cache``: True when it was loaded rather than computed.
    """

    frames: "torch.Tensor | ByteFrames"
    boxes: torch.Tensor
    latents: torch.Tensor
    mask: torch.Tensor
    fps: float
    key: str
    from_cache: bool = False

    def __len__(self) -> int:
        return int(self.boxes.shape[0])


def crop_boxes(track: FaceTrack, settings: CropSettings) -> torch.Tensor:
    """Integer crop boxes ``[L, 4]`` inside the frame, from the face track."""
    b = track.boxes.to(torch.float64).numpy()
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    grown = np.stack([b[:, 0] - settings.side * w, b[:, 1] - settings.top * h,
                      b[:, 2] + settings.side * w, b[:, 3] + settings.bottom * h], axis=1)
    grown = sanitize_boxes(grown, track.width, track.height).astype(np.float64)
    out = np.round(grown).astype(np.int64)
    out[:, 2] = np.maximum(out[:, 2], out[:, 0] + 1)
    out[:, 3] = np.maximum(out[:, 3], out[:, 1] + 1)
    return torch.from_numpy(out)


@torch.no_grad()
def lanczos_crop(frame: torch.Tensor, box, size: int = CROP) -> torch.Tensor:
    """Crop ``[H, W, 3]`` (0..1) to `box` and resize to ``[3, size, size]`` (0..1) the way upstream makes the crop it
    encodes: the 8-bit crop through ``cv2.INTER_LANCZOS4``, rounded back to 8 bits (upstream's
    scripts/realtime_inference.py, `Avatar.prepare_material`). Lanczos keeps the lips' and teeth's edges that the
    reference latent carries; a triangle filter softens them (see docs/musetalk.md)."""
    x1, y1, x2, y2 = (int(v) for v in box)
    patch = frame[y1:y2, x1:x2].detach().to("cpu", torch.float32)
    patch = (patch * 255.0).round().clamp(0, 255).to(torch.uint8).numpy()
    resized = cv2.resize(patch, (size, size), interpolation=cv2.INTER_LANCZOS4)
    return torch.from_numpy(resized).permute(2, 0, 1).to(torch.float32) / 255.0


def encode_crops(vae, crops: torch.Tensor, scaling_factor: float) -> torch.Tensor:
    """``[B, 3, 256, 256]`` crops in 0..1 -> ``[B, 8, 32, 32]`` (lower-half-blanked latent, reference latent)."""
    masked = crops.clone()
    masked[:, :, CROP // 2:] = 0.0
    pixels = torch.cat([masked, crops], dim=0) * 2.0 - 1.0
    dist = vae.encode(pixels.to(vae.dtype)).latent_dist
    lat = dist.mode() * scaling_factor
    b = crops.shape[0]
    return torch.cat([lat[:b], lat[b:]], dim=1).float()


def crops_digest(frames: torch.Tensor, boxes: torch.Tensor) -> str:
    """A digest of the pixels inside each crop box: all the stored latents depend on (the whole frames are not
    stored, and hashing only the crops reads a small part of a full-HD loop)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{frames.dtype}:{tuple(frames.shape)};".encode())
    for frame, (x1, y1, x2, y2) in zip(frames, boxes.tolist()):
        crop = np.ascontiguousarray(frame[y1:y2, x1:x2].detach().cpu().numpy())
        h.update(crop.data)
    return h.hexdigest()


def avatar_key(frames: torch.Tensor, boxes: torch.Tensor, settings: CropSettings, vae_id: str, dtype) -> str:
    return content_hash("musetalk-avatar", AVATAR_VERSION, crops_digest(frames, boxes), boxes, asdict(settings),
                        vae_id, str(dtype))


def source_key(signature, settings: CropSettings, vae_id: str, dtype) -> Optional[str]:
    """The link key of an avatar made from what `signature` describes (the graph feeding the node's images, face
    track and fps; `engines.common.prompt_graph.source_signature`), or None when the source is not known."""
    if signature is None:
        return None
    return source_cache.link_key("musetalk-avatar", signature, AVATAR_VERSION, asdict(settings), vae_id, str(dtype))


def load_from_source(cache: Optional[ContentCache], key: Optional[str]) -> Optional[Avatar]:
    """The avatar linked under `key`, memory-mapped (frames included), or None: nothing is decoded or hashed."""
    found = source_cache.resolve(cache, CACHE_NAMESPACE, key, AVATAR_VERSION)
    if found is None:
        return None
    link, entry = found
    frames = link.tensors.get("frames")
    if frames is None or frames.dtype != torch.uint8 or int(frames.shape[0]) != int(entry.tensors["boxes"].shape[0]):
        return None
    return Avatar(ByteFrames(frames), entry.tensors["boxes"], entry.tensors["latents"], entry.tensors["mask"],
                  float(link.meta["fps"]), link.meta["target"], True)


def build_avatar(nets, frames: Optional[torch.Tensor], track: Optional[FaceTrack], fps: Optional[float],
                 settings: CropSettings = CropSettings(), device: Optional[torch.device] = None,
                 cache: Optional[ContentCache] = None, batch_size: int = 8, progress: Optional[Progress] = None,
                 source_key: Optional[str] = None) -> Avatar:
    """Precompile (or load from `cache`) the avatar of loop `frames` ``[L, H, W, 3]``.

    `source_key` (from `source_key()`): look the avatar up by its source first; then `frames`, `track` and `fps`
    may be None (not evaluated) and are needed only on a miss. After a build or a content hit the link is written.
    """
    if source_key is not None:
        hit = load_from_source(cache, source_key)
        if hit is not None:
            return hit
    if frames is None or track is None or fps is None:
        raise InputError("images", "the loop's frames and face track (its cached avatar is missing or unreadable)",
                         "nothing", "Queue the workflow again: the loop will be decoded this time.")
    avatar = _build(nets, frames, track, float(fps), settings, device, cache, batch_size, progress)
    loop = frames_to_uint8(frames)
    if source_key is not None and cache is not None and avatar.key is not None:
        n, h, w = int(frames.shape[0]), int(frames.shape[1]), int(frames.shape[2])
        source_cache.store_link(cache, CACHE_NAMESPACE, source_key, AVATAR_VERSION, avatar.key,
                                {"frames": n, "width": w, "height": h}, {"frames": loop}, {"fps": float(fps)})
    return replace(avatar, frames=ByteFrames(loop))


def _build(nets, frames: torch.Tensor, track: FaceTrack, fps: float, settings: CropSettings,
           device: Optional[torch.device], cache: Optional[ContentCache], batch_size: int,
           progress: Optional[Progress]) -> Avatar:
    progress = ensure(progress)
    frames = check_image_batch(frames, "images", channels=RGB)
    device = torch.device(device) if device is not None else next(nets.vae.parameters()).device  # follow weights
    n, h, w = int(frames.shape[0]), int(frames.shape[1]), int(frames.shape[2])
    if len(track) != n or (track.width, track.height) != (w, h):
        raise InputError("face_track", f"the track of these {n} frames of {w}x{h}",
                         f"a track of {len(track)} frames of {track.width}x{track.height}",
                         "Track the same frames that go into the avatar.")
    if not fps > 0:
        raise InputError("fps", "a positive frame rate", repr(fps))
    boxes = crop_boxes(track, settings)
    mask = mouth_mask(settings.mouth)
    key = avatar_key(frames, boxes, settings, nets.vae_id, nets.compute_dtype)
    if cache is not None:
        entry = cache.load(CACHE_NAMESPACE, key, AVATAR_VERSION)
        if entry is not None:
            return Avatar(frames, entry.tensors["boxes"], entry.tensors["latents"], entry.tensors["mask"],
                          float(fps), key, True)
    progress.reset(n)
    latents = None
    for start in range(0, n, batch_size):
        idx = range(start, min(n, start + batch_size))
        crops = torch.stack([lanczos_crop(frames[i], boxes[i].tolist()) for i in idx]).to(device)
        lat = encode_crops(nets.vae, crops, nets.scaling_factor).cpu()
        if latents is None:
            latents = torch.empty((n, *lat.shape[1:]), dtype=torch.float32)
        latents[start:start + len(idx)] = lat
        progress.step(len(idx))
    if cache is None:
        return Avatar(frames, boxes, latents, mask, float(fps), key, False)
    entry = cache.store(CACHE_NAMESPACE, key, AVATAR_VERSION, {"boxes": boxes, "latents": latents, "mask": mask},
                        {"frames": n, "width": w, "height": h, "settings": asdict(settings)})
    return Avatar(frames, entry.tensors["boxes"], entry.tensors["latents"], entry.tensors["mask"], float(fps), key,
                  False)
