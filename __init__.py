"""Broadcast Avatar: talking-head news broadcasts in ComfyUI.

Registration only. Each family is imported behind its own guard: a missing optional package disables that family
with one log line naming the package, and every other family still loads.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging

WEB_DIRECTORY = "./web"

log = logging.getLogger("broadcast_avatar")

# family -> (module under nodes/, [(import name, pip requirement)] it cannot work without)
FAMILIES = {
    "export": ("export", [("av", "av")]),
    "wardrobe": ("wardrobe", [("scipy", "scipy")]),
    "wardrobe_vace": ("wardrobe_vace", []),
    "tts_text_audio": ("tts_text_audio", [("scipy", "scipy"), ("pyloudnorm", "pyloudnorm")]),
    "omnivoice": ("omnivoice", [("omnivoice", "omnivoice"), ("transformers", "transformers"),
                                ("accelerate", "accelerate"), ("scipy", "scipy")]),
    "musetalk": ("musetalk", [("diffusers", "diffusers"), ("transformers", "transformers"),
                              ("cv2", "opencv-python-headless<5")]),
    "sam3": ("sam3", [("transformers", "transformers>=5"), ("torchvision", "torchvision")]),
    "ditto": ("ditto", [("onnxruntime", "onnxruntime"), ("cv2", "opencv-python-headless<5")]),
    "qc": ("qc", [("av", "av"), ("scipy", "scipy"), ("pyloudnorm", "pyloudnorm"), ("PIL", "pillow")]),
}


def _missing(requirements):
    return [pip for mod, pip in requirements if importlib.util.find_spec(mod) is None]


def _load_families():
    nodes = []
    for family, (module, requirements) in FAMILIES.items():
        missing = _missing(requirements)
        if missing:
            log.warning("Broadcast Avatar: %s nodes disabled: missing package %s (pip install %s)",
                        family, ", ".join(repr(m) for m in missing), " ".join(f"'{m}'" for m in missing))
            continue
        try:
            mod = importlib.import_module(f".nodes.{module}", __name__)
            # ComfyUI builds every schema after this list is returned, and one that raises drops every node after
            # it; building them here keeps a broken family from taking the others down.
            # (GET_SCHEMA also validates the schema; fall back to define_schema should a newer core rename it.)
            for node_cls in mod.NODES:
                (getattr(node_cls, "GET_SCHEMA", None) or node_cls.define_schema)()
        except Exception as exc:
            log.warning("Broadcast Avatar: %s nodes disabled: %s: %s", family, type(exc).__name__, exc,
                        exc_info=not isinstance(exc, ImportError))
            continue
        nodes.extend(mod.NODES)
    return nodes


async def comfy_entrypoint():
    from comfy_api.latest import ComfyExtension

    from .nodes.comfy_bridge import register_folders

    register_folders()

    class BroadcastAvatarExtension(ComfyExtension):
        async def get_node_list(self):
            return _load_families()

    return BroadcastAvatarExtension()
