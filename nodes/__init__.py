"""ComfyUI-facing node classes, one module per family. Thin: schema, input checks, progress, type conversion."""
