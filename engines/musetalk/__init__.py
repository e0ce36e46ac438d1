"""MuseTalk v1.5 lip-sync: model loading, face tracking, avatar precompile, batched inference with keyframe cadence,
mouth-only paste-back. No ComfyUI imports; the nodes in ``nodes/musetalk.py`` call into these modules.

Modules by stage: ``loader`` (networks from the upstream layout), ``face_track`` (+ ``scrfd``) (per-frame boxes),
``avatar`` (cached crop latents), ``audio_features`` (Whisper windows per frame), ``cadence`` (keyframes + SLERP),
``blend`` (mouth mask, paste-back, loop indexing), ``lipsync`` (the pipeline).
"""
