"""Silence bypass easing, cadence render plan and SLERP infill invariants."""
import numpy as np
import pytest
import torch

from engines.ditto import cadence


def test_hermite_weights():
    np.testing.assert_allclose(cadence.hermite_weights(3), [1.0, 0.84375, 0.5, 0.15625, 0.0])
    assert [round(float(w), 3) for w in cadence.hermite_weights(3)] == [1.0, 0.844, 0.5, 0.156, 0.0]


def test_neural_weights_ease_into_and_out_of_silence():
    rms = np.array([0.1] * 3 + [0.0] * 10 + [0.1] * 2, np.float32)
    w = cadence.neural_weights(rms, 0.008, 3)
    np.testing.assert_allclose(w[:3], 1.0)
    np.testing.assert_allclose(w[3:7], [0.84375, 0.5, 0.15625, 0.0])
    np.testing.assert_allclose(w[9:13], [0.0, 0.15625, 0.5, 0.84375])
    assert cadence.neural_weights(np.zeros(5), 0.008).sum() == 0
    np.testing.assert_array_equal(cadence._distance(rms >= 0.008),
                                  np.abs(np.arange(15)[:, None] - np.flatnonzero(rms >= 0.008)).min(1))


def test_render_plan_keeps_run_ends_and_the_last_frame():
    w = np.array([1] * 7 + [0] * 3 + [1] * 4, np.float32)
    assert cadence.render_plan(w, 1).tolist() == [0, 1, 2, 3, 4, 5, 6, 10, 11, 12, 13]
    assert cadence.render_plan(w, 2).tolist() == [0, 2, 4, 6, 10, 12, 13]
    assert cadence.render_plan(w, 3).tolist() == [0, 3, 6, 10, 12, 13]


def test_slerp_endpoints_and_norm():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 3, 8, 8, generator=g), 3 * torch.randn(2, 3, 8, 8, generator=g)
    torch.testing.assert_close(cadence.slerp(a, b, 0.0), a, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(cadence.slerp(a, b, 1.0), b, rtol=1e-4, atol=1e-5)
    mid = cadence.slerp(a, b, 0.5)
    want = 0.5 * (a.flatten(1).norm(dim=1) + b.flatten(1).norm(dim=1))
    torch.testing.assert_close(mid.flatten(1).norm(dim=1), want, rtol=1e-4, atol=1e-4)
    # direction lies on the great circle: equal angle to both ends
    cos = lambda x, y: torch.nn.functional.cosine_similarity(x.flatten(1), y.flatten(1))
    torch.testing.assert_close(cos(mid, a), cos(mid, b), rtol=1e-4, atol=1e-4)


def test_slerp_is_linear_for_nearly_parallel_inputs_and_fp16_safe():
    a = torch.full((1, 786432), 1.0, dtype=torch.float16)
    b = a * 1.0001
    out = cadence.slerp(a, b, 0.5)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    torch.testing.assert_close(out, (a.float() + b.float()) / 2, rtol=1e-3, atol=1e-3)
    big = torch.full((1, 786432), 200.0, dtype=torch.float16)      # a fp16 dot product would overflow here
    assert torch.isfinite(cadence.slerp(big, -big + 1, 0.3)).all()


@pytest.mark.parametrize("t", [0.25, 0.5, 0.75])
def test_slerp_per_item_t(t):
    a, b = torch.randn(3, 10), torch.randn(3, 10)
    out = cadence.slerp(a, b, torch.full((3,), t))
    torch.testing.assert_close(out, cadence.slerp(a, b, t))
