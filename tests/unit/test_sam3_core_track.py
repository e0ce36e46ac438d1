"""Core's SAM3_TRACK_DATA (bit-packed per-object masks at model resolution) -> the pack's masks."""
import pytest
import torch

from engines.common.errors import InputError
from engines.sam3.core_track import pack_bits, parse_groups, track_data_to_masks, unpack_bits


def core_track_data(frames=3, model_size=16, orig=(32, 48)):
    """Shaped like core's SAM3_VideoTrack output: object 0 on the left half, object 1 (appearing on frame 1) at
    the bottom right, packed 8 columns per byte, least significant bit first."""
    masks = torch.zeros(frames, 2, model_size, model_size, dtype=torch.bool)
    masks[:, 0, :, : model_size // 2] = True
    masks[1:, 1, model_size // 2:, model_size * 3 // 4:] = True
    return {"packed_masks": pack_bits(masks), "n_frames": frames, "scores": [0.9, 0.8], "orig_size": orig}, masks


def test_bit_order_matches_core():
    row = torch.zeros(1, 16, dtype=torch.bool)
    row[0, 0] = True      # column 0 -> bit 0 of byte 0
    row[0, 9] = True      # column 9 -> bit 1 of byte 1
    assert pack_bits(row).tolist() == [[1, 2]]
    assert torch.equal(unpack_bits(torch.tensor([[1, 2]], dtype=torch.uint8)), row)
    rand = torch.rand(2, 3, 8, 24) > 0.5
    assert torch.equal(unpack_bits(pack_bits(rand)), rand)


def test_union_and_groups_at_original_size():
    data, _ = core_track_data()
    union, masks = track_data_to_masks(data, parse_groups("1\n0\n0, 1"))
    assert union.shape == (3, 32, 48) and union.dtype == torch.float32
    assert set(union.unique().tolist()) == {0.0, 1.0}
    left, right = masks[1], masks[0]
    assert left[:, :, :24].min() == 1 and left[:, :, 24:].max() == 0          # object 0: left half
    assert right[0].sum() == 0 and right[1:, 16:, 36:].min() == 1            # object 1 appears on frame 1
    assert torch.equal(masks[2], union) and masks[3].sum() == 0


def test_default_groups_are_objects_in_turn_and_missing_objects_are_empty():
    data, _ = core_track_data()
    union, masks = track_data_to_masks(data, parse_groups(""))
    assert masks[0].sum() > 0 and masks[1].sum() > 0
    assert masks[2].sum() == 0 and masks[3].sum() == 0     # only two objects tracked
    assert torch.equal(union, torch.maximum(masks[0], masks[1]))


def test_nothing_tracked_gives_zero_masks():
    union, masks = track_data_to_masks({"packed_masks": None, "n_frames": 4, "scores": [], "orig_size": (8, 8)},
                                       parse_groups(""))
    assert union.shape == (4, 8, 8) and union.sum() == 0 and all(m.sum() == 0 for m in masks)


@pytest.mark.parametrize("bad, match", [
    ("not a dict", "track_data: expected core's SAM3_TRACK_DATA"),
    ({"masks": 1}, "track_data"),
    ({"packed_masks": torch.zeros(2, 1, 4, 2), "orig_size": (8, 8)}, "uint8"),
    ({"packed_masks": None, "n_frames": 0, "orig_size": (8, 8)}, "at least one frame"),
    ({"packed_masks": None, "n_frames": 2, "orig_size": "big"}, "orig_size"),
])
def test_bad_track_data_is_refused(bad, match):
    with pytest.raises(InputError, match=match):
        track_data_to_masks(bad, parse_groups(""))


def test_bad_groups_are_refused():
    with pytest.raises(InputError, match="object_groups.*'x' on line 2"):
        parse_groups("0\nx")
    with pytest.raises(InputError, match="object_groups"):
        parse_groups("0\n1\n2\n3\n4")
    assert parse_groups("0,2\n\n1") == [[0, 2], None, [1], None]
