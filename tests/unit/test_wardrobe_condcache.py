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
    key = CC.conditioning_key("a prompt", "te.safetensors", torch.rand(1, 8, 8, 3))
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
    base = CC.conditioning_key("p", "te", ref, small)
    assert base == CC.conditioning_key("p", "te", ref.clone(), CC.latent_shapes({"samples": torch.ones(1, 24, 7, 4, 6)}))
    assert base == CC.conditioning_key("p", "te", ref, [(1, 24, 7, 4, 6)])
    others = {CC.conditioning_key("q", "te", ref, small), CC.conditioning_key("p", "te2", ref, small),
              CC.conditioning_key("p", "te", ref * 0.5, small), CC.conditioning_key("p", "te", ref, big),
              CC.conditioning_key("p", "te", None, small), CC.conditioning_key("p", "te", ref, CC.latent_shapes(None))}
    assert base not in others and len(others) == 6


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
    assert CC.conditioning_key("p", "", None, CC.latent_shapes(a)) != CC.conditioning_key("p", "", None,
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
