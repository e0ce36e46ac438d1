"""Face tracking: a real photo moved and scaled into a loop, keyframe interpolation, gaps, masks and boxes."""
import numpy as np
import pytest
import torch

from engines.common.errors import InputError
from engines.musetalk import face_track as ft
from tests.fixtures.tiny_musetalk import astronaut_loop


def _iou(a, b):
    x1, y1 = np.maximum(a[:, 0], b[:, 0]), np.maximum(a[:, 1], b[:, 1])
    x2, y2 = np.minimum(a[:, 2], b[:, 2]), np.minimum(a[:, 3], b[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda r: (r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)


@pytest.fixture(scope="module")
def loop():
    return astronaut_loop(10)


def test_haar_tracks_the_moving_astronaut_on_every_frame(loop):
    frames, truth = loop
    track = ft.track_faces(frames, ft.HaarDetector(), every=3, proxy_size=160)
    assert track.boxes.shape == (10, 4) and (track.width, track.height) == (192, 256)
    assert track.found.tolist() == [k in (0, 3, 6, 9) for k in range(10)]
    assert _iou(track.boxes.numpy(), truth.numpy()).min() > 0.6


def test_the_track_follows_the_face_past_a_larger_false_detection():
    """The broadcast loop (12 frames): from frame 7 on, Haar also fires on the astronaut's suit, a box larger than
    the face. The track must stay on the face the warp put there (the fixture's true boxes), as the broadcast
    graph's Face Track runs it (detect every 5th frame, full size)."""
    frames, truth = astronaut_loop(12)
    dets = ft.HaarDetector()(ft.frame_uint8(frames[10]))
    assert len(dets) == 2, "the fixture no longer has the false detection this test is about"
    track = ft.track_faces(frames, ft.HaarDetector(), every=5, proxy_size=384)
    found = track.found.numpy()
    assert found.tolist() == [k in (0, 5, 10, 11) for k in range(12)]
    assert np.abs(track.boxes.numpy() - truth.numpy())[found].max() < 5.0     # the largest box: 73 px off
    assert _iou(track.boxes.numpy(), truth.numpy()).min() > 0.6               # interpolated frames lag a little


def test_keyframes_include_the_last_frame_off_the_stride():
    assert ft.keyframes(10, 4) == [0, 4, 8, 9]
    assert ft.keyframes(9, 4) == [0, 4, 8]
    assert ft.keyframes(1, 5) == [0]


def test_interpolation_uses_the_real_keyframe_positions():
    """Keyframes 0, 4, 8 and the last frame 9: frame 9 gets its own box, frames 5-7 lie on the 4->8 line."""
    boxes = np.array([[0, 0, 10, 10], [4, 0, 14, 10], [8, 0, 18, 10], [30, 0, 40, 10]], np.float64)
    out = ft.interpolate_boxes([0, 4, 8, 9], boxes, 10)
    assert out[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 30]


def test_frames_without_a_face_are_interpolated_from_the_nearest_hits(loop):
    frames, truth = loop
    frames = frames.clone()
    frames[3:7] = 0.5                                    # a flash frame run: nothing to detect
    track = ft.track_faces(frames, ft.HaarDetector(), every=3, proxy_size=160)
    assert track.found.tolist()[3] is False and track.found.tolist()[6] is False
    b = track.boxes.numpy()
    # between the hits at frames 0 and 9 the boxes move on the straight line
    t = (np.arange(10) / 9.0)[:, None]
    assert np.allclose(b, (1 - t) * b[0] + t * b[9], atol=1e-3)


def test_no_face_anywhere_is_a_clear_error():
    frames = torch.full((4, 64, 64, 3), 0.3)
    with pytest.raises(InputError, match="images.*face"):
        ft.track_faces(frames, ft.HaarDetector(), every=2)


def test_boxes_never_collapse_or_leave_the_frame():
    out = ft.sanitize_boxes(np.array([[5, 5, 5, 5], [-20, -10, 30, 40], [90, 90, 130, 99], [50, 60, 40, 55]]),
                            100, 100)
    w, h = out[:, 2] - out[:, 0], out[:, 3] - out[:, 1]
    assert (w >= ft.MIN_BOX).all() and (h >= ft.MIN_BOX).all()
    assert (out[:, :2] >= 0).all() and (out[:, 2] <= 100).all() and (out[:, 3] <= 100).all()
    assert out[3].tolist() == [40, 53.5, 50, 61.5]   # swapped corners ordered, too-short side grown about its centre


def test_track_from_masks_interpolates_empty_frames():
    masks = torch.zeros(5, 40, 60)
    masks[0, 10:20, 5:15] = 1
    masks[4, 14:24, 25:35] = 1
    track = ft.track_from_masks(masks, 5, 60, 40)
    assert track.method == "mask" and track.found.tolist() == [True, False, False, False, True]
    assert track.boxes[0].tolist() == [5, 10, 15, 20] and track.boxes[4].tolist() == [25, 14, 35, 24]
    assert track.boxes[2].tolist() == [15, 12, 25, 22]


def test_mask_errors_name_the_mask():
    with pytest.raises(InputError, match="mask.*40x60"):
        ft.track_from_masks(torch.zeros(5, 30, 60), 5, 60, 40)
    with pytest.raises(InputError, match="mask.*empty"):
        ft.track_from_masks(torch.zeros(1, 40, 60), 5, 60, 40)


def test_fixed_box_and_its_parsing():
    track = ft.track_from_box(ft.parse_box("10, 20, 50 ,70"), 3, 100, 100)
    assert track.boxes.tolist() == [[10, 20, 50, 70]] * 3
    for bad in ("1,2,3", "a,b,c,d", "50,20,10,70"):
        with pytest.raises(InputError, match="box"):
            ft.parse_box(bad)


def test_preview_draws_found_and_interpolated_boxes(loop):
    frames, _ = loop
    track = ft.track_faces(frames, ft.HaarDetector(), every=3, proxy_size=160)
    shown = ft.preview(frames, track, count=4, max_side=128)
    assert shown.shape == (4, 128, 96, 3)
    x1, y1, x2, y2 = (track.boxes[0] * 0.5).round().long().tolist()
    assert shown[0, y1, x1 + 3].tolist() == pytest.approx([0.1, 1.0, 0.1])          # frame 0: found, green
    track_gap = ft.FaceTrack(track.boxes, torch.zeros(10, dtype=torch.bool), 192, 256, "haar")
    yellow = ft.preview(frames, track_gap, count=1, max_side=128)[0, y1, x1 + 3]      # interpolated: yellow
    assert yellow.tolist() == pytest.approx([1.0, 0.9, 0.1])
