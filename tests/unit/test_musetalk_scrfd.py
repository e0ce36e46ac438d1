"""SCRFD decoding through onnxruntime, on a small ONNX model with SCRFD's exact output layout.

The model "detects" bright 16x16 cells: its stride-16 score is the mean brightness of each cell (two anchors per
cell), every box reaches 2 strides from its anchor and the keypoints sit at fixed offsets. So the expected box for
a bright cell is known exactly, and the test follows it through letterboxing, anchor layout, NMS and scaling back.
"""
import numpy as np
import pytest
import torch

from engines.common.errors import InputError
from engines.common.scrfd import decode
from engines.musetalk import scrfd
from engines.musetalk.face_track import track_faces
from tests.fixtures.tiny_musetalk import SCRFD_KPS as KPS, bright_cell_frame, write_test_scrfd

@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return write_test_scrfd(tmp_path_factory.mktemp("scrfd") / "scrfd_test.onnx")


def _frame_with_bright_cell(cell_x, cell_y, scale):
    assert scale == 0.5
    return bright_cell_frame(cell_x, cell_y)


def test_detector_decodes_boxes_and_keypoints_back_to_frame_pixels(model_path):
    det = scrfd.ScrfdDetector(model_path)
    assert (det.input_h, det.input_w) == (160, 160)
    out = det(_frame_with_bright_cell(4, 3, 0.5))
    assert out.shape == (1, 5) and out[0, 4] > 0.9
    # raw box in input pixels: anchor (64, 48) +- 32 -> frame pixels / 0.5
    raw, _, kps = decode(det.session.run(None, {det.input_name: np.zeros((1, 3, 160, 160), np.float32) + 1}),
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
