"""The sampler-side mask: a pixel mask snapped exactly to the token grid the video model samples on.

A video latent ``[B, C, T, h, w]`` is the VAE's ``stride``-times smaller picture; the diffusion transformer then
groups ``patch x patch`` latent cells into one token, so one token covers a block of ``stride * patch`` pixels
(Wan 2.1: 8 x 2 = 16 px; MiniMax H3: 16 x 2 = 32 px; LTXV: 32 x 1 = 32 px). In time, latent frame k stands for a
group of pixel frames fixed by the VAE's temporal compression: Wan / Hunyuan / LTXV are causal (frame 0 alone, then
groups of 4 or 8); MiniMax H3 cycles (1, 4, 4, 4, 4) so 17k + 5 pixel frames give 5k + 2 latent frames.

A token is regenerated when any frame of its group covers more than ``coverage`` of its pixels (0 = any pixel), so
a garment uncovered by a moving hand for a single frame of a group is still regenerated.

The result lives at latent resolution as ``[1, 1, T, h, w]`` and goes into the LATENT's ``noise_mask``; core's
sampler resizes a mask to the latent's shape, which is the identity at exactly that shape, so the grid is kept
exactly. It is never handed out as a MASK: the pixel-accurate mask is the only one a compositor gets.

Frame counts that are not on the VAE's grid: frames past the last full group fold into the last latent frame (the
VAE dropped or absorbed them); a clip shorter than the latent covers (the workflow padded it) maps the padded latent
frames to the last real frame. Anything further off is refused with both counts named.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F

from ..common.errors import InputError
from ..common.progress import Progress, ensure
from .checks import chunks


@dataclass(frozen=True)
class TokenGrid:
    """How pixels map to one model's tokens.

    Args:
        name: preset name, for messages.
        spatial_stride: pixels per latent cell (the VAE's spatial compression).
        patch: latent cells per token side (the transformer's patch size).
        first: sizes of the leading pixel-frame groups (``(1,)``: the first frame is coded alone).
        cycle: sizes of the following groups, repeated (``(4,)`` for Wan; ``(1, 4, 4, 4, 4)`` for MiniMax H3).
    """

    name: str
    spatial_stride: int
    patch: int
    first: tuple = (1,)
    cycle: tuple = (4,)

    @property
    def block(self) -> int:
        """Pixels per token side."""
        return self.spatial_stride * self.patch

    @property
    def period(self) -> int:
        return int(sum(self.cycle))

    def group_size(self, k: int) -> int:
        if k < len(self.first):
            return int(self.first[k])
        return int(self.cycle[(k - len(self.first)) % len(self.cycle)])

    def starts(self, latent_frames: int) -> list:
        """First pixel frame of each of ``latent_frames + 1`` groups (the last entry is the nominal end)."""
        out = [0]
        for k in range(latent_frames):
            out.append(out[-1] + self.group_size(k))
        return out

    def latent_frames_for(self, pixel_frames: int) -> int:
        """Latent frames a floor-style VAE produces for ``pixel_frames`` (trailing partial group folded in)."""
        k, end = 0, 0
        while end + self.group_size(k) <= pixel_frames:
            end += self.group_size(k)
            k += 1
        return max(k, 1)

    def as_dict(self) -> dict:
        return {"name": self.name, "spatial_stride": self.spatial_stride, "patch": self.patch,
                "first": list(self.first), "cycle": list(self.cycle)}

    @staticmethod
    def from_dict(d: dict) -> "TokenGrid":
        return TokenGrid(str(d["name"]), int(d["spatial_stride"]), int(d["patch"]), tuple(d["first"]),
                         tuple(d["cycle"]))


PRESETS = {
    "wan2.1": TokenGrid("wan2.1", 8, 2, (1,), (4,)),
    "wan2.2-5b": TokenGrid("wan2.2-5b", 16, 2, (1,), (4,)),
    "hunyuan-video": TokenGrid("hunyuan-video", 8, 2, (1,), (4,)),
    "ltxv": TokenGrid("ltxv", 32, 1, (1,), (8,)),
    "minimax-h3": TokenGrid("minimax-h3", 16, 2, (), (1, 4, 4, 4, 4)),
}


def grid_from_vae(downscale_ratio, patch: int, name: str = "auto") -> TokenGrid:
    """Build a grid from a ComfyUI VAE's ``downscale_ratio`` (an int for image VAEs, or ``(f(frames), sy, sx)``).

    The temporal function is probed: the stride is the smallest n with f(1 + n) == 2 (frame 0 is coded alone).
    """
    if isinstance(downscale_ratio, (int, float)):
        return TokenGrid(name, int(downscale_ratio), int(patch), (), (1,))
    ratio_t, sy, sx = downscale_ratio
    if int(sy) != int(sx):
        raise InputError("vae", "a VAE with the same spatial compression in both axes", f"{sy} x {sx}")
    if callable(ratio_t):
        stride = next((n for n in range(1, 65) if int(ratio_t(1 + n)) == 2), None)
        if stride is None or int(ratio_t(1)) != 1:
            raise InputError("vae", "a causal video VAE (frame 0 alone, then fixed groups)",
                             "a temporal compression this node cannot read", "Pick the model's preset in 'grid'.")
        return TokenGrid(name, int(sy), int(patch), (1,), (stride,))
    stride = int(ratio_t)
    return TokenGrid(name, int(sy), int(patch), (), (stride,))


def frame_groups(grid: TokenGrid, latent_frames: int, pixel_frames: int) -> list:
    """Pixel-frame ranges ``(start, stop)`` for each latent frame, for a clip of ``pixel_frames``.

    Raises `InputError` when the two counts do not belong together.
    """
    T, Fn = int(latent_frames), int(pixel_frames)
    starts = grid.starts(T)
    covered = starts[-1]
    if T < 1 or Fn < 1:
        raise InputError("mask", "at least one frame and a latent of at least one frame", f"{Fn} / {T}")
    # Longer clip: fewer extra frames than the next group would need (the VAE folded or dropped them).
    # Shorter clip: less than one period short (the workflow padded it to the model's frame grid).
    fits = (Fn - covered < grid.group_size(T)) if Fn > covered else (covered - Fn < max(grid.period, 1))
    if not fits:
        raise InputError("mask", f"a mask sequence of about {covered} frames for a latent of {T} frames "
                         f"({grid.name} groups)", f"{Fn} frames",
                         "Use the frame count the latent was made for (the same images, the same length).")
    groups = []
    for k in range(T):
        a, b = starts[k], starts[k + 1]
        if k == T - 1:
            b = max(b, Fn)  # frames past the last group fold into it
        a, b = min(a, Fn - 1), min(b, Fn)  # padded latent frames read the last real frame
        groups.append((a, max(b, a + 1)))
    return groups


def pixel_frame_to_latent(grid: TokenGrid, latent_frames: int, pixel_frames: int) -> torch.Tensor:
    """``[F]`` index of the latent frame each pixel frame belongs to."""
    idx = torch.zeros(pixel_frames, dtype=torch.long)
    for k, (a, b) in enumerate(frame_groups(grid, latent_frames, pixel_frames)):
        idx[a:b] = k
    return idx


def snap_to_grid(masks: torch.Tensor, grid: TokenGrid, latent_frames: int, latent_h: int, latent_w: int,
                 coverage: float = 0.0, pixel_threshold: float = 0.5,
                 progress: Optional[Progress] = None) -> torch.Tensor:
    """Pixel masks ``[F, H, W]`` -> the token-grid mask at latent resolution ``[T, h, w]`` (0/1 float).

    ``H`` and ``W`` must be exactly ``h * stride`` and ``w * stride``: a mask that does not line up with the latent
    is refused, never resized (resizing is where a silent shift would come from).
    """
    progress = ensure(progress)
    Fn, H, W = masks.shape
    s, p, B = grid.spatial_stride, grid.patch, grid.block
    if (H, W) != (latent_h * s, latent_w * s):
        raise InputError("mask", f"masks of {latent_w * s}x{latent_h * s} pixels (the latent is {latent_w}x{latent_h}"
                         f" cells of {s} px, grid '{grid.name}')", f"{W}x{H}",
                         f"Crop to a multiple of {B} px (Subject Crop's 'multiple') and encode those same frames.")
    groups = frame_groups(grid, latent_frames, Fn)
    th, tw = -(-latent_h // p), -(-latent_w // p)  # tokens; the model pads the last row/column of cells
    out = torch.zeros(latent_frames, latent_h, latent_w, dtype=torch.float32)
    # Real pixels per token (edge tokens hold fewer), so coverage is a fraction of what the token really shows.
    ones = torch.ones(1, 1, H, W)
    real = F.pad(ones, (0, tw * B - W, 0, th * B - H))
    real = F.avg_pool2d(real, B) * (B * B)
    progress.reset(latent_frames)
    for k, (a, b) in enumerate(groups):
        union = torch.zeros(H, W, dtype=torch.bool, device=masks.device)
        for c0, c1 in chunks(b - a, 16):
            union |= (masks[a + c0:a + c1] > pixel_threshold).any(dim=0)
        u = F.pad(union.float().cpu()[None, None], (0, tw * B - W, 0, th * B - H))
        count = F.avg_pool2d(u, B) * (B * B)
        active = (count > 0) & (count / real > float(coverage)) if coverage > 0 else count > 0
        cells = active[0, 0].repeat_interleave(p, 0).repeat_interleave(p, 1)[:latent_h, :latent_w]
        out[k] = cells.float()
        progress.step()
    return out


def grid_to_pixels(grid_mask: torch.Tensor, grid: TokenGrid, pixel_frames: int,
                   frames: Optional[Sequence[int]] = None) -> torch.Tensor:
    """The token-grid mask ``[T, h, w]`` drawn back at pixel resolution for pixel frames ``frames`` (all by default).

    For previews and checks only; the result is a picture of the sampler's mask, never a compositor mask.
    """
    T, h, w = grid_mask.shape
    idx = pixel_frame_to_latent(grid, T, pixel_frames)
    frames = range(pixel_frames) if frames is None else frames
    s = grid.spatial_stride
    sel = grid_mask[idx[list(frames)]]
    return sel.repeat_interleave(s, 1).repeat_interleave(s, 2)


def noise_mask_5d(grid_mask: torch.Tensor) -> torch.Tensor:
    """``[T, h, w]`` -> ``[1, 1, T, h, w]``: the shape core's sampler takes unchanged for a 5-D latent."""
    return grid_mask[None, None].contiguous()


def audio_mask(audio_shape: Sequence[int], regenerate: bool) -> torch.Tensor:
    """Noise mask for the audio part of an audio-video latent: zeros keep the soundtrack latent, ones regenerate."""
    shape = (1, 1) + tuple(int(d) for d in audio_shape[2:])
    return torch.ones(shape) if regenerate else torch.zeros(shape)


def preview(grid_mask: torch.Tensor, grid: TokenGrid, pixel_frames: int,
            images: Optional[torch.Tensor] = None) -> torch.Tensor:
    """One picture per latent frame ``[T, H, W, 3]``: regenerated tokens tinted blue, token borders drawn grey.

    The background is the first pixel frame of each group (dimmed), or black without ``images``.
    """
    T, h, w = grid_mask.shape
    s, B = grid.spatial_stride, grid.block
    H, W = h * s, w * s
    groups = frame_groups(grid, T, pixel_frames)
    out = torch.zeros(T, H, W, 3)
    ys = torch.arange(H)
    xs = torch.arange(W)
    lines = ((ys % B == 0)[:, None] | (xs % B == 0)[None, :])
    for k, (a, _) in enumerate(groups):
        bg = images[a, :, :, :3].float().cpu() * 0.6 if images is not None else torch.zeros(H, W, 3)
        m = grid_mask[k].repeat_interleave(s, 0).repeat_interleave(s, 1)[..., None]
        tint = torch.tensor([0.15, 0.35, 1.0])
        frame = bg * (1 - 0.55 * m) + tint * 0.55 * m
        frame[lines] = frame[lines] * 0.5 + 0.25
        out[k] = frame
    return out.clamp_(0, 1)


def latent_frames_of(shape: Sequence[int]) -> int:
    return int(shape[2]) if len(shape) == 5 else 1
