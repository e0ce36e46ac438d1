"""The conditioning cache: lossless round trip of a nested CONDITIONING, keys, refusals and misses."""
import pytest
import torch

from engines.common.cache import ContentCache
from engines.common.errors import InputError
from engines.wardrobe import condcache as CC


def _h3_like():
    g = torch.Generator().manual_seed(0)
    return [[torch.randn(1, 7, 48, generator=g),
             {"pooled_output": None, "minimax_token_tags": torch.tensor([1, 0, 0, 0, 1, 1, 1]),
              "minimax_refs": [{"kind": "image", "latent_h": 2, "latent_w": 4,
                                "latent": torch.randn(1, 24, 1, 2, 4, generator=g).to(torch.bfloat16)}],
              "strength": 1.0, "note": "x", "flag": True, "pair": (1, 2)}]]


def test_round_trip_is_exact(tmp_path):
    store = ContentCache(tmp_path)
    cond = _h3_like()
    key = CC.conditioning_key("a prompt", {"clip_name": "te.safetensors"}, torch.rand(1, 8, 8, 3))
    assert CC.load_conditioning(store, key) is None and not CC.has_conditioning(store, key)
    back = CC.store_conditioning(store, key, cond)
    assert CC.has_conditioning(store, key)
    again = CC.load_conditioning(store, key)
    for got in (back, again):
        (t, opts), = got
        assert torch.equal(t, cond[0][0]) and opts["pooled_output"] is None
        assert torch.equal(opts["minimax_token_tags"], cond[0][1]["minimax_token_tags"])
        ref = opts["minimax_refs"][0]
        assert ref["kind"] == "image" and (ref["latent_h"], ref["latent_w"]) == (2, 4)
        assert ref["latent"].dtype == torch.bfloat16 and torch.equal(ref["latent"], cond[0][1]["minimax_refs"][0]["latent"])
        assert opts["strength"] == 1.0 and opts["note"] == "x" and opts["flag"] is True and opts["pair"] == [1, 2]
        t.add_(1)  # loaded tensors are the caller's own (not views on the read-only file)


def test_key_depends_on_everything_that_changes_the_conditioning():
    ref = torch.rand(1, 8, 8, 3)
    small = CC.latent_shapes({"samples": torch.zeros(1, 24, 7, 4, 6)})
    big = CC.latent_shapes({"samples": torch.zeros(1, 24, 7, 4, 8)})
    te, te2 = {"clip_name": "te"}, {"clip_name": "te2"}
    base = CC.conditioning_key("p", te, ref, small)
    assert base == CC.conditioning_key("p", dict(te), ref.clone(),
                                       CC.latent_shapes({"samples": torch.ones(1, 24, 7, 4, 6)}))
    assert base == CC.conditioning_key("p", te, ref, [(1, 24, 7, 4, 6)])
    others = {CC.conditioning_key("q", te, ref, small), CC.conditioning_key("p", te2, ref, small),
              CC.conditioning_key("p", te, ref * 0.5, small), CC.conditioning_key("p", te, ref, big),
              CC.conditioning_key("p", te, None, small), CC.conditioning_key("p", te, ref, CC.latent_shapes(None)),
              CC.conditioning_key("p", None, ref, small)}
    assert base not in others and len(others) == 7


# The H3 workflow's encoder side, as an API prompt: the cache node (32) and what feeds its conditioning.
H3_GRAPH = {
    "1": {"class_type": "BroadcastLoadVideo", "inputs": {"video": "loop.mp4", "frame_cap": 0}},
    "8": {"class_type": "BroadcastSubjectCrop", "inputs": {"images": ["1", 0], "padding": 32, "multiple": 32}},
    "13": {"class_type": "CLIPLoader", "inputs": {"clip_name": "te.safetensors", "type": "minimax",
                                                  "device": "default"}},
    "14": {"class_type": "VAELoader", "inputs": {"vae_name": "vae.safetensors"}},
    "16": {"class_type": "LoadImage", "inputs": {"image": "dress.png"}},
    "31": {"class_type": "PrimitiveStringMultiline", "inputs": {"value": "a blue dress"}},
    "17": {"class_type": "MiniMaxH3ReferenceToVideo",
           "inputs": {"clip": ["13", 0], "vae": ["14", 0], "prompt": ["31", 0], "width": ["8", 3],
                      "height": ["8", 4], "length": ["8", 5], "ref_image_size": "match",
                      "ref_images.ref_image_0": ["16", 0]}},
    "32": {"class_type": "BroadcastConditioningCache",
           "inputs": {"prompt": ["31", 0], "conditioning": ["17", 0], "reference": ["16", 0], "width": ["8", 3],
                      "height": ["8", 4], "length": ["8", 5], "mode": "use cache"}},
}
CANVAS = {"width": 96, "height": 128, "length": 22}
SHAPES = [[1, 24, 7, 8, 6], [1, 32, 2, 37]]


def _changed(node, name, value, graph=H3_GRAPH):
    out = {k: {**n, "inputs": dict(n["inputs"])} for k, n in graph.items()}
    out[node]["inputs"][name] = value
    return out


def _node_key(graph=H3_GRAPH, ref=None, canvas=CANVAS, text="a blue dress"):
    ref = torch.full((1, 8, 8, 3), 0.5) if ref is None else ref
    return CC.node_key(graph, "32", text, ref, SHAPES, canvas)


def test_node_key_follows_every_encoder_setting_upstream():
    base = _node_key()
    for node, name, value in [("13", "clip_name", "te2.safetensors"), ("13", "device", "cpu"),
                              ("14", "vae_name", "other_vae.safetensors"), ("17", "ref_image_size", "1024")]:
        assert _node_key(_changed(node, name, value)) != base, f"{node}.{name} does not reach the key"
    assert _node_key(canvas={**CANVAS, "width": 128}) != base
    assert _node_key(ref=torch.full((1, 8, 8, 3), 0.25)) != base      # a picture replaced under the same name
    assert _node_key(text="a red dress") != base


def test_node_key_holds_values_not_the_graph_that_computed_them():
    base = _node_key()
    # A new clip (or other crop settings) giving the same canvas, the same picture under another name: a hit.
    assert _node_key(_changed("1", "video", "other_loop.mp4")) == base
    assert _node_key(_changed("8", "padding", 16)) == base
    assert _node_key(_changed("16", "image", "dress_copy.png")) == base
    # Canvas not linked into the cache node: the crop's graph counts instead (a new clip is a miss, never stale).
    unlinked = {**H3_GRAPH, "32": {**H3_GRAPH["32"], "inputs": {k: v for k, v in H3_GRAPH["32"]["inputs"].items()
                                                                if k not in CANVAS}}}
    alone = _node_key(unlinked, canvas={})
    assert alone != base and _node_key(_changed("1", "video", "other_loop.mp4", unlinked), canvas={}) != alone


def test_nested_latent_shapes_are_in_the_key():
    class Nested:  # core's NestedTensor shape: is_nested + unbind()
        is_nested = True

        def __init__(self, parts):
            self.parts = parts

        def unbind(self):
            return list(self.parts)

    a = {"samples": Nested([torch.zeros(1, 24, 7, 4, 6), torch.zeros(1, 32, 2, 37)])}
    b = {"samples": Nested([torch.zeros(1, 24, 7, 4, 6), torch.zeros(1, 32, 2, 38)])}
    assert CC.latent_shapes(a) == [[1, 24, 7, 4, 6], [1, 32, 2, 37]]
    assert CC.conditioning_key("p", None, None, CC.latent_shapes(a)) != CC.conditioning_key("p", None, None,
                                                                                            CC.latent_shapes(b))


def test_refuses_what_it_cannot_store_and_writes_nothing(tmp_path):
    store = ContentCache(tmp_path)
    bad = [[torch.zeros(1, 2, 3), {"hooks": object()}]]
    with pytest.raises(InputError, match=r"conditioning: expected tensors, .* got a object at conditioning\[0\]\[1\]\.hooks"):
        CC.store_conditioning(store, "k", bad)
    with pytest.raises(InputError, match="conditioning: expected a CONDITIONING"):
        CC.store_conditioning(store, "k", [torch.zeros(1)])
    with pytest.raises(InputError, match="an empty list"):
        CC.store_conditioning(store, "k", [])
    assert not any(tmp_path.rglob("*.safetensors"))


def test_corrupt_entry_is_a_miss(tmp_path):
    store = ContentCache(tmp_path)
    CC.store_conditioning(store, "k", _h3_like())
    (store.entry_path(CC.NAMESPACE, "k") / "tensors.safetensors").write_bytes(b"garbage")
    assert CC.load_conditioning(store, "k") is None
    assert not store.entry_path(CC.NAMESPACE, "k").exists()


def test_conditioning_for_hits_stores_refreshes_and_names_a_missing_input(tmp_path):
    store = ContentCache(tmp_path)
    cond = _h3_like()
    with pytest.raises(InputError, match="conditioning: expected a conditioning to store"):
        CC.conditioning_for(store, "k", None)
    first = CC.conditioning_for(store, "k", cond, meta={"prompt": "p"})
    assert torch.equal(first[0][0], cond[0][0])
    assert torch.equal(CC.conditioning_for(store, "k", None)[0][0], cond[0][0])  # a hit needs no input
    other = [[cond[0][0] + 1, dict(cond[0][1])]]
    assert torch.equal(CC.conditioning_for(store, "k", other)[0][0], cond[0][0])  # the stored one wins
    assert torch.equal(CC.conditioning_for(store, "k", other, refresh=True)[0][0], other[0][0])
    assert torch.equal(CC.load_conditioning(store, "k")[0][0], other[0][0])


def test_node_key_misses_when_the_encoder_file_is_swapped(tmp_path):
    """The encoder, VAE and picture files count by identity (`identify`, as the node passes it): the same name
    with other bytes (its old size and mtime kept) is another key."""
    import os

    from engines.common.fingerprint import named_files

    folders = [tmp_path / "text_encoders", tmp_path / "vae", tmp_path / "input"]
    for folder, name in zip(folders, ("te.safetensors", "vae.safetensors", "dress.png")):
        folder.mkdir()
        (folder / name).write_bytes(f"{name}, release one".encode().ljust(5000, b"."))

    def key():
        return CC.node_key(H3_GRAPH, "32", "a blue dress", None, SHAPES, CANVAS,
                           identify=lambda text: named_files(text, folders))

    base = key()
    assert key() == base and base != _node_key()
    path = folders[0] / "te.safetensors"
    st = path.stat()
    path.write_bytes(b"te.safetensors, release two".ljust(st.st_size, b"."))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert key() != base
