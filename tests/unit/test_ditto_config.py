"""The config pickle is read through a restricted unpickler; model folders are checked before anything loads."""
import os
import pickle
import shutil

import numpy as np
import pytest
import torch

from engines.common.errors import InputError, ModelFilesMissing
from engines.ditto import config as cfg
from engines.ditto import loader
from tests.fixtures.tiny_ditto import build_tiny_ditto, tiny_config


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_restricted_unpickler_refuses_os_system(tmp_path):
    marker = tmp_path / "pwned"
    data = pickle.dumps({"base_cfg": {}, "x": _Evil(marker)})
    with pytest.raises(cfg.RefusedGlobal) as info:
        cfg.restricted_loads(data)
    assert info.value.global_name in ("posix.system", "nt.system", "os.system")
    assert not marker.exists()
    path = tmp_path / "evil.pkl"
    path.write_bytes(data)
    with pytest.raises(InputError, match="system"):
        cfg.load_config(path)
    assert not marker.exists()


def test_builtins_and_numpy_arrays_load():
    value = {"a": [1, 2.5, "s", None, True], "t": (1, 2), "arr": np.arange(6, dtype=np.float32).reshape(2, 3)}
    back = cfg.restricted_loads(pickle.dumps(value, protocol=4))
    np.testing.assert_array_equal(back["arr"], value["arr"])
    assert back["a"] == value["a"] and back["t"] == (1, 2)


def test_tiny_config_reads(tmp_path):
    path = tmp_path / "c.pkl"
    path.write_bytes(pickle.dumps(tiny_config()))
    c = cfg.load_config(path)
    assert c.audio2motion["seq_frames"] == 20 and c.defaults["overlap_v2"] == 5
    assert c.model_paths["decoder_cfg"] == "decoder.pth"
    assert c.defaults["delta_eye_arr"].shape == (15, 63)


@pytest.mark.parametrize("bad, match", [
    ([1, 2, 3], "base_cfg"),
    ({"base_cfg": {}, "audio2motion_cfg": {"motion_feat_dim": 128}}, "265"),
    ({"base_cfg": {}, "audio2motion_cfg": {"seq_frames": "eighty"}}, "seq_frames"),
])
def test_wrong_config_is_a_clear_error(tmp_path, bad, match):
    path = tmp_path / "bad.pkl"
    path.write_bytes(pickle.dumps(bad))
    with pytest.raises(InputError, match=match):
        cfg.load_config(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_ditto(tmp_path_factory.mktemp("ditto") / "tiny")


def test_missing_files_are_named(tiny, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(tiny, folder)
    (folder / "ditto_pytorch/models/decoder.pth").unlink()
    (folder / "ditto_pytorch/aux_models/det_10g.onnx").unlink()
    with pytest.raises(ModelFilesMissing) as info:
        loader.resolve_files(folder)
    msg = str(info.value)
    assert "ditto_pytorch/models/decoder.pth" in msg and "ditto_pytorch/aux_models/det_10g.onnx" in msg


def test_mismatched_weights_are_named(tiny, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(tiny, folder)
    shutil.copy(folder / "ditto_pytorch/models/warp_network.pth", folder / "ditto_pytorch/models/decoder.pth")
    files = loader.resolve_files(folder)
    with pytest.raises(InputError, match="decoder.pth"):
        loader.load_networks(files)


def test_tiny_networks_load_strictly(tiny):
    nets = loader.load_networks(loader.resolve_files(tiny))
    assert nets.lmdm.seq_len == 20
    assert all(not p.requires_grad for p in nets.parameters())
    # the decoder's folded weight equals weight_orig / sigma
    conv = nets.decoder.G_middle_0.conv_0
    w = conv.weight_orig
    sigma = torch.dot(conv.weight_u, w.reshape(w.shape[0], -1) @ conv.weight_v)
    torch.testing.assert_close(conv.weight, w / sigma)
