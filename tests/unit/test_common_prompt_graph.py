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


def _swap(path, text: bytes) -> None:
    """Other bytes under the same name, with the old size and mtime: only the content says it changed."""
    import os

    st = path.stat()
    path.write_bytes(text.ljust(st.st_size, b"."))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _model_folders(tmp_path):
    """A models tree as ComfyUI has it: a SAM3 folder (a model picked by folder name) and an input folder."""
    models, inputs = tmp_path / "models", tmp_path / "input"
    sam3 = models / "sam3" / "sam3"
    sam3.mkdir(parents=True)
    (sam3 / "config.json").write_text('{"hidden_size": 8}')
    (sam3 / "model.safetensors").write_bytes(b"weights, release one".ljust(200_000, b"."))
    inputs.mkdir()
    (inputs / "a.mp4").write_bytes(b"a clip".ljust(1000, b"."))
    return [models / "sam3", models / "checkpoints", inputs], sam3


def test_files_named_by_widget_values_count_by_identity(tmp_path):
    """With `identify` (the node passes `nodes.sources.picked_file`), a model folder or input file replaced
    under its old name, even with its old size and mtime, is another signature; the same files are the same one."""
    from engines.common.fingerprint import named_files

    folders, sam3 = _model_folders(tmp_path)

    def key():
        return content_hash(upstream_signature(PROMPT, "4", ("masks", "masks_2"),
                                               identify=lambda text: named_files(text, folders)))

    base = key()
    assert key() == base and base != sig(PROMPT)                   # the files are part of it now
    _swap(sam3 / "model.safetensors", b"weights, release two")     # a swapped model file: a miss
    swapped = key()
    assert swapped != base
    (sam3 / "tokenizer.json").write_text("{}")                     # a file added to the model folder
    assert key() != swapped
    added = key()
    _swap(tmp_path / "input" / "a.mp4", b"another clip")           # the clip the segmenter reads
    assert key() != added


def test_named_files_finds_only_relative_names_inside_the_folders(tmp_path):
    from engines.common.fingerprint import named_files

    folders, sam3 = _model_folders(tmp_path)
    found = named_files("sam3", folders)
    assert [f["name"] for f in found] == ["sam3"]
    assert [f[0] for f in found[0]["files"]] == ["config.json", "model.safetensors"]
    assert named_files("a.mp4", folders)[0]["size"] == 1000
    for text in ("dress, corset", "", "../models/sam3", str(sam3), "x" * 5000, "bad\0name", "n" * 300):
        assert named_files(text, folders) is None, text
    (tmp_path / "models" / "checkpoints").mkdir()
    (tmp_path / "models" / "checkpoints" / "sam3").symlink_to(sam3, target_is_directory=True)
    assert named_files("sam3", folders) == found                   # one file reached twice counts once
