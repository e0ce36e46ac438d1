"""scripts/broadcast_demo.py: which broadcast models are missing, the command for each, and the README's table."""
from __future__ import annotations

from scripts import broadcast_demo as demo
from tests.workflow_cases import REPO_ROOT


def test_readme_has_the_same_table_of_models_and_commands():
    assert demo.markdown_table() in (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_every_missing_file_is_named_with_the_command_that_downloads_it(tmp_path):
    lines = demo.report(tmp_path)
    text = "\n".join(lines)
    for m in demo.DEMO_NEEDS:
        assert str(tmp_path / m.folder) in text and m.command.format(models=tmp_path) in text
        assert f"`{m.repo}`" in demo.markdown_table() and m.repo in m.command


def test_nothing_is_reported_once_the_files_are_there_and_a_voice_is_then_required(tmp_path, capsys):
    for m in demo.DEMO_NEEDS:
        for f in m.files:
            (tmp_path / m.folder / f).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / m.folder / f).write_bytes(b"")
    assert demo.report(tmp_path) == []
    one_missing = demo.DEMO_NEEDS[1]
    (tmp_path / one_missing.folder / one_missing.files[-1]).unlink()
    assert f"missing in {tmp_path / one_missing.folder}: {one_missing.files[-1]}" in demo.report(tmp_path)[1]
    (tmp_path / one_missing.folder / one_missing.files[-1]).write_bytes(b"")
    assert demo.main(["--models-dir", str(tmp_path)]) == 3
    assert "--voice" in capsys.readouterr().err
