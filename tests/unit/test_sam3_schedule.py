"""Which frames get a full SAM3 detection: every Nth frame and always the last one."""
import pytest

from engines.common.errors import InputError
from engines.sam3.schedule import detection_frames, detection_schedule


@pytest.mark.parametrize("frames, interval, expected", [
    (9, 4, [0, 4, 8]),            # last frame already on the grid
    (10, 4, [0, 4, 8, 9]),        # last frame added
    (12, 4, [0, 4, 8, 11]),
    (1, 4, [0]),
    (2, 4, [0, 1]),
    (3, 10, [0, 2]),              # interval longer than the clip
    (5, 1, [0, 1, 2, 3, 4]),      # interval 1 = every frame
    (7, 3, [0, 3, 6]),
    (8, 3, [0, 3, 6, 7]),
    (0, 4, []),
])
def test_detection_frames(frames, interval, expected):
    assert detection_frames(frames, interval) == expected
    schedule = detection_schedule(frames, interval)
    assert len(schedule) == frames
    assert [i for i, d in enumerate(schedule) if d] == expected


def test_posts_clip_175_frames_interval_4():
    """The posts' wardrobe loop: 175 frames, interval 4 -> 44 grid frames (0..172) + the last (174)."""
    frames = detection_frames(175, 4)
    assert len(frames) == 45
    assert frames[-2:] == [172, 174]
    assert len(detection_frames(175, 1)) == 175


@pytest.mark.parametrize("interval", [0, -1, 2.5])
def test_bad_interval_names_the_input(interval):
    with pytest.raises(InputError, match="detect_interval"):
        detection_schedule(10, interval)
