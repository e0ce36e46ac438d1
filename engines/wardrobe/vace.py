"""The sampler-side mask for Wan 2.1 VACE: pixel masks -> the token grid VACE samples on.

Why this exists: core's `WanVaceToVideo` (ComfyUI 0.3.75) turns a pixel mask sequence into its `vace_mask` by
reading ONE pixel frame per latent frame (nearest-exact over time: latent frame t reads pixel frame
floor((t + 0.5) * length / T)), while the Wan VAE builds latent frame t from a GROUP of pixel frames (frame 0 alone,
then 1-4, 5-8, ...). A garment region that a moving hand uncovers in only one frame of a group is then missing from
the mask of that latent frame and is never regenerated. Spatially, one token of the Wan DiT covers 16 x 16 pixels
(VAE stride 8 x patch 2), so a mask that half-covers a token asks the sampler for something it cannot do.

The pack's VACE mask is therefore, for every latent frame, the union over its group of pixel frames, snapped to
whole 16 x 16 tokens (a token is regenerated when any pixel of its block is > 0 in any frame of the group). The
union and snapping are the family's one implementation (`tokengrid`); this module adds what is VACE's own: where
core reads, how `vace_mask` is laid out, and the reference-image slot.

Layouts (all tensors float32, 1 = regenerate, 0 = keep):
- pixel mask sequence: [N, H, W] (ComfyUI MASK), H and W multiples of 16;
- unions: [T, H/8, W/8], one per latent frame and latent cell, equal over each token's 2 x 2 cells (`token_unions`);
- `vace_mask` as core stores it in the conditioning: [1, 64, R + T, H/8, W/8], a space-to-depth of the pixel mask
  (channel dy * 8 + dx holds pixel (8y + dy, 8x + dx)), R leading reference-image slots left at 0 as core does;
- LATENT noise mask: [1, 1, R + T, H/8, W/8], one value per latent cell (`noise_mask`).

Everything here is pure (no ComfyUI import) and never modifies its inputs.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..common.errors import InputError
from ..common.progress import Progress
from .tokengrid import PRESETS, snap_to_grid

VAE_STRIDE = 8          # Wan 2.1 VAE: pixels per latent cell, each side
PATCH = 2               # Wan DiT patch (1, 2, 2): latent cells per token, each side
TOKEN_PX = VAE_STRIDE * PATCH
TIME_STRIDE = 4         # Wan VAE temporal compression after the first frame


def latent_frame_count(n_frames: int) -> int:
    """Latent frames the Wan VAE makes of `n_frames` pixel frames: 1 + (n - 1) // 4 (core's formula)."""
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    return (n_frames - 1) // TIME_STRIDE + 1


def decoded_frame_count(latent_frames: int) -> int:
    """Pixel frames the Wan VAE decodes from `latent_frames`: 1 + 4 * (T - 1)."""
    return 1 + TIME_STRIDE * (latent_frames - 1)


def padded_length(n_frames: int) -> int:
    """The smallest valid Wan length (4k + 1) that holds `n_frames`: what WanVaceToVideo's `length` should be."""
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    return 1 + TIME_STRIDE * -(-(n_frames - 1) // TIME_STRIDE)


def frame_group(t: int) -> range:
    """Pixel frames the VAE encodes into latent frame `t`: [0] for t = 0, else 4t-3 .. 4t (causal grouping)."""
    if t < 0:
        raise ValueError(f"latent frame index must be >= 0, got {t}")
    return range(0, 1) if t == 0 else range(TIME_STRIDE * t - 3, TIME_STRIDE * t + 1)


def nearest_read_frame(t: int, length: int, latent_frames: int) -> int:
    """The pixel frame core's WanVaceToVideo reads for latent frame `t` (torch 'nearest-exact' over time)."""
    return min(int((t + 0.5) * length / latent_frames), length - 1)


def _check_mask(mask: torch.Tensor, input_name: str) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dim() != 3:
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise InputError(input_name, "a MASK batch [frames, height, width]", str(shape))
    n, h, w = mask.shape
    if n < 1:
        raise InputError(input_name, "at least 1 mask frame", "0 frames")
    if h % TOKEN_PX or w % TOKEN_PX:
        raise InputError(input_name, f"a width and height that are multiples of {TOKEN_PX} (one Wan token)",
                         f"{w}x{h}", f"Set the subject crop's size multiple to {TOKEN_PX} (or a multiple of it).")


def token_unions(mask: torch.Tensor, latent_frames: Optional[int] = None, *, input_name: str = "mask",
                 progress: Optional[Progress] = None) -> torch.Tensor:
    """Per latent frame, the union of its group of pixel frames, snapped to whole 16 x 16 tokens.

    The snapping is the family's one implementation (`tokengrid.snap_to_grid`, grid "wan2.1", any pixel > 0).

    Args:
        mask: pixel mask sequence [N, H, W] (any float; > 0 counts as "regenerate"), H and W multiples of 16.
        latent_frames: T, the latent frames the sampler works on (without reference slots). Default: the count the
            VAE makes of N frames. A T up to one group larger means the video was padded past the mask
            (WanVaceToVideo with a `length` above N): the missing frames count as copies of the mask's last frame.
            Counts further apart are refused (`InputError`).
        progress: stepped once per latent frame (raises on cancel).

    Returns:
        float32 [T, H/8, W/8] of 0/1, one value per latent cell; the 2 x 2 cells of a token are always equal.
    """
    _check_mask(mask, input_name)
    n, h, w = mask.shape
    if latent_frames is None:
        latent_frames = latent_frame_count(n)
    if latent_frames < 1:
        raise ValueError(f"latent_frames must be >= 1, got {latent_frames}")
    return snap_to_grid(mask, PRESETS["wan2.1"], latent_frames, h // VAE_STRIDE, w // VAE_STRIDE,
                        coverage=0.0, pixel_threshold=0.0, progress=progress)


def cells_to_pixels(cells: torch.Tensor) -> torch.Tensor:
    """[..., h, w] latent-cell values -> [..., 8h, 8w] pixels (each cell fills its 8 x 8 block)."""
    return cells.repeat_interleave(VAE_STRIDE, dim=-2).repeat_interleave(VAE_STRIDE, dim=-1)


def nearest_read_layout(unions: torch.Tensor, length: int) -> torch.Tensor:
    """A pixel mask sequence that core's WanVaceToVideo reads back as exactly `unions`.

    Core reads one pixel frame per latent frame (`nearest_read_frame`); that frame gets its latent frame's union.
    Every other frame gets the union of its own VAE group, so the sequence also describes the regenerated area of
    the frame itself. Used to prove the pack's `vace_mask` equals what core would build from such a sequence; the
    pack never hands this token-grid sequence out as a MASK (a compositor could take it).

    Args:
        unions: [T, h, w] unions per latent cell (`token_unions`).
        length: the pixel length given to WanVaceToVideo; must make T latent frames.

    Returns:
        float32 [length, 8h, 8w].
    """
    t_count = unions.shape[0]
    if latent_frame_count(length) != t_count:
        raise ValueError(f"length {length} makes {latent_frame_count(length)} latent frames, unions hold {t_count}")
    owner = [min((f + TIME_STRIDE - 1) // TIME_STRIDE, t_count - 1) for f in range(length)]
    for t in range(t_count):
        owner[nearest_read_frame(t, length, t_count)] = t
    return cells_to_pixels(unions[owner].to(torch.float32))


def vace_mask(unions: torch.Tensor, reference_frames: int = 0) -> torch.Tensor:
    """The conditioning's `vace_mask` for token unions, laid out as core's WanVaceToVideo lays it out.

    Args:
        unions: [T, h, w] unions per latent cell (`token_unions`).
        reference_frames: R latent slots WanVaceToVideo put in front for a reference image (its `trim_latent`);
            their mask stays 0, as core leaves it.

    Returns:
        float32 [1, 64, R + T, h, w]: channel dy * 8 + dx of latent cell (y, x) is pixel (8y + dy, 8x + dx).
    """
    t_count, h, w = unions.shape
    # Every pixel of a latent cell lies in the same token, so all 64 channels of a cell hold the token's value.
    out = torch.zeros((1, VAE_STRIDE * VAE_STRIDE, reference_frames + t_count, h, w), dtype=torch.float32,
                      device=unions.device)
    out[0, :, reference_frames:] = unions.to(torch.float32).unsqueeze(0)
    return out


def noise_mask(unions: torch.Tensor, reference_frames: int = 0) -> torch.Tensor:
    """A LATENT `noise_mask` that follows the same mapping as `vace_mask`, one value per latent cell.

    The reference slots hold 1: the sampler treats them as VACE does without a noise mask (the slot is generated
    from the reference image and trimmed by TrimVideoLatent). A 0 there would pin it to the empty latent
    WanVaceToVideo returns, which is not the reference. Core's SetLatentNoiseMask instead stretches a pixel mask
    trilinearly over all R + T slots, shifting every frame by the reference slot.

    Returns:
        float32 [1, 1, R + T, h, w], exactly the latent's shape, so core's reshape is the identity.
    """
    t_count, h, w = unions.shape
    out = torch.ones((1, 1, reference_frames + t_count, h, w), dtype=torch.float32, device=unions.device)
    out[0, 0, reference_frames:] = unions.to(torch.float32)
    return out


def sampler_masks(vace_shape: tuple, latent_samples: Optional[torch.Tensor], trim_latent: int,
                  sampler_mask: torch.Tensor, set_noise_mask: bool = False,
                  progress: Optional[Progress] = None) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The Vace Sampler Mask's work: check that WanVaceToVideo's vace mask (its `vace_shape`), its latent, its
    `trim_latent` and the pixel `sampler_mask` ``[F, H, W]`` describe one clip, then build the token-snapped
    ``(vace_mask, noise_mask or None)`` for the latent frames after the reference slots.

    The frame counts must agree both ways: a latent too short would lose the clip's last frames, one too long would
    invent whole frame groups that are then trimmed away.
    """
    _, _, slots, h_lat, w_lat = vace_shape
    if latent_samples is None or latent_samples.dim() != 5 or tuple(latent_samples.shape[2:]) != (slots, h_lat,
                                                                                                   w_lat):
        raise InputError("latent", f"WanVaceToVideo's latent, [batch, 16, {slots}, {h_lat}, {w_lat}]",
                         str(list(latent_samples.shape)) if latent_samples is not None else "no samples")
    if trim_latent >= slots:
        raise InputError("trim_latent", f"fewer reference slots than the {slots} latent frames", str(trim_latent),
                         "Connect WanVaceToVideo's trim_latent output.")
    latent_frames = slots - trim_latent
    n, height, width = sampler_mask.shape
    if (height, width) != (h_lat * VAE_STRIDE, w_lat * VAE_STRIDE):
        raise InputError("sampler_mask", f"frames of WanVaceToVideo's size {w_lat * VAE_STRIDE}x"
                         f"{h_lat * VAE_STRIDE}", f"{width}x{height}",
                         "Connect Subject Crop's width and height outputs to WanVaceToVideo.")
    if decoded_frame_count(latent_frames) < n:
        raise InputError("sampler_mask", f"at most {decoded_frame_count(latent_frames)} frames (WanVaceToVideo"
                         f"'s length makes {latent_frames} latent frames, which decode to that many)",
                         f"{n} frames", f"Set WanVaceToVideo's length to {padded_length(n)} (the frame count "
                         "rounded up to 4k+1); Image From Batch trims the padding after decoding.")
    if padded_length(n) < decoded_frame_count(latent_frames):
        raise InputError("sampler_mask", f"about {decoded_frame_count(latent_frames)} frames (WanVaceToVideo"
                         f"'s length makes {latent_frames} latent frames)", f"{n} frames",
                         f"Set WanVaceToVideo's length to {padded_length(n)}.")
    if progress is not None:
        progress.reset(latent_frames)
    unions = token_unions(sampler_mask, latent_frames, input_name="sampler_mask", progress=progress)
    return vace_mask(unions, trim_latent), (noise_mask(unions, trim_latent) if set_noise_mask else None)
