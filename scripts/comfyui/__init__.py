"""Talking to a ComfyUI server: client (its HTTP API), server (a client that also owns the process),
ws (the websocket watcher that wakes a client when a prompt ends). Named `comfyui`, not `comfy` or `server`, so that it
never shadows ComfyUI's own top-level `comfy` package or `server` module when `scripts/` is on sys.path.
"""
