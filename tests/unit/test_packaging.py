"""Packaging: the licence the README claims, install.py (what ComfyUI-Manager runs), the family guard's install
commands, and SAM3's transformers range."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pack():
    """The pack's __init__ loaded as a package (as ComfyUI does), without starting ComfyUI."""
    spec = importlib.util.spec_from_file_location("ba_pack_under_test", REPO_ROOT / "__init__.py",
                                                  submodule_search_locations=[str(REPO_ROOT)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    for name in [n for n in sys.modules if n == spec.name or n.startswith(spec.name + ".")]:
        del sys.modules[name]


def test_licence_file_is_the_one_the_readme_and_pyproject_claim():
    text = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "9. Accepting Warranty or Additional Liability" in text
    assert "Apache-2.0" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert 'license = { text = "Apache-2.0" }' in (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_pyproject_dependencies_are_requirements_txt():
    lines = [line.split("#", 1)[0].strip() for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()]
    # (no tomllib: the pack supports Python 3.10)
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M).group(1)
    assert sorted(re.findall(r'"([^"]+)"', block)) == sorted(line for line in lines if line)


def test_install_py_has_nothing_left_to_do_in_the_test_environment():
    """The suite's environment is installed through install.py (scripts/env.sh runs it), so its plan is empty;
    and running it is a no-op that exits 0."""
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "install.py")], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "pip" not in proc.stdout, f"install.py wanted to install something: {proc.stdout}"


def test_install_py_plans_the_missing_pieces(monkeypatch):
    spec = importlib.util.spec_from_file_location("ba_install", REPO_ROOT / "install.py")
    install = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install)
    have = {"onnxruntime-gpu": "1.20.0", "pydub": "0.25.1"}
    monkeypatch.setattr(install, "installed_version", have.get)
    commands = install.plan()
    assert commands == [[sys.executable, "-m", "pip", "install", "--no-deps", "omnivoice==0.2.1"]], \
        "a GPU onnxruntime must be kept (no CPU onnxruntime on top) and only the missing pin installed"
    monkeypatch.setattr(install, "installed_version", {}.get)
    commands = install.plan()
    assert commands[0][-3:] == ["--no-deps", "omnivoice==0.2.1", "pydub==0.25.1"]
    assert commands[1][-1].startswith("onnxruntime")


def test_families_pin_what_install_py_installs(pack):
    from importlib import import_module

    install = import_module(pack.__name__ + ".install")
    pins = dict(install.NO_DEPS)
    for family, (_module, requirements) in pack.FAMILIES.items():
        for _import_name, requirement in requirements:
            name = pack._dist_name(requirement)
            if name in pins:
                assert requirement == pins[name], f"{family}: {requirement} but install.py installs {pins[name]}"


def test_guard_reports_missing_and_out_of_range_packages(pack):
    unmet = pack._unmet([("scipy", "scipy>=1.11"), ("scipy", "scipy<1"), ("ghost_module_xyz", "ghost-dist")])
    found = __import__("scipy").__version__
    assert unmet == [("scipy<1", found), ("ghost-dist", None)]


def test_the_install_command_in_the_log_line_really_runs(pack):
    """The printed command is run as a user would paste it into a shell. Every requirement here is already met, so
    pip only checks (no download) and exits 0: the interpreter path, the quoting and --no-deps are right."""
    command = pack.install_command(["scipy>=1.11", "opencv-python-headless<5", "omnivoice==0.2.1"])
    assert command == (f'"{sys.executable}" -m pip install "scipy>=1.11" "opencv-python-headless<5" && '
                       f'"{sys.executable}" -m pip install --no-deps "omnivoice==0.2.1"')
    proc = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "already satisfied" in proc.stdout


@pytest.mark.parametrize("version, ok", [("5.5.0", True), ("5.24.0", True), ("5.99.1.dev0", True),
                                         ("5.4.2", False), ("4.57.6", False), ("6.0.0", False)])
def test_sam3_refuses_transformers_outside_its_tested_range(version, ok):
    from engines.sam3.hf_video import check_transformers_version

    if ok:
        check_transformers_version(version)
    else:
        with pytest.raises(RuntimeError, match=r'transformers>=5\.5,<6.*found transformers ' + version):
            check_transformers_version(version)
