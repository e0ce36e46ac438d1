"""engines/common: SLERP (both callers' arithmetic), the file fingerprint and the ONNX provider rule."""
import math

import pytest
import torch

from engines.common.fingerprint import file_fingerprint
from engines.common.onnx import providers_for
from engines.common.slerp import slerp


def test_slerp_endpoints_midpoint_and_norm():
    a = torch.tensor([[1.0, 0.0]])
    b = torch.tensor([[0.0, 2.0]])
    assert torch.allclose(slerp(a, b, torch.tensor([0.0])), a)
    assert torch.allclose(slerp(a, b, torch.tensor([1.0])), b)
    mid = slerp(a, b, 0.5)
    assert mid[0].norm().item() == pytest.approx(1.5)              # norm blended linearly
    assert math.atan2(mid[0, 1], mid[0, 0]) == pytest.approx(math.pi / 4)   # direction on the arc


def test_slerp_linear_rules_and_dtypes():
    a = torch.tensor([[1.0, 0.0]], dtype=torch.float16)
    b = torch.tensor([[1.0, 1e-3]], dtype=torch.float16)   # nearly parallel: cos > 0.9995
    out = slerp(a, b, 0.5, dtype=torch.float32, linear_above_cos=0.9995, linear_below_sin=0.0, eps=1e-7,
                out_dtype=torch.float32)
    assert out.dtype == torch.float32
    assert slerp(a, b, 0.5).dtype == torch.float16           # default: a's dtype
    anti = slerp(torch.tensor([[1.0, 0.0]]), torch.tensor([[-1.0, 0.0]]), 0.25)
    assert torch.isfinite(anti).all()                         # antipodal: linear, not a division by ~0


def test_file_fingerprint_changes_with_content_and_name(tmp_path):
    a = tmp_path / "a.bin"
    a.write_bytes(b"x" * 200_000)
    first = file_fingerprint([a])
    assert file_fingerprint([a]) == first
    a.write_bytes(b"x" * 199_999 + b"y")                      # last byte
    assert file_fingerprint([a]) != first
    b = tmp_path / "b.bin"
    b.write_bytes(a.read_bytes())
    assert file_fingerprint([b]) != file_fingerprint([a])
    assert file_fingerprint([a, b]) == file_fingerprint([b, a])  # order of the list does not matter


def test_safetensors_header_is_part_of_the_fingerprint(tmp_path):
    head = b'{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    other = b'{"u":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    body = b"\0" * 300_000
    f = tmp_path / "m.safetensors"
    f.write_bytes(len(head).to_bytes(8, "little") + head + body)
    one = file_fingerprint([f], edge_bytes=8)                 # edges miss the header: only the header tells
    f.write_bytes(len(other).to_bytes(8, "little") + other + body)
    assert file_fingerprint([f], edge_bytes=8) != one


def test_onnx_uses_cuda_only_for_a_cuda_device():
    pytest.importorskip("onnxruntime")
    assert providers_for(None) == ["CPUExecutionProvider"]
    assert providers_for(torch.device("cpu")) == ["CPUExecutionProvider"]
    assert providers_for(torch.device("cuda"))[-1] == "CPUExecutionProvider"
