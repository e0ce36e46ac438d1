"""engines.common.prompt_graph: the signature of what feeds a node's inputs, for cache keys."""
from engines.common.cache import content_hash
from engines.common.prompt_graph import upstream_signature

PROMPT = {
    "1": {"class_type": "BroadcastLoadVideo", "inputs": {"video": "a.mp4", "frame_cap": 0}},
    "2": {"class_type": "BroadcastSam3Loader", "inputs": {"model_name": "sam3", "dtype": "auto"}},
    "3": {"class_type": "BroadcastSam3VideoMask",
          "inputs": {"sam3_model": ["2", 0], "images": ["1", 0], "detection_threshold": 0.25}},
    "4": {"class_type": "BroadcastMaskSequenceCache",
          "inputs": {"images": ["1", 0], "prompt": "dress", "masks": ["3", 1], "masks_2": ["3", 2]},
          "_meta": {"title": "Mask Cache"}},
}


def sig(prompt, node="4"):
    return content_hash(upstream_signature(prompt, node, ("masks", "masks_2")))


def renumbered(prompt, offset=10):
    def move(v):
        return [str(int(v[0]) + offset), v[1]] if isinstance(v, list) else v
    return {str(int(k) + offset): {**n, "inputs": {i: move(v) for i, v in n["inputs"].items()}}
            for k, n in prompt.items()}


def test_every_upstream_setting_is_part_of_the_signature():
    base = sig(PROMPT)
    for node, name, value in [("3", "detection_threshold", 0.3), ("2", "model_name", "sam3-large"),
                              ("1", "video", "b.mp4")]:
        changed = {k: {**n, "inputs": dict(n["inputs"])} for k, n in PROMPT.items()}
        changed[node]["inputs"][name] = value
        assert sig(changed) != base, f"{node}.{name} does not reach the key"
    rewired = {**PROMPT, "4": {**PROMPT["4"], "inputs": {**PROMPT["4"]["inputs"], "masks_2": ["3", 1]}}}
    assert sig(rewired) != base                                    # which output is used counts


def test_ids_titles_number_spelling_and_the_node_own_inputs_do_not():
    base = sig(PROMPT)
    assert sig(renumbered(PROMPT), "14") == base
    retitled = {**PROMPT, "3": {**PROMPT["3"], "_meta": {"title": "Garment"}}}
    assert sig(retitled) == base
    spelled = {**PROMPT, "1": {**PROMPT["1"], "inputs": {"video": "a.mp4", "frame_cap": 0.0}}}
    assert sig(spelled) == base
    own = {**PROMPT, "4": {**PROMPT["4"], "inputs": {**PROMPT["4"]["inputs"], "prompt": "coat"}}}
    assert sig(own) == base


def test_without_a_prompt_there_is_no_signature():
    assert upstream_signature(None, "4", ("masks",)) is None
    assert upstream_signature(PROMPT, None, ("masks",)) is None
    assert upstream_signature(PROMPT, "4", ("absent",)) == {}
