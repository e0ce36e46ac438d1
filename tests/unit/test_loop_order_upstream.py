"""MuseTalk's default loop order is upstream's, checked against upstream's indexing written out here.

Upstream MuseTalk (TMElyralab/MuseTalk, scripts/realtime_inference.py, `Avatar.prepare_material` and
`Avatar.process_frames`; scripts/inference.py does the same) builds its cycle as ``frame_list + frame_list[::-1]``
(and the coordinates, latents and masks alike) and shows ``cycle[idx % len(cycle)]`` for output frame ``idx``:
period 2L, each end frame twice. At the loop's own frame rate the pack's video-time index must pick the same frame.
"""
import pytest

from engines.musetalk.blend import source_indices


def _upstream_cycle_index(n_out: int, loop_len: int) -> list:
    frame_list = list(range(loop_len))             # stands for the loop's frames, by position
    cycle = frame_list + frame_list[::-1]
    return [cycle[idx % len(cycle)] for idx in range(n_out)]


@pytest.mark.parametrize("loop_len", [1, 2, 3, 7, 175])
def test_mirror_is_upstreams_cycle(loop_len):
    n_out = 5 * loop_len + 3
    for fps in (25.0, 30.0):
        assert source_indices(n_out, fps, fps, loop_len, "mirror").tolist() == _upstream_cycle_index(n_out, loop_len)


def test_ping_pong_is_not_upstreams_cycle_and_turns_on_the_end_frame():
    got = source_indices(12, 25, 25, 4, "ping-pong").tolist()
    assert got != _upstream_cycle_index(12, 4)
    assert got[:8] == [0, 1, 2, 3, 2, 1, 0, 1]     # each end frame once: period 2L - 2



def test_a_saved_ditto_ping_pong_still_shows_the_end_frames_twice():
    """Ditto's ping-pong always held its end frames (upstream Ditto mirrors its source video): a workflow saved with
    it keeps that sequence, now named mirror; wrap is unchanged."""
    from engines.ditto.keypoints import source_index

    assert source_index(9, 3, "ping-pong").tolist() == source_index(9, 3, "mirror").tolist() \
        == [0, 1, 2, 2, 1, 0, 0, 1, 2]
    assert source_index(5, 3, "wrap").tolist() == [0, 1, 2, 0, 1]
