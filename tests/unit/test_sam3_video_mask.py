"""The masking loop with a deterministic stand-in model: schedule, propagation, outputs, bad inputs, cleanup."""
import pytest
import torch

from engines.common.errors import InputError
from engines.common.progress import Progress
from engines.sam3.schedule import detection_frames
from engines.sam3.segmenter import MaskSettings
from engines.sam3.video_mask import parse_prompts, segment_video
from tests.fixtures.sam3_standin import Scripted, StandInSegmenter

H, W = 32, 48   # frame size; the stand-in's logits are 16 x 16, so the loop must resize them


def frames(n=10):
    return torch.rand(n, H, W, 3, generator=torch.Generator().manual_seed(0))


def run(objects, prompts="dress", n=10, **settings):
    seg = StandInSegmenter(objects)
    result = segment_video(seg, frames(n), prompts, MaskSettings(**settings))
    return seg, result


@pytest.mark.parametrize("n, interval", [(10, 4), (9, 4), (7, 3), (5, 1), (6, 10)])
def test_segmenter_follows_the_schedule(n, interval):
    seg, result = run([Scripted("dress")], n=n, detect_interval=interval)
    detected = [i for kind, i in seg.calls if kind == "detect"]
    assert detected == detection_frames(n, interval)
    assert [i for _, i in seg.calls] == list(range(n))
    assert result.detections == len(detected) and result.propagations == n - len(detected)


def test_propagation_carries_tracks_but_never_detects():
    # The hands appear on frame 1, between detections (0, 4, 8, 9): propagation must not find them before frame 4.
    seg, result = run([Scripted("dress"), Scripted("hands", appears=1, row=10)], prompts="dress\nhands",
                      detect_interval=4)
    dress, hands = result.masks[0], result.masks[1]
    assert all(dress[i].sum() > 0 for i in range(10))            # tracked from frame 0 through propagation
    assert [i for i in range(10) if hands[i].sum() > 0] == [4, 5, 6, 7, 8, 9]
    # With detection on every frame the hands are found as soon as they appear.
    _, every = run([Scripted("dress"), Scripted("hands", appears=1, row=10)], prompts="dress\nhands",
                   detect_interval=1)
    assert [i for i in range(10) if every.masks[1][i].sum() > 0] == list(range(1, 10))


def test_propagated_masks_follow_the_track():
    _, result = run([Scripted("dress", size=4)], n=5, detect_interval=4)
    # The square moves one low-res cell (3 px at 48 px wide) to the right per frame.
    first_cols = [int(result.masks[0][i].nonzero()[:, 1].min()) for i in range(5)]
    assert first_cols == sorted(first_cols) and first_cols[0] < first_cols[-1]


def test_shapes_types_and_per_prompt_outputs():
    _, result = run([Scripted("dress", row=0), Scripted("hands", row=10)], prompts="dress\nhands")
    assert result.union.shape == (10, H, W) and result.union.dtype == torch.float32
    assert len(result.masks) == 4
    for mask in result.masks:
        assert mask.shape == (10, H, W) and mask.dtype == torch.float32
        assert set(mask.unique().tolist()) <= {0.0, 1.0}
    dress, hands, unused3, unused4 = result.masks
    assert dress.sum() > 0 and hands.sum() > 0
    assert (dress * hands).sum() == 0                       # different squares
    assert torch.equal(result.union, torch.maximum(dress, hands))
    assert unused3.sum() == 0 and unused4.sum() == 0
    assert result.object_prompts == {0: 0, 1: 1}
    # Logits are 16 x 16 for a 32 x 48 frame: a 4-cell square is 8 px tall after resizing.
    rows = dress[0].nonzero()[:, 0]
    assert int(rows.max() - rows.min() + 1) == 8


def test_blank_and_repeated_prompt_lines_keep_their_positions():
    seg, result = run([Scripted("dress"), Scripted("hands", row=10)], prompts="dress\n\nhands\ndress")
    assert seg.prompts == ["dress", "hands"]                # the model sees each prompt once
    m1, m2, m3, m4 = result.masks
    assert m2.sum() == 0
    assert torch.equal(m1, m4) and m1.sum() > 0
    assert m3.sum() > 0 and (m1 * m3).sum() == 0


def test_per_object_output_and_max_objects():
    objects = [Scripted("hands", row=0), Scripted("hands", row=6), Scripted("hands", row=12)]
    _, per_prompt = run(objects, prompts="hands", output_mode="per prompt")
    _, per_object = run(objects, prompts="hands", output_mode="per object")
    assert torch.equal(per_prompt.masks[0], per_prompt.union)
    assert all(per_object.masks[k].sum() > 0 for k in range(3)) and per_object.masks[3].sum() == 0
    assert torch.equal(per_object.union, per_prompt.union)
    assert (per_object.masks[0] * per_object.masks[1]).sum() == 0
    _, capped = run(objects, prompts="hands", output_mode="per object", max_objects=2)
    assert capped.masks[2].sum() == 0 and len(capped.object_prompts) == 2
    assert torch.equal(capped.union, torch.maximum(capped.masks[0], capped.masks[1]))


def test_mask_threshold_is_a_probability():
    class Graded(StandInSegmenter):
        def _masks(self, frame_idx):
            out = super()._masks(frame_idx)
            ramp = torch.linspace(-4, 4, 16).repeat(16, 1)    # probability rises left to right
            return [type(o)(o.obj_id, o.prompt_index, ramp, o.score) for o in out]

    areas = []
    for threshold in (0.2, 0.5, 0.9):
        seg = Graded([Scripted("dress")])
        areas.append(segment_video(seg, frames(2), "dress", MaskSettings(mask_threshold=threshold)).union.sum())
    assert areas[0] > areas[1] > areas[2] > 0


def test_progress_per_frame_and_cancel_closes_the_segmenter():
    steps = []
    seg = StandInSegmenter([Scripted("dress")])
    segment_video(seg, frames(6), "dress", progress=Progress(0, on_update=lambda d, t: steps.append((d, t))))
    assert [s for s in steps if s[0] > 0] == [(i, 6) for i in range(1, 7)]
    assert seg.closed

    class Cancelled(Exception):
        pass

    def cancel_after_three():
        if len([c for c in seg2.calls]) >= 3:
            raise Cancelled()

    seg2 = StandInSegmenter([Scripted("dress")])
    with pytest.raises(Cancelled):
        segment_video(seg2, frames(8), "dress", progress=Progress(0, check_cancel=cancel_after_three))
    assert len(seg2.calls) == 3 and seg2.closed


def test_segmenter_error_still_closes():
    class Broken(StandInSegmenter):
        def propagate(self, frame_idx, frame):
            raise RuntimeError("boom")

    seg = Broken([Scripted("dress")])
    with pytest.raises(RuntimeError, match="boom"):
        segment_video(seg, frames(4), "dress")
    assert seg.closed


@pytest.mark.parametrize("prompts", ["", "\n  \n", "   "])
def test_empty_prompt_is_refused(prompts):
    seg = StandInSegmenter([])
    with pytest.raises(InputError, match="prompts: expected at least one text prompt"):
        segment_video(seg, frames(2), prompts)
    assert not seg.started


def test_too_many_prompt_lines_are_refused_not_dropped():
    with pytest.raises(InputError, match="line 5"):
        parse_prompts("a\nb\nc\nd\ne")
    assert parse_prompts("a\n\nc\n\n") == ["a", None, "c"]


def test_zero_frames_are_refused():
    seg = StandInSegmenter([])
    with pytest.raises(InputError, match="images: expected at least one frame, got 0 frames"):
        segment_video(seg, torch.zeros(0, H, W, 3), "dress")
    with pytest.raises(InputError, match="0 frames"):
        segment_video(seg, [], "dress")
    assert not seg.started


def test_mixed_frame_sizes_are_refused():
    seg = StandInSegmenter([])
    clip = [torch.zeros(H, W, 3), torch.zeros(H, W, 3), torch.zeros(H + 2, W, 3)]
    with pytest.raises(InputError, match="images: .*frame 2 of 48x34"):
        segment_video(seg, clip, "dress")
    assert not seg.started


def test_bad_shapes_and_settings_name_the_input():
    seg = StandInSegmenter([])
    with pytest.raises(InputError, match="images"):
        segment_video(seg, torch.zeros(4, H, W), "dress")
    with pytest.raises(InputError, match="detect_interval"):
        segment_video(seg, frames(2), "dress", MaskSettings(detect_interval=0))
    with pytest.raises(InputError, match="mask_threshold"):
        segment_video(seg, frames(2), "dress", MaskSettings(mask_threshold=1.5))
    with pytest.raises(InputError, match="max_objects"):
        segment_video(seg, frames(2), "dress", MaskSettings(max_objects=-1))
    with pytest.raises(InputError, match="output_mode"):
        segment_video(seg, frames(2), "dress", MaskSettings(output_mode="both"))
    assert not seg.started


def test_list_of_frames_and_alpha_channel_accepted():
    seg = StandInSegmenter([Scripted("dress")])
    clip = [torch.rand(H, W, 4) for _ in range(3)]
    result = segment_video(seg, clip, "dress")
    assert result.union.shape == (3, H, W) and result.union.sum() > 0
