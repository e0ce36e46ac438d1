"""engines.common.model_files: folders checked before loading; tensors only via safetensors or weights_only."""
from __future__ import annotations

import pickle

import pytest
import torch
from safetensors.torch import save_file

from engines.common.errors import InputError, ModelFilesMissing
from engines.common.model_files import load_state_dict, require_files


class _Payload:
    """A pickled object that would run code (create a file) when unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_require_files_accepts_a_complete_folder(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    assert require_files(tmp_path, ["config.json", ("model.safetensors", "pytorch_model.bin")]) == tmp_path


def test_require_files_names_every_missing_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelFilesMissing) as info:
        require_files(tmp_path, ["config.json", "unet.safetensors", ("a.pth", "a.safetensors")], "model_name")
    assert info.value.missing == ["unet.safetensors", "a.pth or a.safetensors"]
    assert str(tmp_path) in str(info.value) and str(info.value).startswith("model_name: ")


def test_require_files_missing_folder(tmp_path):
    with pytest.raises(ModelFilesMissing) as info:
        require_files(tmp_path / "nope", ["config.json"])
    assert "does not exist" in str(info.value)


def test_loads_safetensors_and_weights_only_torch_files(tmp_path):
    weights = {"w": torch.randn(3, 3), "b": torch.zeros(3)}
    save_file(weights, str(tmp_path / "m.safetensors"))
    torch.save({"state_dict": weights}, tmp_path / "m.pth")
    for name in ("m.safetensors", "m.pth"):
        loaded = load_state_dict(tmp_path / name)
        assert set(loaded) == {"w", "b"} and torch.equal(loaded["w"], weights["w"])


def test_refuses_a_pickle_that_is_not_weights_only_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pth"
    with open(path, "wb") as f:
        pickle.dump({"w": _Payload(marker)}, f)
    with pytest.raises(InputError) as info:
        load_state_dict(path)
    assert "evil.pth" in str(info.value) and "weights_only" in str(info.value)
    assert not marker.exists(), "the pickle's code ran"
    # the same through torch.save's zip format
    torch.save({"w": torch.ones(1), "obj": _Payload(marker)}, tmp_path / "evil_zip.pt")
    with pytest.raises(InputError):
        load_state_dict(tmp_path / "evil_zip.pt")
    assert not marker.exists()


def test_refuses_a_torch_file_that_is_not_a_state_dict(tmp_path):
    torch.save([torch.ones(1)], tmp_path / "list.pt")
    with pytest.raises(InputError) as info:
        load_state_dict(tmp_path / "list.pt")
    assert "state dict" in str(info.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ModelFilesMissing) as info:
        load_state_dict(tmp_path / "absent.safetensors")
    assert "absent.safetensors" in str(info.value)
