"""engines/common/model_downloads.py: the one table of model files and download commands.

Oracles: each engine's own file check (what the loader really refuses without), the installed `hf` command's own
argument parser (the commands must mean what they say), and fnmatch for --include patterns."""
from __future__ import annotations

import fnmatch
import json
import shlex
from pathlib import Path

import pytest

from engines.common import model_downloads as md
from engines.common.errors import InputError
from engines.common.model_files import require_files
from tests.workflow_cases import REPO_ROOT


def _first(entry):
    return entry if isinstance(entry, str) else entry[0]


def _fill(folder: Path, family: str) -> list[Path]:
    made = []
    for d in md.FAMILIES[family].downloads:
        for entry in d.provides:
            path = folder / d.into / _first(entry)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            made.append(path)
    return made


def _engine_check(family: str, folder: Path) -> None:
    """The loader's own check of the folder's files (raises InputError naming what is missing)."""
    if family == "omnivoice":
        from engines.omnivoice.model import REQUIRED_FILES
        require_files(folder, REQUIRED_FILES)
    elif family == "musetalk":
        from engines.musetalk.loader import check_layout
        check_layout(folder)
    elif family == "sam3":
        from engines.sam3.hf_video import REQUIRED_FILES
        require_files(folder, REQUIRED_FILES)
    elif family == "ditto":
        from engines.ditto.loader import AUX_DIR, AUX_FILES, CFG_DIR, MODELS_DIR, WEIGHT_FILES
        needed = [f"{CFG_DIR}/v0.4_hubert_cfg_pytorch.pkl", *(f"{MODELS_DIR}/{f}" for f in WEIGHT_FILES.values()),
                  *(f"{AUX_DIR}/{f}" for f in AUX_FILES.values())]
        require_files(folder, needed)


@pytest.mark.parametrize("family", ["omnivoice", "musetalk", "sam3", "ditto"])
def test_the_table_lists_exactly_the_files_the_loader_checks(tmp_path, family):
    folder = tmp_path / md.FAMILIES[family].folder / "m"
    made = _fill(folder, family)
    _engine_check(family, folder)                       # everything the table names is enough for the loader
    assert md.check_model(family, "m", [folder.parent]) is None
    folder_only = md.FAMILIES[family].folder_only
    for path in made:                                   # and each file it names is one the loader needs
        path.rename(path.with_name(path.name + ".away"))
        with pytest.raises(InputError):
            _engine_check(family, folder)
        missing = md.check_model(family, "m", [folder.parent])
        if folder_only:   # checked by the loader when it runs (only on a cache miss), not before
            assert missing is None
        else:
            assert missing is not None and any(str(path.relative_to(folder)) in f for f in missing.files), path
        path.with_name(path.name + ".away").rename(path)


def _hf_download_parser():
    try:
        from huggingface_hub.cli.hf import app
    except ImportError:
        pytest.skip("huggingface_hub's `hf` command is not installed here")
    command = app.get_command(None, "download")
    return command.materialize() if hasattr(command, "materialize") else command


@pytest.mark.parametrize("family", sorted(md.FAMILIES))
def test_every_command_parses_with_hf_and_fetches_what_the_loader_checks(tmp_path, family):
    parser = _hf_download_parser()
    name = md.FAMILIES[family].default_name
    missing = md.check_model(family, name, [tmp_path / family])
    assert missing is not None and missing.downloads
    for d in missing.downloads:
        args = shlex.split(d.command(missing.folder))
        assert args[:2] == ["hf", "download"]
        params = parser.make_context("download", args[2:]).params
        assert params["repo_id"] == d.repo and params["local_dir"] == str(missing.folder / d.into)
        assert tuple(params["filenames"]) == d.fetch and tuple(params["include"]) == d.include
        for entry in d.provides:   # one of an entry's alternatives is enough
            options = (entry,) if isinstance(entry, str) else entry
            fetched = (not d.fetch and not d.include) or any(
                o in d.fetch or any(fnmatch.fnmatch(o, p) for p in d.include) for o in options)
            assert fetched, f"{d.command(missing.folder)} fetches none of {options}"


def test_a_missing_models_folder_and_a_missing_family_folder_are_named_as_such(tmp_path):
    nowhere = md.check_model("omnivoice", "omnivoice", [tmp_path / "no_models" / "omnivoice"])
    assert "models folder" in nowhere.problem and str(tmp_path / "no_models") in nowhere.problem
    (tmp_path / "models").mkdir()
    no_family = md.check_model("omnivoice", "omnivoice", [tmp_path / "models" / "omnivoice"])
    assert str(tmp_path / "models" / "omnivoice") in no_family.problem and "does not exist yet" in no_family.problem
    (tmp_path / "models" / "omnivoice").mkdir()
    other = md.check_model("omnivoice", "omnivoice", [tmp_path / "models" / "omnivoice"])
    assert "no folder named 'omnivoice'" in other.problem


def test_a_missing_models_folder_is_said_once_however_many_models_it_lacks(tmp_path):
    """Seen on a fresh machine: every model's paragraph repeated "ComfyUI's models folder ... does not exist". The
    user's one fix (the right models folder) is stated once, under the head; each model keeps its command."""
    roots = tmp_path / "no_models"
    missing = [md.check_model(f, md.FAMILIES[f].default_name, [roots / md.FAMILIES[f].folder])
               for f in ("omnivoice", "musetalk", "ditto")]
    text = md.refusal(missing)
    assert text.count(f"models folder {roots} does not exist") == 1
    assert text.index("does not exist") < text.index(str(missing[0].folder))  # under the head, before the models
    for m in missing:
        assert all(d.command(m.folder) in text for d in m.downloads)
    (tmp_path / "models").mkdir()  # a problem of one folder only stays in that model's paragraph
    alone = md.check_model("omnivoice", "omnivoice", [tmp_path / "models" / "omnivoice"])
    text = md.refusal([alone, missing[1]])
    assert text.count("does not exist yet") == 1 and text.count("does not exist:") == 1


def test_a_broadcast_with_no_models_lists_every_loader_once_in_one_text(tmp_path):
    prompt = json.loads((REPO_ROOT / "workflows" / "api" / "broadcast_wardrobe.api.json").read_text())
    loaders = {nid: n for nid, n in prompt.items() if n["class_type"] in md.LOADERS
               and n["inputs"].get(md.LOADERS[n["class_type"]][0]) not in md.NONE_CHOICES}
    found = md.graph_missing(prompt, lambda folder: [tmp_path / folder])
    assert [nid for nid, _ in found] == sorted(loaders, key=int)
    text = md.refusal(m for _, m in found)
    assert f"{len(found)} models are missing" in text
    for nid, node in loaders.items():
        assert text.count(f"{node['_meta']['title']} needs ") == 1
    assert "Traceback" not in text and "Error" not in text and "engines." not in text
    # Two loaders naming one folder: the folder is reported once, under the first.
    twin = dict(prompt, **{"9999": dict(prompt[sorted(loaders, key=int)[0]])})
    assert len(md.graph_missing(twin, lambda folder: [tmp_path / folder])) == len(found)
