"""scripts/broadcast_demo.py: which broadcast models are missing, the command for each, and the README's table."""
from __future__ import annotations

import shlex

from engines.common.model_downloads import FAMILIES
from scripts import broadcast_demo as demo
from tests.workflow_cases import REPO_ROOT


def test_readme_has_the_same_table_of_models_and_commands():
    assert demo.markdown_table() in (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _fill(models, family: str) -> None:
    fam = FAMILIES[family]
    for d in fam.downloads:
        for entry in d.provides:
            path = models / fam.folder / fam.default_name / d.into / (entry if isinstance(entry, str) else entry[0])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")


def test_every_missing_model_is_named_with_the_command_that_downloads_it(tmp_path):
    text = "\n".join(demo.report(tmp_path))
    commands = [line.strip() for line in text.splitlines() if line.strip().startswith("hf download")]
    # broadcast_musetalk: OmniVoice (one download) and MuseTalk (UNet, VAE, Whisper encoder)
    assert len(commands) == 4, text
    for command in commands:
        args = shlex.split(command)
        local = args[args.index("--local-dir") + 1]
        assert local.startswith(str(tmp_path / "omnivoice")) or local.startswith(str(tmp_path / "musetalk")), command
    assert "OmniVoice Loader" in text and "MuseTalk Loader" in text


def test_nothing_is_reported_once_the_files_are_there_and_a_voice_is_then_required(tmp_path, capsys):
    _fill(tmp_path, "omnivoice")
    _fill(tmp_path, "musetalk")
    assert demo.report(tmp_path) == []
    vae = tmp_path / "musetalk" / "musetalk-v15" / "sd-vae" / "config.json"
    vae.unlink()
    text = "\n".join(demo.report(tmp_path))
    assert "1 model is missing" in text and "sd-vae/config.json" in text
    assert text.count("hf download") == 1 and "stabilityai/sd-vae-ft-mse" in text
    vae.write_bytes(b"")
    assert demo.main(["--models-dir", str(tmp_path)]) == 3
    assert "--voice" in capsys.readouterr().err
