"""The tiny SAM3 video model in the real folder layout, loaded offline through transformers and run by the loop."""
import os
import socket

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from engines.common.errors import InputError, ModelFilesMissing
from engines.sam3.hf_video import TransformersSegmenter, check_folder, load_sam3_video
from engines.sam3.segmenter import MaskSettings
from engines.sam3.video_mask import segment_video
from tests.fixtures.tiny_sam3 import install_tiny_sam3

OPEN = MaskSettings(detection_threshold=0.0, detect_interval=4, max_objects=4)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny model's ops are too small to gain from threads; on a shared CPU extra threads only spin."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return install_tiny_sam3(tmp_path_factory.mktemp("models"))


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_loads_offline_and_masks_a_clip(tiny_folder, no_network):
    bundle = load_sam3_video(tiny_folder)
    saved = (bundle.model.score_threshold_detection, bundle.model.new_det_thresh, bundle.model.max_num_objects)
    frames = torch.rand(6, 40, 64, 3, generator=torch.Generator().manual_seed(0))
    seg = TransformersSegmenter(bundle)
    result = segment_video(seg, frames, "dress\nhands", OPEN)
    assert seg.detector_calls == 3 and result.detections == 3 and result.propagations == 3   # frames 0, 4, 5
    assert result.union.shape == (6, 40, 64) and result.union.dtype == torch.float32
    assert set(result.union.unique().tolist()) <= {0.0, 1.0}
    assert result.union[0].sum() > 0                        # open thresholds: the random model finds something
    assert all(result.union[i].sum() > 0 for i in (1, 2, 3))    # and propagation keeps it
    assert len(result.masks) == 4 and result.masks[2].sum() == 0 and result.masks[3].sum() == 0
    for k in range(2):
        assert (result.masks[k] <= result.union).all()
    assert set(result.object_prompts.values()) <= {0, 1}
    # Per-run settings are restored and the session (memory bank, frames) is gone.
    assert (bundle.model.score_threshold_detection, bundle.model.new_det_thresh,
            bundle.model.max_num_objects) == saved
    assert seg.session is None


def test_interval_one_detects_every_frame(tiny_folder):
    bundle = load_sam3_video(tiny_folder)
    seg = TransformersSegmenter(bundle)
    frames = torch.rand(3, 32, 32, 3, generator=torch.Generator().manual_seed(1))
    result = segment_video(seg, frames, "dress", MaskSettings(detection_threshold=0.0, detect_interval=1))
    assert seg.detector_calls == 3 and result.propagations == 0


def test_frames_are_dropped_from_the_session_as_they_are_processed(tiny_folder):
    bundle = load_sam3_video(tiny_folder)
    seg = TransformersSegmenter(bundle)
    held = []
    original = seg.propagate

    def watch(frame_idx, frame):
        out = original(frame_idx, frame)
        held.append(sum(t.numel() > 0 for t in seg.session.processed_frames.values()))
        return out

    seg.propagate = watch
    segment_video(seg, torch.rand(5, 32, 32, 3), "dress", OPEN)
    assert held and max(held) == 0


def test_missing_folder_names_folder_and_files(tmp_path):
    with pytest.raises(ModelFilesMissing) as err:
        load_sam3_video(tmp_path / "sam3" / "absent")
    message = str(err.value)
    assert "absent" in message and "config.json" in message and "model.safetensors" in message


def test_incomplete_folder_names_the_missing_files(tiny_folder, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("config.json", "processor_config.json"):
        (partial / name).write_bytes((tiny_folder / name).read_bytes())
    with pytest.raises(ModelFilesMissing) as err:
        check_folder(partial)
    assert err.value.folder == str(partial)
    assert err.value.missing == ["model.safetensors or model.safetensors.index.json", "tokenizer.json or vocab.json"]
    assert "model_name" in str(err.value)


def test_native_checkpoint_folder_gets_a_hint(tmp_path):
    (tmp_path / "sam3.pt").write_bytes(b"")
    with pytest.raises(ModelFilesMissing, match="sam3 package checkpoint"):
        check_folder(tmp_path)


def test_other_model_type_is_refused(tiny_folder, tmp_path):
    other = tmp_path / "image-only"
    other.mkdir()
    for name in ("model.safetensors", "processor_config.json", "tokenizer.json"):
        (other / name).write_bytes(b"x")
    (other / "config.json").write_text('{"model_type": "sam3"}')
    with pytest.raises(InputError, match="model_type 'sam3'"):
        check_folder(other)


def test_dropping_memories_past_the_trackers_reach_changes_nothing(tiny_folder):
    """Pruned propagation memories (older than num_maskmem / max_object_pointers_in_encoder frames) were never
    going to be read: the masks are identical to a run that keeps everything, and the bank stays bounded."""
    bundle = load_sam3_video(tiny_folder)
    frames = torch.rand(24, 32, 32, 3, generator=torch.Generator().manual_seed(3))
    settings = MaskSettings(detection_threshold=0.0, detect_interval=6, max_objects=2)

    class KeepAll(TransformersSegmenter):
        def _forget_frame(self, frame_idx):
            self._memory_reach = 10_000
            super()._forget_frame(frame_idx)

    sizes = []

    class Pruned(TransformersSegmenter):
        def _forget_frame(self, frame_idx):
            super()._forget_frame(frame_idx)
            sizes.append(max((len(o["non_cond_frame_outputs"]) for o in self.session.output_dict_per_obj.values()),
                             default=0))

    kept = segment_video(KeepAll(bundle), frames, "dress\nhands", settings)
    pruned = segment_video(Pruned(bundle), frames, "dress\nhands", settings)
    assert torch.equal(kept.union, pruned.union)
    assert all(torch.equal(a, b) for a, b in zip(kept.masks, pruned.masks))
    reach = max(bundle.model.tracker_model.config.num_maskmem,
                bundle.model.tracker_model.config.max_object_pointers_in_encoder)
    assert max(sizes) <= reach + 1 < 24


def test_a_prompt_longer_than_the_text_encoder_reads_is_refused_by_name(tiny_folder):
    """The processor pads to 32 tokens but never truncates: a longer prompt used to end in CLIP's raw
    "Sequence length must be less than max_position_embeddings" (found by the fuzz)."""
    bundle = load_sam3_video(tiny_folder)
    seg = TransformersSegmenter(bundle)
    frames = torch.rand(2, 32, 32, 3, generator=torch.Generator().manual_seed(2))
    limit = bundle.model.detector_model.text_encoder.config.max_position_embeddings
    long_line = " ".join(["dress"] * (limit + 5))
    with pytest.raises(InputError, match=rf"^prompts: expected prompts of at most {limit} tokens each") as err:
        segment_video(seg, frames, f"hands\n{long_line}", OPEN)
    assert "tokens in 'dress dress" in str(err.value)
    assert seg.session is None or not seg.session.prompts         # refused before a session took the prompts
    fits = " ".join(["dress"] * (limit - 2))                       # with its start and end tokens: exactly the limit
    assert len(bundle.processor.tokenizer(fits)["input_ids"]) == limit
    segment_video(seg, frames, fits, OPEN)
