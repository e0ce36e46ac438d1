"""engines.common.onnx: a CUDA device that ends up on the CPU is said once, never silently."""
import logging

import onnxruntime as ort
import pytest
import torch

from engines.common import onnx as onnx_mod


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(onnx_mod, "_SAID", set())


def test_cpu_device_uses_the_cpu_without_a_word(caplog):
    with caplog.at_level(logging.WARNING, logger="broadcast_avatar"):
        assert onnx_mod.providers_for(torch.device("cpu")) == ["CPUExecutionProvider"]
    assert caplog.records == []


def test_cuda_device_without_the_cuda_provider_is_said_once(monkeypatch, caplog):
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with caplog.at_level(logging.WARNING, logger="broadcast_avatar"):
        for _ in range(3):
            assert onnx_mod.providers_for(torch.device("cuda", 0)) == ["CPUExecutionProvider"]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "onnxruntime-gpu" in said[0] and "cuda:0" in said[0]


def test_cuda_provider_that_fails_to_start_is_said_once(monkeypatch, caplog, tmp_path):
    class Session:  # what onnxruntime gives when CUDA cannot start: a session on the CPU provider only
        def __init__(self, path, sess_options=None, providers=None):
            assert providers[0] == "CUDAExecutionProvider"

        def get_providers(self):
            return ["CPUExecutionProvider"]

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(ort, "InferenceSession", Session)
    with caplog.at_level(logging.WARNING, logger="broadcast_avatar"):
        for _ in range(2):
            onnx_mod.onnx_session(tmp_path / "face.onnx", torch.device("cuda"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "could not start its CUDA provider for face.onnx" in said[0]
