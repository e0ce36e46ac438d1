"""Accelerated backends for the pack's networks: one interface, "run this network" (see backends.py)."""
from .backends import (AUTO_ORDER, BACKENDS, BackendUnavailable, BuildOptions, Runner, accelerate, check_backend,
                       cosine)
from .network import Network

__all__ = ["AUTO_ORDER", "BACKENDS", "BackendUnavailable", "BuildOptions", "Runner", "accelerate", "check_backend",
           "cosine", "Network"]
