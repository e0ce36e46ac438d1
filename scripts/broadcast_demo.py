"""The broadcast demo: `broadcast_musetalk` on a sample presenter and script when the models are there, and
otherwise the exact commands that download every missing model file into the right `models/` folder.

    $BA_PYTHON scripts/broadcast_demo.py --models-dir <ComfyUI>/models --voice my_voice.wav --transcript "..."
    $BA_PYTHON scripts/broadcast_demo.py --models-dir <ComfyUI>/models --table      # only the table

Exit codes: 0 the broadcast ran (the .mp4 path is printed last), 3 models or the voice clip are missing (the table
and what to do are printed), else run_workflow.py's codes. `bash scripts/demo.sh` calls this first, and runs the
weight-free demo when it exits 3. The README's model table is `markdown_table()` (a test keeps them equal).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.common.model_downloads import LOADERS, graph_missing, refusal, table_rows  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = REPO_ROOT / "workflows" / "api" / "broadcast_musetalk.api.json"
PRESENTER = "broadcast_demo_presenter.mp4"


def markdown_table() -> str:
    """The README's table: every model download of the shipped workflows' pack loaders (one implementation:
    engines/common/model_downloads.py, which the loaders' refusals and the runners also read)."""
    rows = ["| folder inside `models/` | upstream repository | used by | download command |", "|---|---|---|---|"]
    for row in table_rows():
        gated = " (gated: accept its licence, `hf auth login`)" if row["download"].note else ""
        rows.append(f"| `{row['folder']}/` | `{row['repo']}`{gated} | {', '.join(used_by(row['family']))} | "
                    f"`{row['command']}` |")
    return "\n".join(rows)


def used_by(family: str) -> list[str]:
    """The shipped workflows with a loader of `family` (read from their API files, so the table stays true)."""
    found = []
    for path in sorted((REPO_ROOT / "workflows" / "api").glob("*.api.json")):
        prompt = json.loads(path.read_text(encoding="utf-8"))
        if any(LOADERS.get(n.get("class_type"), ("", ""))[1] == family
               and (n.get("inputs") or {}).get(LOADERS[n["class_type"]][0]) not in (None, "(none)", "none")
               for n in prompt.values()):
            found.append(path.name[:-len(".api.json")])
    return found


def report(models: Path, workflow: Path = WORKFLOW) -> list[str]:
    """The lines of the refusal a server would give for `workflow`'s missing models in `models`, each with the
    command that downloads it; empty when all are there."""
    prompt = json.loads(workflow.read_text(encoding="utf-8"))
    missing = graph_missing(prompt, lambda folder: [models / folder])
    return refusal(m for _, m in missing).splitlines() if missing else []


def write_presenter(path: Path) -> None:
    """The sample presenter loop: the public-domain astronaut portrait, moved and scaled a little per frame."""
    from tests.fixtures.tiny_musetalk import astronaut_loop, write_clip

    if not path.exists():
        frames, _ = astronaut_loop(50, width=384, height=512)
        write_clip(path, frames, 25.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models-dir", required=True, type=Path)
    p.add_argument("--voice", type=Path, help="a 3-10 s clip of the voice to clone")
    p.add_argument("--transcript", help="exactly what is said in --voice")
    p.add_argument("--table", action="store_true", help="print the table of models and commands, then exit")
    args, rest = p.parse_known_args(argv)   # the rest goes to scripts/run_workflow.py (--gpu, --timeout ...)
    if args.table:
        print(markdown_table())
        return 0
    lines = report(args.models_dir.resolve())
    if lines:
        print("\n".join(lines), file=sys.stderr)
        return 3
    if args.voice is None or not args.transcript:
        print("the broadcast models are present; to run the broadcast give the voice to clone: "
              "--voice <3-10 s clip> --transcript \"<what it says>\"", file=sys.stderr)
        return 3
    from scripts import run_workflow

    cache = run_workflow.user_cache()
    inputs = cache / "comfyui-base" / "input"
    inputs.mkdir(parents=True, exist_ok=True)
    write_presenter(inputs / PRESENTER)
    shutil.copyfile(args.voice, inputs / f"broadcast_demo_voice{args.voice.suffix}")
    return run_workflow.main([str(WORKFLOW), "--models-dir", str(args.models_dir),
                              "--set", f"Presenter Loop.video={PRESENTER}",
                              "--set", f"Voice Clip.audio_file=broadcast_demo_voice{args.voice.suffix}",
                              "--set", f"Anchor Voice.reference_text={args.transcript}", *rest])


if __name__ == "__main__":
    sys.exit(main())
