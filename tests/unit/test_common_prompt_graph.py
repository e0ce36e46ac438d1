"""engines.common.prompt_graph: the signature of what feeds a node's inputs, for cache keys."""
from engines.common.cache import content_hash
from engines.common.prompt_graph import evaluated_links, upstream_signature

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


def test_a_link_whose_value_is_known_counts_as_that_value():
    """A link the caller also received (its own evaluated input from the same output) is that value, wherever it
    appears upstream: another source giving the same value gives the same signature, another value another one."""
    prompt = {
        "1": {"class_type": "BroadcastLoadVideo", "inputs": {"video": "a.mp4"}},
        "2": {"class_type": "BroadcastSubjectCrop", "inputs": {"images": ["1", 0], "padding": 8}},
        "3": {"class_type": "Encoder", "inputs": {"width": ["2", 3], "text": "hi", "clip": ["5", 0]}},
        "5": {"class_type": "CLIPLoader", "inputs": {"clip_name": "te.safetensors"}},
        "4": {"class_type": "Cache", "inputs": {"conditioning": ["3", 0], "width": ["2", 3], "mode": "x"}},
    }

    def key(p, width=96):
        known = evaluated_links(p, "4", {"width": width, "mode": "x", "absent": 1})
        return content_hash(upstream_signature(p, "4", ("conditioning",), known))

    assert evaluated_links(prompt, "4", {"width": 96, "mode": "x"}) == {("2", 3): 96.0}  # widgets are no links
    base = key(prompt)
    other_clip = {**prompt, "1": {**prompt["1"], "inputs": {"video": "b.mp4"}}}
    assert key(other_clip) == base and key(prompt, width=128) != base
    unknown = content_hash(upstream_signature(prompt, "4", ("conditioning",)))
    assert unknown != base
    assert content_hash(upstream_signature(other_clip, "4", ("conditioning",))) != unknown   # the graph counts then
    other_encoder = {**prompt, "5": {**prompt["5"], "inputs": {"clip_name": "te2.safetensors"}}}
    assert key(other_encoder) != base
    assert evaluated_links(None, "4", {"width": 96}) == {} and evaluated_links(prompt, "9", {"width": 96}) == {}
