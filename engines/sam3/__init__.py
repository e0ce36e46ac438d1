"""SAM3 text-prompted video masking.

- `schedule`: which frames get a full detection (every Nth and the last), the rest are propagated from memory.
- `segmenter`: the small interface the loop drives (detect / propagate one frame), so a deterministic stand-in can
  replace the network in tests.
- `video_mask`: prompt parsing, input checks and the masking loop (union + one mask per prompt or per object).
- `hf_video`: loading a local Hugging Face SAM3 video folder through transformers, and the segmenter on top of it.
- `core_track`: turning ComfyUI core's SAM3 track data into the same masks.
"""
