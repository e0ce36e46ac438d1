"""Ditto's run configuration pickle (``ditto_cfg/*.pkl``), read without trusting it.

Upstream pickles a dict of builtins and numpy arrays: ``base_cfg`` (model file paths), ``audio2motion_cfg``
(dimensions of the motion model) and ``default_kwargs`` (the pipeline's setup arguments). A pickle can name any
importable callable, so `load_config` uses an unpickler that admits only plain builtin containers/scalars and the
three numpy globals an array needs (``dtype``, ``ndarray``, ``_reconstruct``); any other global is refused with an
error that names it, before anything runs.
"""
from __future__ import annotations

import io
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..common.errors import InputError

_SAFE_BUILTINS = {"dict", "list", "tuple", "set", "frozenset", "str", "bytes", "bytearray", "int", "float", "bool",
                  "complex", "slice", "range"}
try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct

_NUMPY_GLOBALS = {
    ("numpy", "dtype"): np.dtype,
    ("numpy", "ndarray"): np.ndarray,
    # numpy >= 2 pickles under numpy._core, older under numpy.core: both names mean the same function
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
}


class RefusedGlobal(pickle.UnpicklingError):
    def __init__(self, module: str, name: str):
        super().__init__(f"the pickle asks for '{module}.{name}', which the pack refuses to load")
        self.global_name = f"{module}.{name}"


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module == "builtins" and name in _SAFE_BUILTINS:
            import builtins

            return getattr(builtins, name)
        if (module, name) in _NUMPY_GLOBALS:
            return _NUMPY_GLOBALS[(module, name)]
        raise RefusedGlobal(module, name)


def restricted_loads(data: bytes) -> Any:
    """Unpickle builtins and numpy arrays only; raise `RefusedGlobal` naming any other global."""
    return _RestrictedUnpickler(io.BytesIO(data)).load()


# Upstream StreamSDK.setup defaults, used where the config does not give a value.
DEFAULT_KWARGS = {
    "crop_scale": 2.3, "crop_vx_ratio": 0.0, "crop_vy_ratio": -0.125, "crop_flag_do_rot": True,
    "smo_k_s": 13, "emo": 4, "eye_f0_mode": False, "overlap_v2": 10, "fix_kp_cond": 0, "fix_kp_cond_dim": None,
    "sampling_timesteps": 50, "v_min_max_for_clip": None, "smo_k_d": 3, "relative_d": True, "drive_eye": None,
    "delta_eye_arr": None, "delta_eye_open_n": -1, "flag_stitching": True, "overall_ctrl_info": None,
}
DEFAULT_A2M = {"motion_feat_dim": 265, "audio_feat_dim": 1103, "seq_frames": 80, "use_emo": True, "use_sc": True,
               "use_eye_open": True, "use_eye_ball": True, "w2f_type": "hubert"}


@dataclass(frozen=True)
class DittoConfig:
    """The parts of the config the pack uses. ``model_paths`` maps a base_cfg entry to its file's base name."""

    model_paths: Mapping[str, str] = field(default_factory=dict)
    audio2motion: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_A2M))
    defaults: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_KWARGS))


def load_config(path: Path, input_name: str = "model_name") -> DittoConfig:
    """Read and check a config pickle; every problem is an `InputError` naming the file."""
    try:
        raw = restricted_loads(Path(path).read_bytes())
    except RefusedGlobal as exc:
        raise InputError(input_name, "a Ditto config pickle holding only builtins and numpy arrays",
                         f"'{path}', which {exc}", "Use the config file from the Ditto release.") from None
    except Exception as exc:
        raise InputError(input_name, "a readable Ditto config pickle", f"'{path}' ({type(exc).__name__}: {exc})"
                         ) from None
    if not isinstance(raw, dict) or "base_cfg" not in raw or "audio2motion_cfg" not in raw:
        got = f"a {type(raw).__name__}" + (f" with keys {sorted(map(str, raw))}" if isinstance(raw, dict) else "")
        raise InputError(input_name, f"config '{Path(path).name}' to be a dict with 'base_cfg' and "
                         "'audio2motion_cfg'", got, "Use the v0.4_hubert_cfg_pytorch.pkl from the Ditto release.")
    paths = {}
    for key, sub in dict(raw["base_cfg"]).items():
        if isinstance(sub, dict):
            for field_name in ("model_path", "task_path"):
                if isinstance(sub.get(field_name), str) and sub[field_name]:
                    paths[key if field_name == "model_path" else f"{key}.{field_name}"] = (
                        sub[field_name].replace("\\", "/").rsplit("/", 1)[-1])
    a2m = dict(DEFAULT_A2M)
    a2m.update({k: v for k, v in dict(raw["audio2motion_cfg"]).items() if k in DEFAULT_A2M})
    for key in ("motion_feat_dim", "audio_feat_dim", "seq_frames"):
        if not isinstance(a2m[key], (int, np.integer)) or int(a2m[key]) <= 0:
            raise InputError(input_name, f"audio2motion_cfg.{key} to be a positive integer in '{Path(path).name}'",
                             repr(a2m[key]))
        a2m[key] = int(a2m[key])
    if a2m["motion_feat_dim"] != 265:
        raise InputError(input_name, "a motion dimension of 265 (scale, pitch/yaw/roll bins, t, exp)",
                         f"{a2m['motion_feat_dim']} in '{Path(path).name}'")
    defaults = dict(DEFAULT_KWARGS)
    defaults.update(dict(raw.get("default_kwargs") or {}))
    return DittoConfig(model_paths=paths, audio2motion=a2m, defaults=defaults)
