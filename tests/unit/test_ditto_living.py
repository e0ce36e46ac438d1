"""Ditto's living face (natural blinks, saccades), emotion steering and head lock: the engine modules on their own,
then through the tiny pipeline (engines/ditto/living.py, emotion.py, head_lock.py, keypoints.py, motion.py)."""
import numpy as np
import pytest

from engines.common.audio import to_mono
from engines.common.errors import InputError
from engines.ditto import avatar as av
from engines.ditto import emotion as em
from engines.ditto import head_lock as hl
from engines.ditto import keypoints as kps
from engines.ditto import living as lv
from engines.ditto import motion as mo
from engines.ditto.pipeline import DittoPipeline
from tests.fixtures.tiny_ditto import build_tiny_ditto, portrait, speech

FPS = 25.0
TEMPLATE = np.linspace(0, 1, 8)[:, None] * np.ones((1, 63)) * 0.01  # an eyelid-closing offset, 8 frames


# blinks ----------------------------------------------------------------------------------------------------------
def test_blinks_are_poisson_with_a_refractory_gap():
    n = int(FPS * 60 * 20)  # twenty minutes, for the statistics
    settings = lv.LivingSettings(blinks_per_minute=17.0, refractory_s=1.0, seed=3)
    onsets = lv.blink_onsets(n, FPS, len(TEMPLATE), settings)
    starts = np.array([s for s, _ in onsets])
    lengths = np.array([length for _, length in onsets])
    rate = len(onsets) / 20.0
    assert 14.0 < rate < 20.0  # near 17 a minute (the template's own length shortens the gaps a little)
    gaps = (starts[1:] - (starts[:-1] + lengths[:-1])) / FPS
    assert gaps.min() >= 1.0 - 1 / FPS  # never two blinks within the refractory gap
    intervals = np.diff(starts) / FPS
    assert np.std(intervals) > 0.5 * (np.mean(intervals) - 1.0)  # irregular, like an exponential
    assert len(set(lengths)) > 3  # short and long blinks, not one template length
    assert onsets == lv.blink_onsets(n, FPS, len(TEMPLATE), settings)  # seeded
    assert onsets != lv.blink_onsets(n, FPS, len(TEMPLATE), lv.LivingSettings(seed=4))
    assert lv.blink_onsets(n, FPS, len(TEMPLATE), lv.LivingSettings(blinks=False)) == []


def test_no_blink_on_or_next_to_a_closed_eye_source_frame():
    n = int(FPS * 120)
    closed = np.zeros(n, bool)
    for start in range(50, n, 90):  # the loop blinks by itself every 3.6 s
        closed[start:start + 5] = True
    onsets = lv.blink_onsets(n, FPS, len(TEMPLATE), lv.LivingSettings(blinks_per_minute=30, refractory_s=0.6,
                                                                       seed=1), closed)
    assert len(onsets) > 5
    dead = int(round(0.6 * FPS))
    for start, length in onsets:
        lo, hi = max(0, start - dead), min(n, start + length + dead)
        assert not closed[lo:hi].any()


def test_blink_track_stretches_the_template():
    track = lv.blink_track(40, [(5, 10), (25, 6)], TEMPLATE)
    assert track.shape == (40, 63) and np.all(track[:5] == 0) and np.all(track[15:25] == 0)
    assert track[14, 0] == pytest.approx(TEMPLATE[-1, 0]) and track[30, 0] == pytest.approx(TEMPLATE[-1, 0])


def test_saccades_are_small_fast_seeded_and_still_while_eyes_are_shut():
    n = int(FPS * 60)
    settings = lv.LivingSettings(fixation_s=1.0, amplitude=0.004, seed=2)
    quiet = np.zeros(n, bool)
    quiet[300:400] = True
    gaze = lv.saccade_track(n, FPS, settings, quiet)
    assert gaze.shape == (n, 2) and np.abs(gaze).max() < 0.02
    moves = np.flatnonzero(np.abs(np.diff(gaze, axis=0)).sum(1) > 0)
    assert 20 < len(moves) < 200  # a fixation about every second, each jump two frames
    assert np.all(np.diff(gaze[300:400], axis=0) == 0)  # no saccade while the eyes are shut
    assert np.array_equal(gaze, lv.saccade_track(n, FPS, settings, quiet))
    assert not lv.saccade_track(n, FPS, lv.LivingSettings(saccades=False)).any()
    exp = lv.apply_gaze(np.zeros((n, 63), np.float32), gaze)
    assert np.array_equal(exp[:, 33], gaze[:, 0]) and np.array_equal(exp[:, 46], gaze[:, 1])
    assert not np.delete(exp, [33, 45, 34, 46], axis=1).any()


def test_closed_source_frames_from_eye_openness():
    openness = np.full((20, 2), 0.3)
    openness[7:9] = 0.05
    assert np.flatnonzero(lv.closed_source_frames(openness)).tolist() == [7, 8]


# emotion ---------------------------------------------------------------------------------------------------------
def test_the_eight_emotions_in_upstreams_order():
    assert em.EMOTIONS == ("angry", "disgust", "fear", "happy", "neutral", "sad", "surprise", "contempt")
    assert mo.EMOTIONS is em.EMOTIONS and em.EMOTIONS.index("neutral") == mo.NEUTRAL == 4
    fixed = em.emotion_weights(10, em.EMOTIONS.index("happy"))
    assert fixed.shape == (10, 8) and np.allclose(fixed, mo.emotion_vector(3)) and em.dominant(fixed)[0] == "happy"


def _voice(seconds, f0, amp, sr=16000):
    t = np.arange(int(seconds * sr)) / sr
    return amp * sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6))


def test_steering_follows_energy_and_pitch_and_keeps_the_label_in_silence():
    calm, excited = _voice(2.0, 120.0, 0.05), _voice(2.0, 240.0, 0.4)
    audio = np.concatenate([calm, excited, calm, np.zeros(32000)])
    n = int(len(audio) / 16000 * 25)
    energy, pitch = em.frame_energy_pitch(audio, n)
    assert np.nanmedian(pitch[5:45]) == pytest.approx(120.0, rel=0.05)
    assert np.nanmedian(pitch[55:95]) == pytest.approx(240.0, rel=0.05)
    w = em.emotion_weights(n, mo.NEUTRAL, audio, strength=1.0)
    names = em.dominant(w)
    assert names[70] == "happy" or names[70] == "surprise"  # loud and high in the middle
    assert w[70, mo.NEUTRAL] < 0.5 < w[20, mo.NEUTRAL] + 0.4
    assert names[-5] == "neutral"  # silence keeps the chosen label
    assert np.allclose(em.emotion_weights(n, mo.NEUTRAL, audio, 0.0), mo.emotion_vector(mo.NEUTRAL))
    with pytest.raises(InputError, match="emotion_steering"):
        em.emotion_weights(n, 4, audio, 9.0)


# head lock -------------------------------------------------------------------------------------------------------
def test_rigid_angles_and_the_rotation_subspace():
    rng = np.random.default_rng(0)
    kp = rng.normal(size=(21, 3))
    r = kps.rotation(np.array([5.0]), np.array([-8.0]), np.array([3.0]))[0]  # row-vector form: kp @ r
    angles = hl.rigid_angles(kp, (kp @ r)[None])[0]
    assert angles == pytest.approx([5.0, -8.0, 3.0], abs=1e-6)
    turned = kp @ kps.rotation(np.array([1.0]), np.array([3.0]), np.array([0.0]))[0]
    locked = kp + hl.lock_expression((turned - kp).reshape(1, -1), kp).reshape(21, 3)
    assert np.abs(hl.rigid_angles(kp, turned[None])[0]).max() > 2.9
    assert np.abs(hl.rigid_angles(kp, locked[None])[0]).max() < 0.05  # the head turn is gone
    mask = np.zeros((21, 3))
    mask[list(kps.LIP_KPS)] = 1
    lips_only = hl.lock_expression(((turned - kp) * mask).reshape(1, -1), kp, mask.reshape(-1)).reshape(21, 3)
    assert not lips_only[mask == 0].any()  # keypoints the motion does not drive stay put


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pipeline = DittoPipeline(build_tiny_ditto(tmp_path_factory.mktemp("ditto") / "tiny"))
    avatar, _ = pipeline.prepare_avatar(portrait(), av.AvatarSettings(), None)
    wav, _ = to_mono(speech(2.0), 16000)
    feats = pipeline.audio_features(wav, None)
    return pipeline, avatar, feats, wav


def test_head_lock_removes_head_rotation_on_the_tiny_model(tiny):
    pipeline, avatar, feats, wav = tiny
    settings = mo.MotionSettings(steps=4, seed=5, overlap=5)
    free = pipeline.motion(avatar, feats, settings, kps.DriveSettings(), wav)
    locked = pipeline.motion(avatar, feats, settings, kps.DriveSettings(head_lock=True), wav)
    source = kps.source_keypoints(avatar.info)[0]
    residual_free = np.abs(hl.rigid_angles(source, free.kp_driven)[:, :2]).max()
    residual_locked = np.abs(hl.rigid_angles(source, locked.kp_driven)[:, :2]).max()
    print(f"residual yaw/pitch on the tiny model: free {residual_free:.3f} deg, locked {residual_locked:.3f} deg")
    assert residual_free > 0.5 and residual_locked < 0.25 * residual_free
    assert np.array_equal(free.motion, locked.motion)  # the lock acts on the keypoints, not the motion model


def test_living_face_and_steering_through_the_tiny_pipeline(tiny):
    pipeline, avatar, feats, wav = tiny
    settings = mo.MotionSettings(steps=4, seed=5, overlap=5)
    plain = pipeline.motion(avatar, feats, settings, kps.DriveSettings(drive_eyes=True), wav)
    living = lv.LivingSettings(blinks_per_minute=60.0, refractory_s=0.3, seed=1)
    alive = pipeline.motion(avatar, feats, settings, kps.DriveSettings(drive_eyes=True, living=living), wav)
    eyes = list(kps.EYE_KPS)
    assert not np.allclose(alive.kp_driven[:, eyes], plain.kp_driven[:, eyes])
    lips = list(kps.LIP_KPS)
    np.testing.assert_allclose(alive.kp_driven[:, lips], plain.kp_driven[:, lips], atol=1e-5)
    again = pipeline.motion(avatar, feats, settings, kps.DriveSettings(drive_eyes=True, living=living), wav)
    np.testing.assert_array_equal(alive.kp_driven, again.kp_driven)
    steered = pipeline.motion(avatar, feats, mo.MotionSettings(steps=4, seed=5, overlap=5, emotion_steering=1.0),
                              kps.DriveSettings(), wav)
    assert not np.array_equal(steered.motion, plain.motion)  # the condition changed
    with pytest.raises(InputError, match="emotion_steering"):
        mo.generate(pipeline.nets.lmdm, feats, avatar.info, mo.MotionSettings(steps=2, emotion_steering=1.0))
