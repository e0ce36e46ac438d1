"""benchmarks/gpu_check.py, the device check, run as the suite runs it: ``--device cpu --quick`` (the same code a
GPU runs, on tiny networks). It must finish and print its table: every backend row either measured, with parity
against eager fp32, or not run with the reason the pack's loader would give. No timing is checked."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_on_the_cpu_and_names_what_it_could_not_run():
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--quick",
                           "--budget", "1200"], cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 4 and cells[0] in ("MuseTalk UNet > VAE", "Ditto warp > decoder", "MuseTalk tiny render",
                                            "Ditto tiny render"):
            rows.setdefault((cells[0], re.sub(r" \(built for .*\)", "", cells[1])), []).append(cells)
    for family in ("MuseTalk UNet > VAE", "Ditto warp > decoder"):
        fp32 = rows[(family, "eager fp32")]
        assert [r[2] for r in fp32] == ["1", "2"]
        assert all(r[8] == "1.000000" and float(r[9]) == 0.0 for r in fp32)    # the reference against itself
        for label in ("eager bf16", "onnxruntime fp32", "compile bf16"):
            measured = rows[(family, label)]
            assert [r[2] for r in measured] == ["1", "2"], (label, measured)
            # bf16 rounds (cos ~0.999 on random tiny networks), fp32 ONNX Runtime matches closely
            assert all(0.99 < float(r[8]) <= 1.0 + 1e-9 for r in measured), (label, measured)
            assert all(float(r[5]) > 0 for r in measured)
        # what cannot run on a CPU is named, not dropped
        assert rows[(family, "cudagraphs bf16")][0][3].startswith("not run [")
        assert rows[(family, "tensorrt (bf16 weights)")][0][3].startswith("not run [")
    # the real render loops on the tiny models, 13 frames at batch 4: eager is the reference, ONNX Runtime renders
    # the same frames within rounding, the GPU backends are named
    for family in ("MuseTalk tiny render", "Ditto tiny render"):
        eager, ort = rows[(family, "eager fp32")][0], rows[(family, "onnxruntime")][0]
        assert eager[3] == "13 frames" and float(eager[9]) == 0.0 and float(eager[5]) > 0
        assert ort[3] == "13 frames" and float(ort[9]) < 5e-3, ort
        assert rows[(family, "tensorrt")][0][3].startswith("not run [")
    assert re.search(r"^\[\d\] not run: cudagraphs: CUDA graphs need a CUDA GPU", out, re.M)
    assert re.search(r"^\[\d\] not run: tensorrt: TensorRT", out, re.M)
    assert re.search(r"^  (missing|present): tensorrt", out, re.M)
    assert re.search(r"total \d+ s$", out.strip())
