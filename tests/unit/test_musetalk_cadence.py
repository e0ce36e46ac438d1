"""Keyframe cadence: keyframe choice, SLERP invariants, expansion to exactly N frames."""
import math

import pytest
import torch

from engines.musetalk.cadence import expand_keyframes, keyframe_indices, slerp


@pytest.mark.parametrize("n,stride,expected", [
    (1, 1, [0]), (1, 3, [0]), (5, 1, [0, 1, 2, 3, 4]), (5, 2, [0, 2, 4]), (6, 2, [0, 2, 4, 5]),
    (7, 3, [0, 3, 6]), (8, 3, [0, 3, 6, 7]), (640, 2, list(range(0, 640, 2)) + [639]),
])
def test_keyframes_cover_first_and_last(n, stride, expected):
    assert keyframe_indices(n, stride).tolist() == expected


def test_keyframes_refuse_bad_arguments():
    with pytest.raises(ValueError):
        keyframe_indices(0, 1)
    with pytest.raises(ValueError):
        keyframe_indices(5, 0)


def _pair(seed=0, shape=(3, 4, 8, 8)):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g), torch.randn(shape, generator=g) * 2.0


def test_slerp_endpoints():
    z0, z1 = _pair()
    assert torch.allclose(slerp(z0, z1, torch.zeros(3)), z0, atol=1e-5)
    assert torch.allclose(slerp(z0, z1, torch.ones(3)), z1, atol=1e-5)


@pytest.mark.parametrize("a", [0.1, 1 / 3, 0.5, 0.9])
def test_slerp_blends_the_norm_linearly(a):
    z0, z1 = _pair(1)
    out = slerp(z0, z1, torch.full((3,), a))
    n0, n1 = z0.flatten(1).norm(dim=1), z1.flatten(1).norm(dim=1)
    assert torch.allclose(out.flatten(1).norm(dim=1), (1 - a) * n0 + a * n1, rtol=1e-5)
    # A plain linear blend loses norm (the blurred-mouth defect); SLERP does not.
    lerp = ((1 - a) * z0 + a * z1).flatten(1).norm(dim=1)
    assert (lerp < out.flatten(1).norm(dim=1) - 1e-3).all()


def test_slerp_stays_on_the_arc():
    """The direction at alpha is the rotation by alpha*theta from z0 towards z1."""
    e0 = torch.tensor([[1.0, 0.0]])
    e1 = torch.tensor([[0.0, 1.0]])
    out = slerp(e0, e1, torch.tensor([0.5]))
    assert torch.allclose(out, torch.tensor([[math.cos(math.pi / 4), math.sin(math.pi / 4)]]), atol=1e-6)


def test_slerp_tiny_angle_falls_back_to_linear():
    z0 = torch.randn(2, 16, dtype=torch.float64)
    z1 = z0 * (1 + 1e-9)                        # same direction: sin(theta) ~ 0
    out = slerp(z0, z1, torch.tensor([0.25, 0.75]))
    assert torch.isfinite(out).all()
    expected = torch.stack([0.75 * z0[0] + 0.25 * z1[0], 0.25 * z0[1] + 0.75 * z1[1]])
    assert torch.allclose(out, expected, atol=1e-9)


def test_slerp_antipodal_is_finite():
    z0 = torch.randn(1, 16)
    out = slerp(z0, -z0, torch.tensor([0.5]))
    assert torch.isfinite(out).all()


def test_expand_returns_exactly_n_frames_with_keyframes_untouched():
    n, stride = 11, 3
    keys = keyframe_indices(n, stride)                         # 0 3 6 9 10
    key_lat = torch.randn(len(keys), 4, 8, 8)
    out = expand_keyframes(key_lat, keys, torch.arange(n))
    assert out.shape == (n, 4, 8, 8)
    assert torch.equal(out[keys], key_lat)                     # bit for bit
    # frame 4 lies 1/3 of the way from keyframe 3 to 6
    assert torch.allclose(out[4], slerp(key_lat[1:2], key_lat[2:3], torch.tensor([1 / 3]))[0], atol=1e-6)


def test_expand_uses_true_spacing_of_a_short_last_gap():
    """Keyframes 0, 3 and the forced last frame 4: frame 4 is a keyframe, not alpha 1/3 of a phantom gap."""
    keys = torch.tensor([0, 3, 4])
    key_lat = torch.randn(3, 2, 4, 4)
    out = expand_keyframes(key_lat, keys, torch.arange(5))
    assert torch.equal(out[4], key_lat[2])
    assert torch.allclose(out[2], slerp(key_lat[0:1], key_lat[1:2], torch.tensor([2 / 3]))[0], atol=1e-6)


def test_expand_of_a_window_matches_the_whole():
    keys = keyframe_indices(20, 2)
    key_lat = torch.randn(len(keys), 4, 4, 4)
    whole = expand_keyframes(key_lat, keys, torch.arange(20))
    part = expand_keyframes(key_lat[3:6], keys[3:6], torch.arange(int(keys[3]), int(keys[5]) + 1))
    assert torch.allclose(part, whole[int(keys[3]):int(keys[5]) + 1])


def test_expand_refuses_frames_outside_the_keyframes():
    with pytest.raises(ValueError):
        expand_keyframes(torch.randn(2, 4), torch.tensor([0, 4]), torch.tensor([5]))


# --- adaptive cadence: the stride follows the audio's velocity ---------------------------------------------------
from engines.musetalk.audio_features import pad_features, window_means  # noqa: E402
from engines.musetalk.cadence import adaptive_keyframe_indices, window_velocity  # noqa: E402


def test_velocity_is_the_mean_absolute_change_of_the_window_means():
    w = torch.tensor([[0.0, 0.0], [1.0, -1.0], [1.0, 0.0]])
    assert window_velocity(w).tolist() == [0.0, 1.0, 0.5]
    assert window_velocity(w[:1]).tolist() == [0.0]


def test_window_means_match_the_gathered_windows():
    from engines.musetalk.audio_features import window_features

    feats = torch.randn(37, 5, 8, generator=torch.Generator().manual_seed(3))
    n, fps = 14, 20.0
    padded = pad_features(feats, n, fps)
    want = window_features(padded, torch.arange(n), fps).double().mean(dim=1)
    assert torch.allclose(window_means(padded, n, fps), want, atol=1e-12)


def test_steady_audio_gets_the_wide_stride():
    assert adaptive_keyframe_indices(torch.zeros(13), 2, 5).tolist() == [0, 5, 10, 12]


def test_fast_articulation_gets_the_short_stride():
    assert adaptive_keyframe_indices(torch.full((9,), 0.2), 1, 4).tolist() == list(range(9))
    assert adaptive_keyframe_indices(torch.full((9,), 0.2), 2, 4).tolist() == [0, 2, 4, 6, 8]


def test_stride_is_chosen_per_segment():
    v = torch.zeros(20)
    v[9] = 0.1                               # one fast frame: only the span that contains it is cut short
    keys = adaptive_keyframe_indices(v, 2, 4, threshold=0.065).tolist()
    assert keys == [0, 4, 8, 10, 14, 18, 19]       # 8 -> 10: the span 9..12 holds the fast frame
    gaps = [b - a for a, b in zip(keys, keys[1:])]
    assert gaps == [4, 4, 2, 4, 4, 1]                # the last gap is short: it ends on the last frame
    assert adaptive_keyframe_indices(v, 2, 4, threshold=0.2).tolist() == [0, 4, 8, 12, 16, 19]


@pytest.mark.parametrize("n,stride", [(1, 3), (7, 1), (8, 3), (640, 2)])
def test_equal_bounds_are_the_fixed_stride(n, stride):
    v = torch.rand(n, generator=torch.Generator().manual_seed(n))
    assert torch.equal(adaptive_keyframe_indices(v, stride, stride), keyframe_indices(n, stride))


def test_adaptive_keyframes_refuse_bad_bounds():
    with pytest.raises(ValueError):
        adaptive_keyframe_indices(torch.zeros(5), 3, 2)
    with pytest.raises(ValueError):
        adaptive_keyframe_indices(torch.zeros(5), 0, 2)
    with pytest.raises(ValueError):
        adaptive_keyframe_indices(torch.zeros(0), 1, 2)
