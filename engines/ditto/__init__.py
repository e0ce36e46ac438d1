"""Ditto talking head (Ant Group, Apache-2.0 code): HuBERT features -> LMDM motion diffusion -> LivePortrait-style
stitching, warping and SPADE decoding -> putback into the frame.

Stages: `loader` (upstream folder layout, strict loads), `audio_features`, `avatar` (registration + packet),
`motion` (+ `diffusion`, `keypoints`), `render` (+ `putback`, `cadence`); `pipeline.DittoPipeline` ties them together.
"""
