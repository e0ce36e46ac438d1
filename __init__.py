"""Broadcast Avatar: talking-head news broadcasts in ComfyUI.

Registration only. Each family is imported behind its own guard: a missing optional package disables that family
with one log line naming the package, and every other family still loads.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import re
import sys
from importlib import metadata

WEB_DIRECTORY = "./web"

log = logging.getLogger("broadcast_avatar")

# family -> (module under nodes/, [(import name, pip requirement)] it cannot work without). A version range in the
# requirement is checked too (SAM3 drives transformers internals; see engines/sam3/hf_video.py). The ranges are what
# the tests ran on: transformers 4.57 (MuseTalk), 5.3 (OmniVoice) and 5.5 (SAM3) up to the suite's own
# (scripts/check_transformers_range.sh runs each family's tests at its floor).
FAMILIES = {
    "export": ("export", [("av", "av")]),
    "wardrobe": ("wardrobe", [("scipy", "scipy")]),
    "wardrobe_vace": ("wardrobe_vace", []),
    "tts_text_audio": ("tts_text_audio", [("scipy", "scipy"), ("pyloudnorm", "pyloudnorm")]),
    "omnivoice": ("omnivoice", [("omnivoice", "omnivoice==0.2.1"), ("transformers", "transformers>=5.3"),
                                ("accelerate", "accelerate"), ("scipy", "scipy")]),
    "musetalk": ("musetalk", [("diffusers", "diffusers>=0.35"), ("transformers", "transformers>=4.57"),
                              ("cv2", "opencv-python-headless<5")]),
    "sam3": ("sam3", [("transformers", "transformers>=5.5,<6"), ("torchvision", "torchvision")]),
    "ditto": ("ditto", [("onnxruntime", "onnxruntime"), ("cv2", "opencv-python-headless<5")]),
    "qc": ("qc", [("av", "av"), ("scipy", "scipy"), ("pyloudnorm", "pyloudnorm"), ("PIL", "pillow")]),
    "captions": ("captions", [("av", "av"), ("PIL", "pillow")]),
}


_NAME_END = re.compile(r"[<>=!~;\[ ]")


def _dist_name(requirement: str) -> str:
    return _NAME_END.split(requirement, 1)[0]


def _unmet(requirements) -> list[tuple[str, str | None]]:
    """``(requirement, version found or None)`` for each requirement this Python does not meet."""
    unmet = []
    for module, requirement in requirements:
        if importlib.util.find_spec(module) is None:
            unmet.append((requirement, None))
            continue
        try:
            from packaging.requirements import Requirement

            req = Requirement(requirement)
            found = metadata.version(req.name)
        except (ImportError, metadata.PackageNotFoundError):
            continue  # no `packaging`, or the module comes from another distribution (opencv-python): trust it
        if req.specifier and not req.specifier.contains(found, prereleases=True):
            unmet.append((requirement, found))
    return unmet


def install_command(requirements) -> str:
    """The command that installs `requirements` into the Python running ComfyUI. Double quotes work in bash,
    cmd.exe and PowerShell alike (single quotes do not in cmd.exe)."""
    def names(reqs):
        return " ".join(f'"{r}"' for r in reqs)

    from .install import NO_DEPS  # installed without their dependencies (their own pull a UI stack)

    no_deps_names = {dist for dist, _ in NO_DEPS}
    python = f'"{sys.executable}" -m pip install'
    plain = [r for r in requirements if _dist_name(r) not in no_deps_names]
    no_deps = [r for r in requirements if r not in plain]
    commands = [f"{python} {names(plain)}"] if plain else []
    if no_deps:
        commands.append(f"{python} --no-deps {names(no_deps)}")
    return " && ".join(commands)


def _load_families():
    nodes = []
    for family, (module, requirements) in FAMILIES.items():
        unmet = _unmet(requirements)
        if unmet:
            needs = ", ".join(f"{req} (found {found})" if found else f"{req} (not installed)" for req, found in unmet)
            log.warning("Broadcast Avatar: %s nodes disabled: needs %s. Install with: %s", family, needs,
                        install_command([req for req, _ in unmet]))
            continue
        try:
            mod = importlib.import_module(f".nodes.{module}", __name__)
            # ComfyUI builds every schema after this list is returned, and one that raises drops every node after
            # it; building them here keeps a broken family from taking the others down.
            # (GET_SCHEMA also validates the schema; fall back to define_schema should a newer core rename it.)
            from .nodes.comfy_bridge import refuse_non_finite

            for node_cls in mod.NODES:
                (getattr(node_cls, "GET_SCHEMA", None) or node_cls.define_schema)()
                refuse_non_finite(node_cls)
        except Exception as exc:
            log.warning("Broadcast Avatar: %s nodes disabled: %s: %s", family, type(exc).__name__, exc,
                        exc_info=not isinstance(exc, ImportError))
            continue
        nodes.extend(mod.NODES)
    return nodes


def _report_workflows_this_core_cannot_run():
    # Core's own nodes are registered before custom packs load, so their absence here means this core lacks them.
    try:
        import nodes as core_nodes

        from .nodes.core_workflows import report_missing_core_nodes

        report_missing_core_nodes(set(core_nodes.NODE_CLASS_MAPPINGS))
    except Exception as exc:  # advice only: never a reason for the pack not to load
        log.warning("Broadcast Avatar: could not check the workflows against this core: %s", exc)


async def comfy_entrypoint():
    from comfy_api.latest import ComfyExtension

    from .nodes.comfy_bridge import register_folders, register_routes, report_cache
    from .nodes.core_features import register_search_route
    from .nodes.core_workflows import register_route as register_template_route
    from .nodes.model_check import register as register_model_check

    register_folders()
    report_cache()
    register_routes()
    register_model_check()
    register_template_route()
    register_search_route()

    class BroadcastAvatarExtension(ComfyExtension):
        async def get_node_list(self):
            node_list = _load_families()
            _report_workflows_this_core_cannot_run()
            return node_list

    return BroadcastAvatarExtension()
