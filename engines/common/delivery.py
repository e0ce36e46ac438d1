"""Delivery profiles: one table of loudness target, tolerance and true-peak ceiling, read by Audio Master and QC.

A user who delivers to a broadcaster picks the profile once; the master aims at it and QC checks against it, so the
two can never disagree. Figures and sources (see the project's delivery-standards notes):

- EBU R 128 v5.0 (2023): -23.0 LUFS, true peak <= -1 dBTP (R128 h, m). Tolerance: +-0.2 LU for file-based QC
  (R128 i; EBU Tech 3343 sec. 3.2: "+-0.2 LU, or +-1.0 LU for live"). The +-0.5 LU often quoted is R128 v3's and
  was superseded in v4 (2020); a pre-produced clip is not live, so +-0.2 LU.
- ATSC A/85:2013 (US, CALM Act): -24 LKFS, "variations of up to approximately +-2 dB" acceptable, true peak kept
  below -2 dBTP.
- streaming: -14 LUFS (Spotify's normalisation reference; YouTube measured near it), true peak <= -1 dBTP
  (Spotify). No platform publishes a tolerance: the pack uses R128's production figure, +-1 LU.
- podcast: -16 LUFS +-1 LU, true peak <= -1 dBTP (Apple Podcasts' audio requirements, as quoted).
- custom: the node's own widgets.

BS.1770 measures both (LUFS = LKFS).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from .errors import InputError


@dataclass(frozen=True)
class DeliveryProfile:
    name: str
    target_lufs: float
    tolerance_lu: float
    max_true_peak_dbtp: float
    source: str

    def describe(self) -> str:
        return (f"{self.name}: {self.target_lufs:g} LUFS +-{self.tolerance_lu:g} LU, true peak <= "
                f"{self.max_true_peak_dbtp:g} dBTP ({self.source})")

    def as_dict(self) -> dict:
        return {"name": self.name, "target_lufs": self.target_lufs, "tolerance_lu": self.tolerance_lu,
                "max_true_peak_dbtp": self.max_true_peak_dbtp, "source": self.source}


CUSTOM = "custom"
PROFILES = {p.name: p for p in (
    DeliveryProfile("EBU R128", -23.0, 0.2, -1.0,
                    "EBU R 128 v5.0 (h) target, (i) +-0.2 LU in QC (EBU Tech 3343 3.2; +-1 LU only live), "
                    "(m) -1 dBTP"),
    DeliveryProfile("ATSC A/85", -24.0, 2.0, -2.0,
                    "ATSC A/85:2013: -24 LKFS, +-2 dB measurement variation, true peak below -2 dBTP"),
    DeliveryProfile("streaming", -14.0, 1.0, -1.0,
                    "Spotify loudness normalisation: -14 LUFS, -1 dBTP; no published tolerance, R128's +-1 LU"),
    DeliveryProfile("podcast", -16.0, 1.0, -1.0,
                    "Apple Podcasts audio requirements: -16 LKFS +-1 dB, true peak <= -1 dBFS"),
)}
CHOICES = (*PROFILES, CUSTOM)
DEFAULT = "streaming"
# Values saved by older versions of the QC node's loudness_preset combo, and what they meant.
LEGACY = {"streaming -14 LUFS": "streaming", "broadcast -23 LUFS (EBU R128)": "EBU R128"}


def canonical(name: str, input_name: str = "delivery_profile") -> str:
    """The profile name for `name` (an older saved value is mapped); an unknown name is refused."""
    name = LEGACY.get(name, name)
    if name not in CHOICES:
        raise InputError(input_name, f"one of {', '.join(CHOICES)}", repr(name))
    return name


def profile(name: str, input_name: str = "delivery_profile") -> Optional[DeliveryProfile]:
    """The profile called `name`; None for custom."""
    name = canonical(name, input_name)
    return None if name == CUSTOM else PROFILES[name]


def tooltip(custom_means: str) -> str:
    """One line per profile with its figures and source, for a combo's tooltip."""
    lines = [f"- {p.describe()}" for p in PROFILES.values()]
    return "Delivery profile (loudness target, tolerance, true-peak ceiling; BS.1770 measures all):\n" + \
        "\n".join(lines) + f"\n- custom: {custom_means}"


def handoff(name: str, target_lufs: float, max_true_peak_dbtp: float) -> str:
    """What Audio Master hands Broadcast QC (its `delivery` output, a short JSON text): the profile it mastered to
    and, for custom, its own target and ceiling, so a graph sets the delivery once, on the master."""
    name = canonical(name)
    chosen = {"profile": name}
    if name == CUSTOM:
        chosen.update(target_lufs=float(target_lufs), max_true_peak_dbtp=float(max_true_peak_dbtp))
    return json.dumps(chosen)


def from_handoff(text: str, input_name: str = "delivery") -> tuple[str, dict]:
    """(profile name, custom figures) from `handoff`'s text; anything else is refused by name."""
    expected = "Broadcast Audio Master's 'delivery' output"
    try:
        chosen = json.loads(text)
        name = canonical(chosen["profile"], input_name)
        figures = {k: float(chosen[k]) for k in ("target_lufs", "max_true_peak_dbtp")} if name == CUSTOM else {}
    except (ValueError, TypeError, KeyError) as exc:
        raise InputError(input_name, expected, repr(text)[:80],
                         "Link Audio Master's 'delivery' output here, or leave it unlinked.") from exc
    return name, figures
