"""Wardrobe swap: the decoupled mask chain around a video diffusion inpainter.

Two kinds of mask, never mixed (see docs/wardrobe.md):
- pixel masks (``[F, H, W]`` float in 0..1, pixel-accurate) are the only masks the compositors (uncrop, re-paste)
  accept;
- the token-grid mask exists only inside a LATENT's noise mask and in preview images (`tokengrid`).

Modules by stage: `checks` (shape rules shared by every stage), `morphology` (shield, refine, grow, combine),
`crop` (subject crop / uncrop and the crop record), `tokengrid` (latent inpaint mask), `repaste` (protected layer),
`maskcache` (lossless mask sequence cache), `overlay` (the mask-check preview), `lint` (workflow checker).
"""
