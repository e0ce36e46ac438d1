"""scripts/env.sh: sourcing keeps the caller's shell options, exports the environment, and filters only pip's
"Location ... is ignored" noise (keeping pip's other messages and its exit status)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _bash(script: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **env))


@pytest.mark.skipif(not os.environ.get("BA_PYTHON"), reason="run through scripts/test.sh (the environment is built)")
def test_sourcing_exports_and_leaves_shell_options_alone():
    proc = _bash('set +e +u; . scripts/env.sh; echo "rc=$?"; set -o | grep -E "^(errexit|nounset|pipefail) ";'
                 'echo "py=$BA_PYTHON"; echo "comfy=$COMFYUI_PATH"; echo "cli=$BA_COMFY"')
    out = proc.stdout
    assert "rc=0" in out, proc.stderr
    for option in ("errexit", "nounset", "pipefail"):
        assert any(line.startswith(option) and line.split()[-1] == "off" for line in out.splitlines()), out
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith("rc"))
    assert os.access(values["py"], os.X_OK) and (Path(values["comfy"]) / "main.py").is_file()
    assert os.access(values["cli"], os.X_OK)


def test_pip_filter_drops_only_location_warnings_and_keeps_the_status(tmp_path):
    fake = tmp_path / "fakepy"
    fake.write_text("#!/usr/bin/env bash\n"
                    "echo \"WARNING: Location 'file:///opt/x/simple/foo/' is ignored: it is neither a file nor a "
                    "directory.\" >&2\n"
                    "echo 'WARNING: something pip really means' >&2\n"
                    "echo 'Successfully installed nothing'\n"
                    "exit 3\n")
    fake.chmod(0o755)
    # Only the function definitions are needed: cut the file before the build runs.
    defs = (REPO_ROOT / "scripts" / "env.sh").read_text().split("_ba_build() (")[0]
    proc = _bash(defs + f'\n_ba_pip "{fake}" install x; echo "status=$?"')
    assert "Location" not in proc.stderr
    assert "something pip really means" in proc.stderr
    assert "Successfully installed nothing" in proc.stdout and "status=3" in proc.stdout
