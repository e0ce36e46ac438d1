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
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = REPO_ROOT / "workflows" / "api" / "broadcast_musetalk.api.json"
PRESENTER = "broadcast_demo_presenter.mp4"
HF_HINT = "pip install -U huggingface_hub   # provides the `hf` command"


@dataclass(frozen=True)
class ModelFiles:
    folder: str          # inside models/
    files: tuple         # that must exist inside it
    repo: str            # the upstream Hugging Face repository
    command: str         # downloads exactly these files there ({models} = the models folder)
    used_by: str

    def missing(self, models: Path) -> list[str]:
        return [f for f in self.files if not (models / self.folder / f).exists()]


BROADCAST_MODELS = (
    ModelFiles("omnivoice/omnivoice", ("config.json", "model.safetensors", "tokenizer.json", "audio_tokenizer"),
               "k2-fsa/OmniVoice", "hf download k2-fsa/OmniVoice --local-dir {models}/omnivoice/omnivoice",
               "broadcast_musetalk, broadcast_ditto, tts_master"),
    ModelFiles("musetalk/musetalk-v15/musetalkV15", ("musetalk.json", "unet.pth"), "TMElyralab/MuseTalk",
               "hf download TMElyralab/MuseTalk musetalkV15/musetalk.json musetalkV15/unet.pth "
               "--local-dir {models}/musetalk/musetalk-v15", "broadcast_musetalk, musetalk_lipsync"),
    ModelFiles("musetalk/musetalk-v15/sd-vae", ("config.json", "diffusion_pytorch_model.bin"),
               "stabilityai/sd-vae-ft-mse", "hf download stabilityai/sd-vae-ft-mse config.json "
               "diffusion_pytorch_model.bin --local-dir {models}/musetalk/musetalk-v15/sd-vae",
               "broadcast_musetalk, musetalk_lipsync"),
    ModelFiles("musetalk/musetalk-v15/whisper", ("config.json", "pytorch_model.bin", "preprocessor_config.json"),
               "openai/whisper-tiny", "hf download openai/whisper-tiny config.json pytorch_model.bin "
               "preprocessor_config.json --local-dir {models}/musetalk/musetalk-v15/whisper",
               "broadcast_musetalk, musetalk_lipsync"),
    ModelFiles("ditto/ditto-talkinghead", ("ditto_cfg/v0.4_hubert_cfg_pytorch.pkl", "ditto_pytorch/models",
                                           "ditto_pytorch/aux_models"), "digital-avatar/ditto-talkinghead",
               'hf download digital-avatar/ditto-talkinghead --include "ditto_cfg/*" "ditto_pytorch/*" '
               "--local-dir {models}/ditto/ditto-talkinghead", "broadcast_ditto, ditto_talking_head"),
)
DEMO_NEEDS = BROADCAST_MODELS[:4]     # broadcast_musetalk


def markdown_table() -> str:
    rows = ["| folder inside `models/` | upstream repository | used by | download command |", "|---|---|---|---|"]
    for m in BROADCAST_MODELS:
        rows.append(f"| `{m.folder}/` | `{m.repo}` | {m.used_by} | "
                    f"`{m.command.format(models='<ComfyUI>/models')}` |")
    return "\n".join(rows)


def report(models: Path, needed=DEMO_NEEDS) -> list[str]:
    """Lines naming each missing file and folder with the command that downloads it; empty when all are there."""
    lines = []
    for m in needed:
        missing = m.missing(models)
        if missing:
            lines.append(f"missing in {models / m.folder}: {', '.join(missing)}")
            lines.append(f"    {m.command.format(models=models)}")
    if lines:
        lines.insert(0, f"the broadcast models are not all in {models} ({HF_HINT}):")
    return lines


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
