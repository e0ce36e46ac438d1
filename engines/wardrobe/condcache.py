"""The conditioning cache: encode a prompt (and its reference pictures) once, reuse the conditioning on every run.

MiniMax H3's text encoder is Qwen3-VL-32B truncated to 50 layers (about 26 B parameters): loading it for every take
of a presenter loop costs minutes and tens of GB. Its output for one prompt is small (a few hundred tokens of width
5120, the token tags, the reference latents), so it is stored once and the encoder is never loaded again for the same
prompt, references, canvas and encoder.

A CONDITIONING is ``[[tensor, {"pooled_output": ..., "minimax_token_tags": tensor, "minimax_refs": [{...}], ...}],
...]``. It is stored losslessly: every tensor goes into the entry's safetensors file, the nesting (lists, dicts,
numbers, strings, None) into its JSON metadata with ``{"$tensor": n}`` where tensor n was. Anything else (a model
patch, a hook object) cannot be stored and is refused by name, so a cache never silently drops part of a
conditioning.

Key = hash(prompt, reference images, the latent's shape(s), the graph that produced the conditioning, format
version): the node passes the signature of every node upstream of its conditioning input
(`engines.common.prompt_graph.upstream_signature`: the text encoder's file (by identity: name, size, mtime and
edge bytes, `fingerprint.named_files`), type and device, the VAE, the reference
sizing, what feeds the canvas size...), so a different prompt, picture, canvas, encoder or encoder setting is a miss,
never a stale hit, without anyone describing the encoder by hand. Tests fill the cache under the key the node
computes (`conditioning_key` with that signature + `store_conditioning`), which is how CI runs the H3 workflow
without the 26 B encoder.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ..common.cache import ContentCache, content_hash
from ..common.errors import InputError
from ..common.prompt_graph import evaluated_links, upstream_signature

NAMESPACE = "conditioning"
VERSION = 3  # 2: keyed by the producing graph, not a hand-typed params string; 3: its files by identity
_TENSOR = "$tensor"


def latent_shapes(latent: Optional[dict]) -> list:
    """The shape of each part of a LATENT (one for a video latent, video + audio for a nested one); [] for None."""
    if latent is None:
        return []
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if samples is None:
        raise InputError("latent", "a LATENT dict with 'samples'", type(latent).__name__)
    parts = samples.unbind() if getattr(samples, "is_nested", False) else [samples]
    return [list(p.shape) for p in parts]


def conditioning_key(prompt: str, producer: Any = None, reference: Optional[torch.Tensor] = None,
                     shapes: Sequence = ()) -> str:
    """Cache key of the conditioning made from ``prompt`` (+ reference images) for a latent of ``shapes``
    (`latent_shapes` of the LATENT it is made for) by ``producer``: the signature of the graph feeding the
    node's conditioning input (`upstream_signature`), None outside a workflow."""
    ref = reference.detach().float().cpu() if reference is not None else "no reference"
    return content_hash("conditioning", VERSION, str(prompt), content_hash(producer), ref,
                        [[int(d) for d in shape] for shape in shapes])


def node_key(graph: Any, node_id: Any, prompt: str, reference: Optional[torch.Tensor] = None,
             shapes: Sequence = (), canvas: Optional[dict] = None, identify=None) -> str:
    """The key the Conditioning Cache node computes in the API prompt ``graph`` (ComfyUI's hidden prompt) as node
    ``node_id``, from its evaluated inputs: ``prompt``, ``reference``, the latent's ``shapes`` (`latent_shapes`)
    and ``canvas`` (``{"width": .., "height": .., "length": ..}``, the linked ones).

    The producer is the signature of the graph feeding the node's conditioning input, in which a link that also
    feeds one of the node's own evaluated inputs counts as the value it carried (the prompt text, the reference's
    content, the canvas numbers): a new clip giving the same canvas is a hit, a picture replaced under the same
    file name is a miss. ``identify`` names the files behind widget values (`upstream_signature`: the node
    passes `nodes.sources.picked_file`), so an encoder, VAE or picture file replaced under its old name is a miss
    too.
    """
    values = {"prompt": prompt, "reference": content_hash(reference) if reference is not None else None,
              **(canvas or {})}
    known = evaluated_links(graph, node_id, values)
    producer = upstream_signature(graph, node_id, ("conditioning",), known, identify)
    return conditioning_key(prompt, producer, reference, shapes)


def _flatten(value: Any, tensors: dict, path: str):
    if isinstance(value, torch.Tensor):
        name = str(len(tensors))
        tensors[name] = value.detach().cpu().contiguous()
        return {_TENSOR: name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_flatten(v, tensors, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if _TENSOR in value:
            raise InputError("conditioning", f"no dict key named {_TENSOR!r}", f"one at {path}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InputError("conditioning", "dicts with string keys", f"a {type(k).__name__} key at {path}")
            out[k] = _flatten(v, tensors, f"{path}.{k}")
        return out
    raise InputError("conditioning", "tensors, numbers, strings, lists and dicts only (what can be stored)",
                     f"a {type(value).__name__} at {path}",
                     "Cache the conditioning before nodes that attach hooks or model patches to it.")


def _unflatten(value: Any, tensors: dict):
    if isinstance(value, dict):
        if set(value) == {_TENSOR}:
            return tensors[value[_TENSOR]].clone()  # a real tensor: the mapped file may be replaced later
        return {k: _unflatten(v, tensors) for k, v in value.items()}
    if isinstance(value, list):
        return [_unflatten(v, tensors) for v in value]
    return value


def check_conditioning(conditioning: Any) -> list:
    """A CONDITIONING is a non-empty list of ``[tensor, dict]`` pairs."""
    if not isinstance(conditioning, (list, tuple)) or not conditioning:
        raise InputError("conditioning", "a CONDITIONING (a list of [tensor, options] pairs)",
                         type(conditioning).__name__ if not isinstance(conditioning, (list, tuple)) else "an empty list")
    for i, item in enumerate(conditioning):
        if (not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], torch.Tensor)
                or not isinstance(item[1], dict)):
            raise InputError("conditioning", "a CONDITIONING (a list of [tensor, options] pairs)",
                             f"item {i} of type {type(item).__name__}")
    return list(conditioning)


def store_conditioning(cache: ContentCache, key: str, conditioning: Any, meta: Optional[dict] = None) -> list:
    """Write ``conditioning`` under ``key``; returns it loaded back (so a run always uses what is stored)."""
    tensors: dict = {}
    structure = _flatten(check_conditioning(conditioning), tensors, "conditioning")
    cache.store(NAMESPACE, key, VERSION, tensors, {"structure": structure, **(meta or {})})
    loaded = load_conditioning(cache, key)
    if loaded is None:
        raise RuntimeError(f"conditioning cache entry {key} could not be read back after writing")
    return loaded


def load_conditioning(cache: ContentCache, key: str) -> Optional[list]:
    """The stored conditioning, or None on a miss (a corrupt entry is removed and counts as a miss)."""
    entry = cache.load(NAMESPACE, key, VERSION)
    if entry is None or "structure" not in entry.meta:
        return None
    try:
        return [list(item) for item in _unflatten(entry.meta["structure"], entry.tensors)]
    except (KeyError, TypeError):
        return None


def has_conditioning(cache: ContentCache, key: str) -> bool:
    return load_conditioning(cache, key) is not None


def conditioning_for(cache: ContentCache, key: str, given: Any = None, refresh: bool = False,
                     meta: Optional[dict] = None) -> list:
    """The Conditioning Cache node's job: the entry under ``key``, or ``given`` (the evaluated conditioning input,
    None when it was not evaluated) stored on a miss and returned as stored."""
    loaded = None if refresh else load_conditioning(cache, key)
    if loaded is None:
        if given is None:
            raise InputError("conditioning", "a conditioning to store (the cache entry is missing or unreadable)",
                             "nothing", "Queue the workflow again: the encoder will run this time.")
        loaded = store_conditioning(cache, key, given, meta)
    return loaded
