"""Face detection, landmarks and the 512 crop against upstream's own modules (antgroup/ditto-talkinghead e9191cf:
aux_models/modules/{retinaface,landmark106,landmark203}.py, utils/crop.py), recorded on the tiny ONNX face models
of tests/fixtures/tiny_ditto.py (seed 0) and the same image (tests/data/ditto_upstream_face.json)."""
import json
from pathlib import Path

import numpy as np
import pytest

from engines.ditto import crop
from engines.ditto.face import FaceLandmarker
from engines.common.onnx import onnx_session
from tests.fixtures.tiny_ditto import build_tiny_ditto, portrait

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "ditto_upstream_face.json").read_text())


def sample_frame() -> np.ndarray:
    """A 600x420 frame (not square: exercises the detector's letterbox) with the synthetic face off-centre."""
    img = np.full((600, 420, 3), 20, np.uint8)
    face = (portrait(height=320, width=256)[0].numpy() * 255).round().astype(np.uint8)
    img[150:470, 100:356] = face
    return img


@pytest.fixture(scope="module")
def landmarker(tmp_path_factory):
    aux = build_tiny_ditto(tmp_path_factory.mktemp("ditto") / "tiny") / "ditto_pytorch/aux_models"
    return FaceLandmarker(onnx_session(aux / "det_10g.onnx"), onnx_session(aux / "2d106det.onnx"),
                          onnx_session(aux / "landmark203.onnx"))


def test_detection_matches_upstream(landmarker):
    dets = landmarker.detect(sample_frame())
    np.testing.assert_allclose(dets, np.array(REFERENCE["dets"]), rtol=1e-5, atol=1e-3)


def test_landmarks_and_crop_match_upstream(landmarker):
    img = sample_frame()
    box = np.array(REFERENCE["dets"])[0]
    p106 = landmarker.landmarks106(img, box)
    np.testing.assert_allclose(p106, np.array(REFERENCE["lmk106"]), rtol=1e-5, atol=1e-3)
    p203 = landmarker(img)
    np.testing.assert_allclose(p203, np.array(REFERENCE["lmk203"]), rtol=1e-5, atol=2e-3)
    m_c2o = np.linalg.inv(crop.crop_transform(p203, 512, 2.3, -0.125))
    np.testing.assert_allclose(m_c2o, np.array(REFERENCE["m_c2o"]), rtol=1e-4, atol=1e-3)
