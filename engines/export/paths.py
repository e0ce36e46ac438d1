"""Output file names: a `filename_prefix` resolved inside an output folder, never outside it.

`filename_prefix` may hold sub-folders ("broadcast/evening") like ComfyUI's own savers, but an absolute path, a
drive letter, a ".." component or a symlink that leads out of the folder is refused with an `InputError` before
anything is created. Files are numbered `<name>_00001.mp4`, `<name>_00002.mp4`, ... after the highest number present.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from ..common.errors import InputError


# Longest name between slashes: NAME_MAX (255 bytes) less "_00001.mp4" and the writer's ".<name>.<8 hex>.partial"
# temporary name, with room to spare.
MAX_PART_BYTES = 200
MAX_DEPTH = 8
WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}


@dataclass(frozen=True)
class OutputName:
    """Where a new file goes: its full path, the sub-folder relative to the output folder, and the file name."""

    path: Path
    subfolder: str
    filename: str


def _refuse(prefix: str, why: str) -> InputError:
    return InputError("filename_prefix", "a relative name inside the output folder, such as 'broadcast/clip'",
                      f"{prefix!r} ({why})", "Remove the folder part that leaves the output folder.")


def check_prefix(prefix: str) -> tuple[str, ...]:
    """The prefix's path parts, or an `InputError` when it is empty or would leave the output folder."""
    if not isinstance(prefix, str) or not prefix.strip():
        raise InputError("filename_prefix", "a non-empty file name prefix", repr(prefix))
    prefix = prefix.strip()
    if any(ord(c) < 32 for c in prefix):
        raise _refuse(prefix, "it contains control characters")
    if PurePosixPath(prefix).is_absolute() or PureWindowsPath(prefix).is_absolute() or PureWindowsPath(prefix).drive:
        raise _refuse(prefix, "it is an absolute path")
    parts = tuple(p for p in re.split(r"[\\/]+", prefix) if p not in ("", "."))
    if ".." in parts:
        raise _refuse(prefix, "it climbs out with '..'")
    if not parts:
        raise InputError("filename_prefix", "a non-empty file name prefix", repr(prefix))
    if len(parts) > MAX_DEPTH + 1:
        raise InputError("filename_prefix", f"at most {MAX_DEPTH} sub-folders", f"{len(parts) - 1} in {_short(prefix)}")
    for part in parts:
        # Checked here, before the file system says "File name too long" (or creates half the folders).
        if len(part.encode("utf-8")) > MAX_PART_BYTES:
            raise InputError("filename_prefix", f"names of at most {MAX_PART_BYTES} bytes between the slashes "
                             "(the file system allows 255, and the number and the extension are added)",
                             f"{len(part.encode('utf-8'))} bytes in {_short(part)}")
        if part.split(".")[0].upper() in WINDOWS_RESERVED or part.endswith((" ", ".")):
            raise _refuse(prefix, f"{part!r} is not a valid file name on Windows")
    return parts


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:40] + "..." + text[-12:])


def next_output(output_dir: os.PathLike | str, prefix: str, extension: str = "mp4") -> OutputName:
    """A fresh numbered path for `prefix` inside `output_dir` (its sub-folders are created)."""
    parts = check_prefix(prefix)
    root = Path(output_dir).resolve()
    folder = root.joinpath(*parts[:-1])
    # Resolve after joining so a symlinked sub-folder pointing elsewhere is caught too.
    resolved = folder.resolve()
    if resolved != root and root not in resolved.parents:
        raise _refuse(prefix, "it resolves outside the output folder")
    resolved.mkdir(parents=True, exist_ok=True)
    name = parts[-1]
    pattern = re.compile(re.escape(name) + r"_(\d+)\." + re.escape(extension) + "$")
    numbers = [int(m.group(1)) for f in os.listdir(resolved) if (m := pattern.match(f))]
    filename = f"{name}_{max(numbers, default=0) + 1:05d}.{extension}"
    subfolder = "/".join(parts[:-1])
    return OutputName(path=resolved / filename, subfolder=subfolder, filename=filename)
