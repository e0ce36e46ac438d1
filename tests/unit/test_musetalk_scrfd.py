"""SCRFD decoding through onnxruntime, on a small ONNX model with SCRFD's exact output layout.

The model "detects" bright 16x16 cells: its stride-16 score is the mean brightness of each cell (two anchors per
cell), every box reaches 2 strides from its anchor and the keypoints sit at fixed offsets. So the expected box for
a bright cell is known exactly, and the test follows it through letterboxing, anchor layout, NMS and scaling back.
"""
import warnings

import numpy as np
import pytest
import torch

from engines.common.errors import InputError
from engines.musetalk import scrfd
from engines.musetalk.face_track import track_faces

KPS = torch.tensor([-0.6, -0.5, 0.6, -0.5, 0.0, 0.1, -0.5, 0.6, 0.5, 0.6])   # eyes, nose, mouth corners (strides)


class BrightCellSCRFD(torch.nn.Module):
    def forward(self, x):
        brightness = x.mean(dim=1, keepdim=True)                                      # [1, 1, H, W] in -1..1
        scores, boxes, kps = [], [], []
        for stride in (8, 16, 32):
            pooled = torch.nn.functional.avg_pool2d(brightness, stride)               # [1, 1, h, w]
            s = torch.sigmoid(12 * (pooled - 0.5)).flatten().repeat_interleave(2)[:, None]
            if stride != 16:
                s = s * 0
            n = s.shape[0]
            scores.append(s)
            boxes.append(torch.full((n, 4), 2.0) + 0 * s)
            kps.append(KPS.expand(n, 10) + 0 * s)
        return (*scores, *boxes, *kps)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("scrfd") / "scrfd_test.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(BrightCellSCRFD(), torch.zeros(1, 3, 160, 160), str(path), dynamo=False,
                          input_names=["input.1"])
    return path


def _frame_with_bright_cell(cell_x, cell_y, scale):
    """A 320x240 frame (scale 0.5 into the 160x160 input) dark except one input cell of 16x16."""
    frame = np.zeros((240, 320, 3), np.uint8)
    x0, y0 = int(cell_x * 16 / scale), int(cell_y * 16 / scale)
    frame[y0:y0 + int(16 / scale), x0:x0 + int(16 / scale)] = 255
    return frame


def test_anchor_layout_matches_scrfd():
    c = scrfd.anchor_centres(2, 3, 8, 2)
    assert c.tolist() == [[0, 0], [0, 0], [8, 0], [8, 0], [16, 0], [16, 0], [0, 8], [0, 8], [8, 8], [8, 8],
                          [16, 8], [16, 8]]


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], np.float32)
    assert scrfd.nms(boxes, np.array([0.9, 0.95, 0.5]), 0.4) == [1, 2]


def test_detector_decodes_boxes_and_keypoints_back_to_frame_pixels(model_path):
    det = scrfd.ScrfdDetector(model_path)
    assert (det.input_h, det.input_w) == (160, 160)
    out = det(_frame_with_bright_cell(4, 3, 0.5))
    assert out.shape == (1, 5) and out[0, 4] > 0.9
    # raw box in input pixels: anchor (64, 48) +- 32 -> frame pixels / 0.5
    raw, _, kps = scrfd.decode(det.session.run(None, {det.input_name: np.zeros((1, 3, 160, 160), np.float32) + 1}),
                               160, 160, 0.5)
    assert raw.shape[1] == 4 and kps.shape[1:] == (5, 2)
    expected = scrfd.frontal_box(np.array([64, 32, 192, 160], np.float32),
                                 (np.array([64, 48]) + KPS.numpy().reshape(5, 2) * 16) / 0.5)
    assert np.allclose(out[0, :4], expected, atol=1e-3)
    # the frontal box puts the eye line and the mouth line where a Haar box has them
    eyes_y, mouth_y = (48 - 0.5 * 16) / 0.5, (48 + 0.6 * 16) / 0.5
    h = out[0, 3] - out[0, 1]
    assert (eyes_y - out[0, 1]) / h == pytest.approx(scrfd.EYE_LINE, abs=1e-4)
    assert (mouth_y - out[0, 1]) / h == pytest.approx(scrfd.MOUTH_LINE, abs=1e-4)


def test_no_detection_gives_an_empty_array(model_path):
    assert scrfd.ScrfdDetector(model_path)(np.zeros((240, 320, 3), np.uint8)).shape == (0, 5)


def test_detector_drives_the_face_track(model_path):
    frames = torch.stack([torch.from_numpy(_frame_with_bright_cell(4 + k, 3, 0.5)).float() / 255 for k in range(3)])
    track = track_faces(frames, scrfd.ScrfdDetector(model_path), every=2, proxy_size=0, method="scrfd")
    assert track.method == "scrfd" and track.found.tolist() == [True, False, True]
    centres = (track.boxes[:, 0] + track.boxes[:, 2]) / 2
    assert torch.allclose(centres, torch.tensor([128.0, 160.0, 192.0]), atol=1e-3)


def test_unreadable_model_is_an_input_error(tmp_path):
    bad = tmp_path / "scrfd_bad.onnx"
    bad.write_bytes(b"not an onnx file")
    with pytest.raises(InputError, match="detector"):
        scrfd.ScrfdDetector(bad)
