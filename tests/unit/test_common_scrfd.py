"""engines/common/scrfd.py: the anchor layout, the two NMS box rules and the channel order of the input blob."""
import numpy as np
import pytest

from engines.common import scrfd


def test_anchor_layout_matches_scrfd():
    c = scrfd.anchor_centres(2, 3, 8, 2)
    assert c.tolist() == [[0, 0], [0, 0], [8, 0], [8, 0], [16, 0], [16, 0], [0, 8], [0, 8], [8, 8], [8, 8],
                          [16, 8], [16, 8]]


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], np.float32)
    assert scrfd.nms(boxes, np.array([0.9, 0.95, 0.5]), 0.4) == [1, 2]


def test_pixel_inclusive_rule_changes_a_near_threshold_overlap():
    # Two 3x3 boxes shifted by 1: continuous IoU 6/12 = 0.5; counted +1 pixel: 12/20 = 0.6.
    boxes = np.array([[0, 0, 3, 3], [1, 0, 4, 3]], np.float32)
    scores = np.array([0.9, 0.8], np.float32)
    assert scrfd.nms(boxes, scores, 0.55) == [0, 1]
    assert scrfd.nms(boxes, scores, 0.55, pixel_inclusive=True) == [0]


def test_nms_ties_keep_input_order():
    boxes = np.array([[0, 0, 10, 10], [50, 50, 60, 60], [0, 0, 10, 10]], np.float32)
    assert scrfd.nms(boxes, np.array([0.5, 0.5, 0.5]), 0.4) == [0, 1]


def test_blob_normalises_and_orders_channels():
    canvas = np.zeros((2, 2, 3), np.uint8)
    canvas[..., 0] = 255
    rgb, bgr = scrfd.blob(canvas, "rgb"), scrfd.blob(canvas, "bgr")
    assert rgb.shape == (1, 3, 2, 2) and rgb.dtype == np.float32 and rgb.flags["C_CONTIGUOUS"]
    assert rgb[0, 0, 0, 0] == pytest.approx(127.5 / 128) and rgb[0, 2, 0, 0] == pytest.approx(-127.5 / 128)
    assert np.array_equal(bgr[0, ::-1], rgb[0])
    with pytest.raises(ValueError):
        scrfd.blob(canvas, "yuv")
