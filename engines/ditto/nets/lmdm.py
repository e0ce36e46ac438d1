"""The LMDM motion denoiser (``MotionDecoder`` upstream): predicts the clean motion window x0 from a noisy one.

Inputs: x (B, L, 265) noisy motion; cond_frame (B, 265) the motion the window starts from; cond (B, L, 1103)
per-frame condition (HuBERT 1024 | emotion 8 | eye open 2 | eye ball 6 | source keypoints 63); times (B,) int64.
Output: x0 (B, L, 265). L is the window length (80), tied to ``null_cond_embed``.

Structure (keys in brackets): input projection of cat(x, cond_frame) [input_projection]; condition tokens
[cond_projection] through two pre-norm encoder layers [cond_encoder.{0,1}]; a sinusoidal timestep embedding
[time_mlp.1] giving a FiLM vector [to_time_cond.0] plus two extra memory tokens [to_time_tokens.0]; pooled condition
[non_attn_cond_projection] added to the FiLM vector; memory normalised [norm_cond]; eight FiLM decoder layers
[seqTransDecoder.stack.N] and a final projection [final_layer]. Rotary position encoding over the full latent width
(interleaved pairs) on queries and keys; one instance is shared, so its ``freqs`` buffer appears under every layer.
Classifier-free guidance swaps in [null_cond_embed] and [null_cond_hidden] for the unconditional branch.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim: int, theta: float = 10000.0):
        super().__init__()
        self.register_buffer("freqs", 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, x):
        """Rotate consecutive feature pairs of (B, L, D) by position-dependent angles."""
        b, n, d = x.shape
        pos = torch.arange(n, device=x.device, dtype=self.freqs.dtype)
        half = pos[:, None] * self.freqs[None]
        # each angle twice in a row (repeat_interleave), written with explicit dims and sizes: the legacy ONNX
        # exporter mistranslates repeat_interleave / unflatten on negative dims (wrong values, or a batch-1 reshape)
        ang = torch.stack((half, half), dim=2).reshape(n, d).to(x.dtype)
        pairs = x.reshape(b, n, d // 2, 2)
        rotated = torch.stack((-pairs[:, :, :, 1], pairs[:, :, :, 0]), dim=3).reshape(b, n, d)
        return x * ang.cos() + rotated * ang.sin()


class EncoderLayer(nn.Module):
    """Pre-norm self-attention + feed-forward (GELU)."""

    def __init__(self, dim: int, heads: int, ff: int, rotary: Rotary):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.linear1 = nn.Linear(dim, ff)
        self.linear2 = nn.Linear(ff, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.rotary = rotary

    def forward(self, x):
        h = self.norm1(x)
        qk = self.rotary(h)
        x = x + self.self_attn(qk, qk, h, need_weights=False)[0]
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


class FiLM(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.block = nn.Sequential(nn.Mish(), nn.Linear(dim, dim * 2))

    def forward(self, t):
        scale, shift = self.block(t)[:, None].chunk(2, dim=-1)
        return scale, shift


class FiLMDecoderLayer(nn.Module):
    """Pre-norm self-attention, cross-attention and feed-forward, each output modulated by FiLM(t)."""

    def __init__(self, dim: int, heads: int, ff: int, rotary: Rotary):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.linear1 = nn.Linear(dim, ff)
        self.linear2 = nn.Linear(ff, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.norm3 = nn.LayerNorm(dim)
        self.film1 = FiLM(dim)
        self.film2 = FiLM(dim)
        self.film3 = FiLM(dim)
        self.rotary = rotary

    @staticmethod
    def _modulate(y, film):
        scale, shift = film
        return (scale + 1) * y + shift

    def forward(self, x, memory, t):
        h = self.norm1(x)
        qk = self.rotary(h)
        x = x + self._modulate(self.self_attn(qk, qk, h, need_weights=False)[0], self.film1(t))
        h = self.norm2(x)
        y = self.multihead_attn(self.rotary(h), self.rotary(memory), memory, need_weights=False)[0]
        x = x + self._modulate(y, self.film2(t))
        y = self.linear2(F.gelu(self.linear1(self.norm3(x))))
        return x + self._modulate(y, self.film3(t))


class _Stack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.stack = nn.ModuleList(layers)


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freq = torch.exp(torch.arange(half, device=t.device, dtype=torch.float32) * (-math.log(10000) / (half - 1)))
    arg = t.float()[:, None] * freq[None]
    return torch.cat([arg.sin(), arg.cos()], dim=-1)


class MotionDecoder(nn.Module):
    def __init__(self, nfeats: int = 265, seq_len: int = 80, latent_dim: int = 512, ff_size: int = 1024,
                 num_layers: int = 8, num_heads: int = 8, cond_feature_dim: int = 1103):
        super().__init__()
        d = latent_dim
        self.latent_dim = d
        self.seq_len = seq_len
        self.rotary = Rotary(d)
        self.time_mlp = nn.Sequential(nn.Identity(), nn.Linear(d, d * 4), nn.Mish())
        self.to_time_cond = nn.Sequential(nn.Linear(d * 4, d))
        self.to_time_tokens = nn.Sequential(nn.Linear(d * 4, d * 2))
        self.null_cond_embed = nn.Parameter(torch.randn(1, seq_len, d))
        self.null_cond_hidden = nn.Parameter(torch.randn(1, d))
        self.norm_cond = nn.LayerNorm(d)
        self.input_projection = nn.Linear(nfeats * 2, d)
        self.cond_encoder = nn.Sequential(*[EncoderLayer(d, num_heads, ff_size, self.rotary) for _ in range(2)])
        self.cond_projection = nn.Linear(cond_feature_dim, d)
        self.non_attn_cond_projection = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        self.seqTransDecoder = _Stack([FiLMDecoderLayer(d, num_heads, ff_size, self.rotary)
                                       for _ in range(num_layers)])
        self.final_layer = nn.Linear(d, nfeats)

    def _memory_and_film(self, cond, times, use_cond: bool):
        b = cond.shape[0]
        t_hidden = self.time_mlp(timestep_embedding(times, self.latent_dim).to(cond.dtype))
        film = self.to_time_cond(t_hidden)
        t_tokens = self.to_time_tokens(t_hidden).view(b, 2, self.latent_dim)
        if use_cond:
            tokens = self.cond_projection(cond)
            for layer in self.cond_encoder:
                tokens = layer(tokens)
            hidden = self.non_attn_cond_projection(tokens.mean(dim=-2))
        else:
            tokens = self.null_cond_embed.to(cond.dtype).expand(b, -1, -1)
            hidden = self.null_cond_hidden.to(cond.dtype).expand(b, -1)
        return self.norm_cond(torch.cat([tokens, t_tokens], dim=-2)), film + hidden

    def forward(self, x, cond_frame, cond, times, use_cond: bool = True):
        h = self.input_projection(torch.cat([x, cond_frame[:, None].expand(-1, x.shape[1], -1)], dim=-1))
        memory, film = self._memory_and_film(cond, times, use_cond)
        for layer in self.seqTransDecoder.stack:
            h = layer(h, memory, film)
        return self.final_layer(h)

    def guided(self, x, cond_frame, cond, times, guidance_weight: float = 2.0):
        """Classifier-free guidance: unc + w * (cond - unc), both branches run as one batch."""
        b = x.shape[0]
        h = self.input_projection(torch.cat([x, cond_frame[:, None].expand(-1, x.shape[1], -1)], dim=-1))
        mem_c, film_c = self._memory_and_film(cond, times, True)
        mem_u, film_u = self._memory_and_film(cond, times, False)
        h = torch.cat([h, h], 0)
        memory = torch.cat([mem_c, mem_u], 0)
        film = torch.cat([film_c, film_u], 0)
        for layer in self.seqTransDecoder.stack:
            h = layer(h, memory, film)
        out = self.final_layer(h)
        cond_out, unc_out = out[:b], out[b:]
        return unc_out + (cond_out - unc_out) * guidance_weight
