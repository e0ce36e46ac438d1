"""The pack's runtimes. Nothing here imports ComfyUI's node system, so every engine is testable on its own."""
