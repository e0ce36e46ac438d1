"""Progress and cancellation for engine loops, without importing ComfyUI.

Engines take one optional `Progress`; nodes build it from ComfyUI's progress bar and interrupt check
(`nodes/comfy_bridge.py`). Every loop calls `progress.step()` per unit of work; a cancelled run raises from inside
`step()` or `check()`, and the engine's own `try/finally` blocks clean up partial files.
"""
from __future__ import annotations

from typing import Callable, Optional


class Progress:
    """Counts work units against a total and polls for cancellation.

    Args:
        total: units expected (frames, steps); may be changed with `reset`.
        on_update: called as ``on_update(done, total)`` after each step.
        check_cancel: called often; raises (any exception) to abort the run.
    """

    def __init__(
        self,
        total: int = 0,
        on_update: Optional[Callable[[int, int], None]] = None,
        check_cancel: Optional[Callable[[], None]] = None,
    ):
        self.total = int(total)
        self.done = 0
        self._on_update = on_update
        self._check_cancel = check_cancel

    def reset(self, total: int) -> None:
        self.total = int(total)
        self.done = 0
        if self._on_update:
            self._on_update(0, self.total)

    def check(self) -> None:
        """Raise if the user cancelled."""
        if self._check_cancel:
            self._check_cancel()

    def step(self, n: int = 1) -> None:
        """Record `n` finished units, report them, and raise if the user cancelled."""
        self.done += n
        if self._on_update:
            self._on_update(min(self.done, self.total) if self.total else self.done, self.total)
        self.check()



def ensure(progress: Optional[Progress]) -> Progress:
    """Engines accept `None` for "no reporting"."""
    return progress if progress is not None else Progress()
