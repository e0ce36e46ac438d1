"""Captions for the pack's broadcasts: timed from the TTS clauses, laid out by broadcast rules, written as SRT and
WebVTT sidecars, muxed as an MP4 soft track (mov_text) or burned into the frames, and checked.

`timing` (what the TTS engines hand over), `layout` (profiles and cue making), `srt` / `webvtt` (writers), `burn`
(drawing on uint8 frames), `check` (caption QC), `render` (the caption node's one engine call).
"""
