"""The one user-facing error type of the pack.

ComfyUI shows an exception's message to the user as it is, so each message must say which input is wrong, what was
expected, what was given and, where there is one, how to fix it. `InputError` is a `ValueError`, so core's
execution and any caller that catches `ValueError` treat it as a bad input, not as a crash.
"""
from __future__ import annotations


class InputError(ValueError):
    """A node input (or a model file) that cannot be used.

    Args:
        input_name: the input as the user sees it on the node (``"images"``, ``"audio"``, ``"model_name"``).
        expected: what would have been accepted (``"a batch of at least 1 frame"``).
        given: what arrived (``"0 frames"``).
        fix: optional advice (``"connect a Load Video node"``).
    """

    def __init__(self, input_name: str, expected: str, given: str | None = None, fix: str | None = None):
        self.input_name = input_name
        self.expected = expected
        self.given = given
        self.fix = fix
        message = f"{input_name}: expected {expected}"
        if given is not None:
            message += f", got {given}"
        message += "."
        if fix:
            message += f" {fix}"
        super().__init__(message)


class ModelFilesMissing(InputError):
    """A model folder lacks files the loader needs; the message names the folder and every missing file."""

    def __init__(self, input_name: str, folder: str, missing: list[str], hint: str | None = None):
        listing = ", ".join(missing)
        super().__init__(
            input_name,
            expected=f"a model folder containing {listing}",
            given=f"'{folder}', which lacks them",
            fix=hint or ("Put the model files there (the README's model table has the `hf download` command); "
                         "nothing is ever downloaded."),
        )
        self.folder = folder
        self.missing = list(missing)
