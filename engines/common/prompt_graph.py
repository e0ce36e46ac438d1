"""What produced a node's input, read off an API prompt (the plain ``{node id: {class_type, inputs}}`` dict that
ComfyUI executes): the basis of cache keys that follow the real settings instead of a hand-typed description.

`upstream_signature` replaces every link by the signature of the node it comes from, recursively, and drops node
ids and titles, so the same settings give the same signature in any workflow and a changed threshold anywhere
upstream gives another one. A link whose value the caller already holds (an input of its own that was evaluated,
linked to the same output: `evaluated_links`) is replaced by that value instead of the graph computing it, so
another graph giving the same value (a new clip with the same canvas size) gives the same signature.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence


def is_link(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], int) and not isinstance(value[1], bool))


def upstream_signature(prompt: Optional[Mapping], node_id: Optional[str], inputs: Sequence[str],
                       known: Optional[Mapping] = None,
                       identify: Optional[Callable[[str], Any]] = None) -> Optional[dict]:
    """``{input: signature of what feeds it}`` for the linked ones among `inputs` of `node_id` (a widget value is
    its own signature); None without a prompt (a caller outside ComfyUI). ``known`` maps ``(source id, output)``
    links to the value they carry in this run (`evaluated_links`); such a link counts as that value.

    ``identify(text)``: the identity of the file a string widget value names (`fingerprint.named_files` over the
    model and input folders), or None where it names none. A named file then counts as ``{"file": name,
    "identity": ...}``, so a model or input file replaced under the same name is another signature."""
    if not isinstance(prompt, Mapping) or node_id is None or str(node_id) not in prompt:
        return None
    memo: dict = {}
    known = {(str(k[0]), int(k[1])): v for k, v in (known or {}).items()}
    own = prompt[str(node_id)].get("inputs", {})
    return {name: _value(prompt, own[name], memo, set(), known, identify) for name in inputs if name in own}


def evaluated_links(prompt: Optional[Mapping], node_id: Optional[str], values: Mapping[str, Any]) -> dict:
    """``{(source id, output): value}`` for those of `node_id`'s inputs in `values` (name -> the value it received,
    in a form the caller hashes: a digest for a tensor) that are links; the `known` of `upstream_signature`."""
    if not isinstance(prompt, Mapping) or node_id is None or str(node_id) not in prompt:
        return {}
    own = prompt[str(node_id)].get("inputs", {})
    return {(str(own[name][0]), int(own[name][1])): _plain(value) for name, value in values.items()
            if name in own and is_link(own[name]) and value is not None}


def _plain(value: Any) -> Any:
    # The editor and the API twins may write one number as 4 or 4.0; the value, not its spelling, counts.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def _value(prompt: Mapping, value: Any, memo: dict, path: set, known: Mapping, identify=None) -> Any:
    if not is_link(value):
        if identify is not None and isinstance(value, str):
            identity = identify(value)
            if identity is not None:
                return {"file": value, "identity": identity}
        return _plain(value)
    source, output = value
    if (str(source), int(output)) in known:
        return {"value": known[(str(source), int(output))]}
    return {"from": _node(prompt, source, memo, path, known, identify), "output": output}


def _node(prompt: Mapping, node_id: str, memo: dict, path: set, known: Mapping, identify=None) -> Any:
    if node_id in memo:
        return memo[node_id]
    node = prompt.get(node_id)
    if not isinstance(node, Mapping) or node_id in path:  # a dangling link or a cycle: ComfyUI refuses those anyway
        return {"missing": node_id}
    path = path | {node_id}
    inputs = node.get("inputs", {}) if isinstance(node.get("inputs"), Mapping) else {}
    signature = {"class_type": node.get("class_type"),
                 "inputs": {k: _value(prompt, v, memo, path, known, identify)
                            for k, v in sorted(inputs.items())}}
    memo[node_id] = signature
    return signature


def source_signature(prompt: Optional[Mapping], node_id: Optional[str], inputs: Sequence[str],
                     identify: Callable[[str, Mapping], Optional[Mapping]]) -> Optional[dict]:
    """Like `upstream_signature`, for keys that must hold across server restarts without evaluating anything: every
    node upstream of `inputs` must be one whose output follows from its inputs and the files it reads, and
    `identify(class_type, inputs)` says how: it returns the inputs with each picked file replaced by its identity
    (`fingerprint.source_identity`), or None for a node it does not know (a sampler, a random source, another
    pack's node) or a file that is not there. One unknown node anywhere upstream makes the whole signature None:
    the caller then keys by content. Unlinked `inputs` are their own values; a linked one that is absent from the
    prompt is None."""
    if not isinstance(prompt, Mapping) or node_id is None or str(node_id) not in prompt:
        return None
    own = prompt[str(node_id)].get("inputs", {})
    memo: dict = {}
    out = {}
    for name in inputs:
        if name not in own:
            continue
        value = _identified(prompt, own[name], identify, memo, set())
        if value is _UNKNOWN:
            return None
        out[name] = value
    return out


_UNKNOWN = object()


def _identified(prompt: Mapping, value: Any, identify, memo: dict, path: set) -> Any:
    if not is_link(value):
        return _value(prompt, value, {}, set(), {})
    source, output = value
    if source in memo:
        node_sig = memo[source]
    else:
        node = prompt.get(source)
        if not isinstance(node, Mapping) or source in path or not isinstance(node.get("inputs", {}), Mapping):
            return _UNKNOWN
        try:
            known = identify(str(node.get("class_type")), node.get("inputs", {}))
        except Exception:  # a file gone or unreadable, a detector not found: not a known source, key by content
            known = None
        if known is None:
            node_sig = _UNKNOWN
        else:
            inner = {}
            for k, v in sorted(known.items()):
                inner[k] = _identified(prompt, v, identify, memo, path | {source})
                if inner[k] is _UNKNOWN:
                    node_sig = _UNKNOWN
                    break
            else:
                node_sig = {"class_type": node.get("class_type"), "inputs": inner}
        memo[source] = node_sig
    if node_sig is _UNKNOWN:
        return _UNKNOWN
    return {"from": node_sig, "output": output}
