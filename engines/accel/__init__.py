"""Accelerated backends for the pack's networks: one interface, "run this network" (see backends.py)."""
from .backends import (AUTO_ORDER, BACKENDS, BackendUnavailable, BuildOptions, Runner, accelerate, auto_order,
                       check_backend, cosine)
from .network import Network, Preference

__all__ = ["AUTO_ORDER", "BACKENDS", "BackendUnavailable", "BuildOptions", "Runner", "accelerate", "auto_order",
           "check_backend", "cosine", "Network", "Preference"]
