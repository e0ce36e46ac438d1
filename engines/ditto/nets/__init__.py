"""The six Ditto networks as the pack's own modules.

Each module's attribute names reproduce the upstream checkpoint's state-dict keys exactly, so the released ``.pth``
files load with ``strict=True``. Sizes that upstream hard-codes are constructor parameters whose defaults are
upstream's values; tests shrink them to build tiny random networks on the same code path.
"""
from .appearance import AppearanceFeatureExtractor
from .decoder import SPADEDecoder
from .lmdm import MotionDecoder
from .motion_extractor import MotionExtractor
from .stitching import StitchingNetwork
from .warping import WarpingNetwork

__all__ = ["AppearanceFeatureExtractor", "MotionExtractor", "WarpingNetwork", "SPADEDecoder", "StitchingNetwork",
           "MotionDecoder"]
