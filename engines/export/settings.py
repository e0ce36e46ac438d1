"""Encoder settings: the user's choices, checked once, and their translation into each encoder's options.

One `EncodeSettings` describes what the user asked for in encoder-neutral words (preset, tune, rate control,
quality or bitrate, GOP length, bit depth). `codec_plan` turns it into the option dict of one concrete FFmpeg
encoder, so the same settings can be retried on the fallback encoder without the caller knowing its dialect.

Colour is fixed, not a setting: BT.601 matrix, limited ("tv") range, 4:2:0. The posts this pack follows use the
BT.601 limited-range coefficients, swscale's default RGB->YUV matrix is BT.601, and the GPU converter implements the
same coefficients, so every path produces the same numbers and the stream is tagged with exactly that
(matrix smpte170m, range tv). Primaries and transfer are tagged BT.709, the primaries of sRGB, because ComfyUI's
IMAGE tensors are sRGB pictures; without tags a browser would decode HD video with the BT.709 matrix and shift hues.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..common.errors import InputError

# User-facing encoder names -> FFmpeg encoder names.
ENCODERS = {
    "nvenc_h264": "h264_nvenc",
    "nvenc_hevc": "hevc_nvenc",
    "x264": "libx264",
    "x265": "libx265",
}
ENCODER_CHOICES = ("auto",) + tuple(ENCODERS)
NVENC_CODECS = ("h264_nvenc", "hevc_nvenc")
# Where an NVENC encoder is missing or refuses, the software encoder of the same format takes over.
SOFTWARE_TWIN = {"h264_nvenc": "libx264", "hevc_nvenc": "libx265"}

NVENC_PRESETS = tuple(f"p{i}" for i in range(1, 8))
X26X_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")
PRESET_CHOICES = ("auto",) + NVENC_PRESETS + X26X_PRESETS
# Cross-mapping so one preset works on either family: speed order is the same, the scales differ in length.
X26X_TO_NVENC = {"ultrafast": "p1", "superfast": "p1", "veryfast": "p2", "faster": "p3", "fast": "p4",
                 "medium": "p5", "slow": "p6", "slower": "p7", "veryslow": "p7"}
NVENC_TO_X26X = {"p1": "ultrafast", "p2": "veryfast", "p3": "faster", "p4": "fast", "p5": "medium",
                 "p6": "slow", "p7": "slower"}
DEFAULT_PRESET = {"nvenc": "p4", "x26x": "veryfast"}

TUNE_CHOICES = ("auto", "hq", "ll", "ull")
RATE_CONTROLS = ("cq", "vbr", "cbr", "constqp")
AUDIO_MODES = ("match_video", "match_audio", "shortest")
BIT_DEPTHS = (8, 10)

# Colour tags written into the stream (AVColorSpace / AVColorRange / AVColorPrimaries / AVColorTransferCharacteristic).
COLORSPACE_SMPTE170M = 6      # BT.601 matrix
COLOR_RANGE_MPEG = 1          # limited range: Y 16-235, chroma 16-240 (x4 at 10 bit)
COLOR_PRIMARIES_BT709 = 1
COLOR_TRC_BT709 = 1
COLOUR_DESCRIPTION = "BT.601 matrix, limited range (smpte170m/tv), BT.709 primaries and transfer"


@dataclass(frozen=True)
class EncodeSettings:
    """What the user asked of the encoder, independent of which encoder runs.

    Args:
        encoder: "auto" (NVENC H.264 where it works, else libx264), "nvenc_h264", "nvenc_hevc", "x264", "x265".
        preset: "auto", "p1".."p7" (NVENC) or an x264 preset name; either kind is mapped onto the other family.
        tune: "auto", "hq" (quality), "ll" (low latency), "ull" (ultra-low latency; x26x: zerolatency).
        rate_control: "cq" (constant quality: NVENC cq / x26x crf), "vbr", "cbr" (use `bitrate_kbps`),
            "constqp" (fixed quantiser `quality`).
        quality: 0-51, lower is better; used by cq and constqp.
        bitrate_kbps: target video bitrate for vbr and cbr.
        gop_seconds: distance between keyframes in seconds (default one second).
        bit_depth: 8 or 10.
        faststart: move the index to the front of the file so playback starts before the download ends.
        audio_bitrate_kbps: AAC bitrate.
    """

    encoder: str = "auto"
    preset: str = "auto"
    tune: str = "auto"
    rate_control: str = "cq"
    quality: int = 19
    bitrate_kbps: int = 8000
    gop_seconds: float = 1.0
    bit_depth: int = 8
    faststart: bool = True
    audio_bitrate_kbps: int = 192

    def check(self) -> "EncodeSettings":
        """Raise `InputError` naming the first setting that is out of range; return self."""
        _choice("encoder", self.encoder, ENCODER_CHOICES)
        _choice("preset", self.preset, PRESET_CHOICES)
        _choice("tune", self.tune, TUNE_CHOICES)
        _choice("rate_control", self.rate_control, RATE_CONTROLS)
        _choice("bit_depth", self.bit_depth, BIT_DEPTHS)
        if not 0 <= int(self.quality) <= 51:
            raise InputError("quality", "an integer from 0 (best) to 51 (worst)", str(self.quality))
        if self.rate_control in ("vbr", "cbr") and not 50 <= int(self.bitrate_kbps) <= 500_000:
            raise InputError("bitrate_kbps", "a bitrate from 50 to 500000 kbps for vbr/cbr", str(self.bitrate_kbps))
        if not 0.0 < float(self.gop_seconds) <= 60.0:
            raise InputError("gop_seconds", "a keyframe interval from 0 to 60 seconds (0 excluded)",
                             str(self.gop_seconds))
        if not 16 <= int(self.audio_bitrate_kbps) <= 512:
            raise InputError("audio_bitrate_kbps", "an AAC bitrate from 16 to 512 kbps", str(self.audio_bitrate_kbps))
        return self


def _choice(name: str, value, options) -> None:
    if value not in options:
        raise InputError(name, f"one of {', '.join(str(o) for o in options)}", repr(value))


def frame_rate(fps: float, input_name: str = "fps") -> Fraction:
    """The exact stream rate for a frame rate typed as a float (23.976 -> 24000/1001)."""
    try:
        fps = float(fps)
    except (TypeError, ValueError):
        raise InputError(input_name, "a frame rate in frames per second", repr(fps)) from None
    if not 1.0 <= fps <= 240.0 or fps != fps:
        raise InputError(input_name, "a frame rate from 1 to 240 frames per second", str(fps))
    for base in (24, 30, 48, 60, 120):  # NTSC-style rates are n*1000/1001, which no short decimal spells exactly
        ntsc = Fraction(base * 1000, 1001)
        if abs(fps - float(ntsc)) < 0.0015:
            return ntsc
    return Fraction(fps).limit_denominator(1000)


@dataclass(frozen=True)
class CodecPlan:
    """Everything needed to open one concrete encoder: its name, pixel format, GOP and option dict."""

    codec: str
    pix_fmt: str
    gop: int
    options: dict
    profile: str | None = None

    @property
    def is_nvenc(self) -> bool:
        return self.codec in NVENC_CODECS


def encoder_pix_fmt(codec: str, bit_depth: int, host_format: str | None = None) -> str:
    """The pixel format handed to the encoder.

    `host_format` is what the frames arrive in when they were converted before PyAV (NV12 from the GPU path); an
    encoder that takes it natively gets it unchanged, so nothing is converted twice.
    """
    native = {
        ("nvenc", 8): ("nv12", "yuv420p"), ("nvenc", 10): ("p010le",),
        ("libx264", 8): ("yuv420p", "nv12"), ("libx264", 10): ("yuv420p10le",),
        ("libx265", 8): ("yuv420p",), ("libx265", 10): ("yuv420p10le",),
    }["nvenc" if codec in NVENC_CODECS else codec, bit_depth]
    return host_format if host_format in native else native[0]


def codec_plan(codec: str, settings: EncodeSettings, fps: Fraction, host_format: str | None = None) -> CodecPlan:
    """Translate `settings` into the options of FFmpeg encoder `codec`."""
    s = settings
    gop = max(1, round(float(fps) * float(s.gop_seconds)))
    q = str(int(s.quality))
    br = int(s.bitrate_kbps)
    pix_fmt = encoder_pix_fmt(codec, s.bit_depth, host_format)
    if codec in NVENC_CODECS:
        preset = s.preset if s.preset in NVENC_PRESETS else X26X_TO_NVENC.get(s.preset, DEFAULT_PRESET["nvenc"])
        opts = {"preset": preset, "tune": "hq" if s.tune == "auto" else s.tune}
        if s.tune in ("ll", "ull"):
            opts["zerolatency"] = "1"
        opts.update({
            "cq": {"rc": "vbr", "cq": q, "b": "0"},
            "vbr": {"rc": "vbr", "b": f"{br}k", "maxrate": f"{br * 3 // 2}k", "bufsize": f"{br * 2}k"},
            "cbr": {"rc": "cbr", "b": f"{br}k", "maxrate": f"{br}k", "bufsize": f"{br}k"},
            "constqp": {"rc": "constqp", "qp": q},
        }[s.rate_control])
        profile = ("main10" if codec == "hevc_nvenc" else "high10") if s.bit_depth == 10 else None
        if profile:
            opts["profile"] = profile
        return CodecPlan(codec, pix_fmt, gop, opts, profile)

    preset = s.preset if s.preset in X26X_PRESETS else NVENC_TO_X26X.get(s.preset, DEFAULT_PRESET["x26x"])
    opts = {"preset": preset}
    if s.tune in ("ll", "ull"):
        opts["tune"] = "zerolatency"
    params = []
    if s.rate_control == "cq":
        opts["crf"] = q
    elif s.rate_control == "constqp":
        opts["qp"] = q
    else:
        opts["b"] = f"{br}k"
        maxrate = br if s.rate_control == "cbr" else br * 3 // 2
        bufsize = br if s.rate_control == "cbr" else br * 2
        if codec == "libx264":
            opts.update({"maxrate": f"{maxrate}k", "bufsize": f"{bufsize}k"})
            if s.rate_control == "cbr":
                params.append("nal-hrd=cbr")
        else:
            params += [f"vbv-maxrate={maxrate}", f"vbv-bufsize={bufsize}"]
    if codec == "libx264":
        if params:
            opts["x264-params"] = ":".join(params)
        profile = "high10" if s.bit_depth == 10 else None
    else:
        params.append("log-level=error")  # x265 prints a banner per stream otherwise
        opts["x265-params"] = ":".join(params)
        profile = "main10" if s.bit_depth == 10 else None
    if profile:
        opts["profile"] = profile
    return CodecPlan(codec, pix_fmt, gop, opts, profile)
