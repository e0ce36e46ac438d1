"""What produced an avatar's frames, read off the prompt: the node side of cold boots (engines/common/source_cache.py).

`signature(cls, inputs)` walks the graph feeding `inputs` of the executing node (its hidden prompt and id) and
returns a signature in which every picked file is its identity (name, size, mtime_ns, first and last bytes), or
None as soon as one upstream node is not a known source. Known sources are the nodes whose output follows from their
inputs and the files they read: Broadcast Load Video, core's Load Image (registered here) and those a family adds
with `register` (Broadcast Face Track, whose detector file is part of its identity). Nothing is evaluated or
decoded: this runs before the node's lazy inputs are asked for.

`picked_file(text)` is the `identify` of `prompt_graph.upstream_signature` for the keys built from what a graph
produced (the mask sequence and conditioning caches): the identity of the model file or folder, or input file, a
widget value names, looked up in every models folder ComfyUI knows and its input folder.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional

import folder_paths

from ..engines.common.fingerprint import named_files, source_identity
from ..engines.common.prompt_graph import source_signature

Identify = Callable[[Mapping], Optional[dict]]
_SOURCES: dict[str, Identify] = {}


def register(class_type: str, identify: Identify) -> None:
    """`identify(inputs)`: the node's inputs with its files replaced by their identities, or None when unknown."""
    _SOURCES[class_type] = identify


def input_file(name) -> Optional[dict]:
    """The identity of a file of ComfyUI's input folder picked by `name` (annotated names allowed), or None."""
    if not isinstance(name, str) or not name or not folder_paths.exists_annotated_filepath(name):
        return None
    return source_identity(folder_paths.get_annotated_filepath(name), name)


def _file_input(field: str) -> Identify:
    def identify(inputs: Mapping) -> Optional[dict]:
        ident = input_file(inputs.get(field))
        return None if ident is None else {**inputs, field: ident}
    return identify


register("BroadcastLoadVideo", _file_input("video"))
register("LoadImage", _file_input("image"))


def _identify(class_type: str, inputs: Mapping) -> Optional[dict]:
    fn = _SOURCES.get(class_type)
    return fn(inputs) if fn is not None else None


def signature(cls, inputs) -> Optional[dict]:
    """The source signature of `inputs` of the node `cls` is executing, or None (no prompt, unknown producer)."""
    hidden = getattr(cls, "hidden", None)
    return source_signature(getattr(hidden, "prompt", None), getattr(hidden, "unique_id", None), tuple(inputs),
                            _identify)


def _file_folders() -> list[str]:
    folders = [p for name, (paths, _) in folder_paths.folder_names_and_paths.items() if name != "custom_nodes"
               for p in paths]
    return folders + [folder_paths.get_input_directory()]


def picked_file(text) -> Optional[list]:
    """The identities of the model files/folders and input files called `text` (a widget value), or None."""
    return named_files(text, _file_folders())
