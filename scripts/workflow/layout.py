"""What each shipped workflow looks like in the editor: its stages (groups), its Note and its place in the template
browser. `scripts/workflow/editor.py` turns this into the UI files and thumbnails; tests read it too.

STAGES[stem] lists (group title, node ids of the API twin) left to right; every node is in exactly one stage.
ORDER is the template browser's order, from "start here" to advanced, TITLES[stem] the title it shows there and
DESCRIPTIONS[stem] its card's one-sentence description (all from web/templates.json); NOTES[stem] is the Note on the canvas (what to provide, where models go, what to expect,
how long).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engines.common.model_downloads import FAMILIES, LOADERS, NONE_CHOICES  # noqa: E402

# The template browser's order, from "start here" to advanced, and the title each file is shown under: one list in
# web/templates.json, which the editor extension (web/js/templates.js) reads to sort and title this pack's
# templates (the server lists them in file-system order under their file names).
TEMPLATES_JSON = Path(__file__).resolve().parents[2] / "web" / "templates.json"
_TEMPLATES = json.loads(TEMPLATES_JSON.read_text(encoding="utf-8"))["templates"]
ORDER = tuple(t["name"] for t in _TEMPLATES)
TITLES: dict[str, str] = {t["name"]: t["title"] for t in _TEMPLATES}
# What each graph makes, in one sentence: the template card's description (web/js/templates.js puts it there).
DESCRIPTIONS: dict[str, str] = {t["name"]: t["description"] for t in _TEMPLATES}

_VOICE = [("Voice: script and cloned voice", ["1", "2", "3", "4", "5", "6"])]
# The broadcasts caption their speech: Captions stands beside Audio Master, whose audio and Speak's timing it takes.
_CAPTIONED_VOICE = "Voice, script and captions"

STAGES: dict[str, list[tuple[str, list[str]]]] = {
    "demo_export": [("Input", ["1"]), ("Export", ["2"])],
    "broadcast_musetalk": [(_CAPTIONED_VOICE, ["1", "2", "3", "4", "5", "6", "14"]), ("Presenter loop", ["7"]),
                           ("Lip-sync (MuseTalk)", ["8", "9", "10", "11"]), ("Export and QC", ["12", "13"])],
    "broadcast_ditto": [(_CAPTIONED_VOICE, ["1", "2", "3", "4", "5", "6", "15"]), ("Presenter loop", ["7"]),
                        ("Lip-sync (Ditto)", ["8", "9", "10", "11", "12"]), ("Export and QC", ["13", "14"])],
    "broadcast_wardrobe": [("Wardrobe swap: loop and masks", ["1", "2", "3", "4", "5", "6", "7"]),
                           ("Wardrobe swap: Wan VACE", ["8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18"]),
                           ("Wardrobe swap: re-dressed loop", ["19", "20"]),
                           (_CAPTIONED_VOICE, ["101", "102", "103", "104", "105", "106", "114"]),
                           ("Lip-sync the new loop (MuseTalk)", ["108", "109", "110", "111"]),
                           ("Export and QC", ["112", "113"])],
    "wardrobe_core_sam3_masks": [("Input and core SAM3", ["1", "2", "3", "4"]), ("Track", ["5", "6", "7", "8"]),
                                 ("Cache and save", ["9", "10", "11", "12", "13"])],
    "tts_dialogue": [("Model and saved voices", ["1", "4", "5"]), ("Dialogue (two voices)", ["2", "3"]),
                     ("Morphed voice", ["6", "7", "8"]), ("Save", ["9", "10"])],
    "tts_master": [("Voice", ["1", "2", "3"]), ("Script", ["4"]), ("Speech, mastering and save", ["5", "6", "7"])],
    "musetalk_lipsync": [("Inputs", ["1", "2"]), ("Lip-sync (MuseTalk)", ["3", "4", "5", "6"]),
                         ("Export and QC", ["7", "8"])],
    "ditto_talking_head": [("Inputs", ["1", "2"]), ("Lip-sync (Ditto)", ["3", "4", "5", "6", "7"]),
                           ("Export and QC", ["8", "9"])],
    "wardrobe_mask_check": [("Inputs", ["1", "2"]), ("Masks", ["3", "4", "16", "17", "5", "6", "7"]),
                            ("Pixel side (compositor)", ["8", "9"]),
                            ("Sampler side (token grid)", ["10", "11", "12", "15"]), ("Check", ["13", "14"])],
    "wardrobe_vace_prompt": [("Models, garment and caption", ["1", "2", "3", "6"]), ("Encode once", ["4", "5"])],
    "wardrobe_vace": [("Inputs and masks", ["1", "2", "3", "4", "5"]), ("Crop", ["6", "7"]),
                      ("Wan VACE models and prompt", ["8", "9", "10", "11", "12"]),
                      ("Inpaint", ["13", "14", "15", "16", "17", "18"]),
                      ("Composite and export", ["19", "20", "21"])],
    "wardrobe_minimax_h3": [("Inputs and masks", ["1", "2", "3", "4", "5", "6"]), ("Crop", ["7", "8", "9"]),
                            ("MiniMax H3 models and prompt", ["10", "11", "12", "13", "14", "15", "16", "31", "17",
                                                              "32", "33"]),
                            ("Inpaint", ["18", "19", "20", "21", "22", "23", "24", "25", "26", "30"]),
                            ("Composite and export", ["27", "28", "29"])],
}

# Stages that start a new row (by position in STAGES[stem]): long graphs wrap so the canvas and the thumbnail stay
# readable; links still run left to right inside each row.
ROW_BREAKS: dict[str, tuple[int, ...]] = {
    "broadcast_musetalk": (1,),
    "broadcast_ditto": (1,),
    "wardrobe_mask_check": (3,),
    "wardrobe_vace": (2, 4),
    "broadcast_wardrobe": (1, 3, 4),
    "wardrobe_minimax_h3": (2, 3, 4),
}

API_DIR = Path(__file__).resolve().parents[2] / "workflows" / "api"


def api_path(stem: str) -> Path:
    """workflows/api/<stem>.api.json: the API twin every UI file, Note, thumbnail and `models` entry is made from."""
    return API_DIR / f"{stem}.api.json"


def api_of(stem: str) -> dict:
    return json.loads(api_path(stem).read_text(encoding="utf-8"))


def model_commands(stem: str) -> list[str]:
    """The `hf download` commands for the pack models `stem`'s loaders name, run from the ComfyUI folder (the same
    table the loaders' refusals read: engines/common/model_downloads.py)."""
    api = api_of(stem)
    commands = []
    for node in sorted(api.values(), key=lambda n: n.get("_meta", {}).get("title", "")):
        input_name, family = LOADERS.get(node["class_type"], (None, None))
        name = (node.get("inputs") or {}).get(input_name) if input_name else None
        if not isinstance(name, str) or name in NONE_CHOICES:
            continue
        fam = FAMILIES[family]
        for d in fam.downloads_for(name):
            line = d.command(Path("models") / fam.folder / name)
            if line not in commands:
                commands += ([f"({d.note})"] if d.note else []) + [line]
    return commands


def _with_models(stem: str, text: str) -> str:
    """`text` with its "{models}" line replaced by the download commands of `stem`'s pack models (run from the
    ComfyUI folder; `pip install -U huggingface_hub` gives `hf`)."""
    lines = model_commands(stem)
    block = ("Models (run in the ComfyUI folder; pip install -U huggingface_hub gives hf):\n" + "\n".join(lines)
             if lines else "")
    return text.replace("{models}", block)


NOTES: dict[str, str] = {
    "demo_export": (
        "START HERE - no models needed.\n\n"
        "Provide: a video with sound, uploaded in Load Video (choose file to upload). The sample clip: from the "
        "ComfyUI folder run python custom_nodes/<this pack's folder>/scripts/sample_clip.py input, then press R.\n"
        "First: pick your clip in Load Video; set filename_prefix in Export Video.\n"
        "Expect: one .mp4 in output/broadcast/, the preview and the encode summary (encoder used and why, colour, "
        "duration, size) in the Export node.\n"
        "Time: seconds."),
    "broadcast_musetalk": (
        "THE BROADCAST (MuseTalk): news script + cloned voice + presenter loop -> one MP4.\n\n"
        "Provide: a 3-10 s voice clip (Voice Clip, upload) and its exact transcript (Anchor Voice), a presenter "
        "action loop with the face visible (Presenter Loop, upload), and your script (News Script, one line per "
        "sentence).\n"
        "First: upload the voice clip and the loop, type the transcript in Anchor Voice and the script.\n"
        "{models}\n"
        "Expect: the mastered speech (player in Audio Master), the lip-synced clip as long as the speech (the loop "
        "walked forward then back, as upstream MuseTalk; set loop_mode), one .mp4 with preview and encode summary "
        "in Export Broadcast, then "
        "Broadcast QC's verdict on that file (loudness, levels, freezes, A/V and lip-sync offset; word accuracy "
        "with a Whisper model) with its report and sheet: the file is written either way.\n"
        "Streaming: Lip Sync's stream_to_export hands its frames to Export Broadcast, which encodes them as they "
        "are rendered, so the clip never exists whole in memory (turn it off and wire Lip Sync's images to see the "
        "frames as an IMAGE batch).\n"
        "The avatar is cached by content: the second run on the same loop skips it.\n"
        "Captions: Captions turns Speak's timing into SRT + WebVTT files beside the MP4 (<name>.<lang>.srt/.vtt) "
        "and a subtitle track inside it, showing the script as written (figures, currency); profile sets the "
        "broadcast rules (42 chars x 2 lines...); burn_in on draws them onto the picture too.\n"
        "Delivery: pick the profile once, in Audio Master (streaming: -14 LUFS, -1 dBTP; or EBU R128, ATSC "
        "A/85, podcast); its 'delivery' link makes Broadcast QC check the same figures.\n"
        "Time on a GPU: about 1x real time; on a CPU much longer."),
    "broadcast_ditto": (
        "THE BROADCAST (Ditto): news script + cloned voice + presenter loop -> one MP4, whole-head motion.\n\n"
        "Provide: a 3-10 s voice clip (Voice Clip) and its transcript (Anchor Voice), a presenter loop (Presenter "
        "Loop), your script (News Script).\n"
        "First: upload the voice clip and the loop, type the transcript in Anchor Voice and the script.\n"
        "{models}\n(Ditto's InsightFace face models are for non-commercial use only.)\n"
        "Expect: the mastered speech (player in Audio Master), a clip as long as the speech, one .mp4 with preview "
        "and summary in Export Broadcast, then Broadcast QC's pass/fail verdict and report on that file (never "
        "blocks it). Ditto Render streams its frames into the export (stream_to_export): the clip never exists whole in "
        "memory. The avatar packet is cached.\n"
        "Captions: Captions turns Speak's timing into SRT + WebVTT files beside the MP4 (<name>.<lang>.srt/.vtt) "
        "and a subtitle track inside it, showing the script as written (figures, currency); profile sets the "
        "broadcast rules (42 chars x 2 lines...); burn_in on draws them onto the picture too.\n"
        "Delivery: pick the profile once, in Audio Master (streaming: -14 LUFS, -1 dBTP; or EBU R128, ATSC "
        "A/85, podcast); its 'delivery' link makes Broadcast QC check the same figures.\n"
        "Time on a GPU: about real time; on a CPU much longer."),
    "broadcast_wardrobe": (
        "THE BROADCAST WITH A WARDROBE SWAP: re-dress the presenter loop (Wan 2.1 VACE), then lip-sync the new loop "
        "to the cloned voice reading the script -> one MP4.\n\n"
        "Provide: the presenter loop (Presenter Loop), a garment reference image, the prompt encoded once by "
        "wardrobe_vace_prompt, a 3-10 s voice clip and its transcript, the script.\n"
        "First: run wardrobe_mask_check on your loop, encode your prompt with wardrobe_vace_prompt, then set "
        "the prompt and garment reference here.\n"
        "{models}\nCore's files, by name: models/diffusion_models/wan2.1_vace_14B_fp16.safetensors, "
        "models/vae/wan_2.1_vae.safetensors.\n"
        "Expect: the re-dressed loop (masks cached, so a second run skips SAM3), the mastered speech, one .mp4 in "
        "Export Broadcast (Lip Sync streams its frames into it) and Broadcast QC's verdict on it. Without a swap, "
        "use broadcast_musetalk.\n"
        "Captions: Captions turns Speak's timing into SRT + WebVTT files beside the MP4 (<name>.<lang>.srt/.vtt) "
        "and a subtitle track inside it, showing the script as written (figures, currency); profile sets the "
        "broadcast rules (42 chars x 2 lines...); burn_in on draws them onto the picture too.\n"
        "Delivery: pick the profile once, in Audio Master (streaming: -14 LUFS, -1 dBTP; or EBU R128, ATSC "
        "A/85, podcast); its 'delivery' link makes Broadcast QC check the same figures.\n"
        "Time: the swap takes minutes per second of loop on a large GPU; it is done once per loop."),
    "wardrobe_core_sam3_masks": (
        "Garment and hands masks with core's SAM3 video tracker, stored in the pack's mask cache for the swaps.\n\n"
        "NEEDS A NEWER COMFYUI (0.33.0 or newer): SAM3_VideoTrack is a core node that ComfyUI 0.3.75 does not have; "
        "there it shows as missing (red). Update ComfyUI to run it.\n"
        "Provide: the presenter loop (Load Video), the garment and hands prompts.\n"
        "First: type the garment and hands prompts.\n"
        "Models: core's SAM3 checkpoint in models/checkpoints/ (e.g. sam3.1_multiplex_fp16.safetensors).\n"
        "Expect: the masks cached for wardrobe_vace / wardrobe_minimax_h3, and saved as PNGs (one a frame, white = "
        "mask) in output/wardrobe/ (core_sam3_garment_mask_*, core_sam3_hands_mask_*).\n"
        "Time: about a second per frame on a GPU."),
    "tts_master": (
        "Voice clone + broadcast mastering.\n\n"
        "Provide: a 3-10 s reference clip (Reference clip) and its exact transcript (Anchor voice); or a voice "
        "saved earlier with save_as. Type the script in Script.\n"
        "First: upload your reference clip and type exactly what it says.\n"
        "{models}\n"
        "Expect: a player with the mastered speech (-14 LUFS, -1 dBTP) and its report; Save Speech writes it as FLAC "
        "to output/broadcast/ (tts_master_*.flac).\n"
        "Time: seconds per sentence on a GPU."),
    "tts_dialogue": (
        "Two voices: a speaker-tagged script read by two saved voices into one mastered track, and a 70/30 morph of "
        "the two voices.\n\n"
        "Provide: two voices saved with Broadcast Voice Prompt's save_as ('dialogue anchor', 'dialogue "
        "correspondent'; or change speakers) and the script in Dialogue.\n"
        "First: save the two voices with tts_master (save_as), then edit the script.\n"
        "{models}\nVoices: models/omnivoice_voices/.\n"
        "Expect: two players with mastered speech (Master dialogue, Master morph); Save Dialogue and Save Morph write "
        "them as FLAC to output/broadcast/ (tts_dialogue_*.flac, tts_dialogue_morph_*.flac).\n"
        "Time: seconds per sentence on a GPU."),
    "musetalk_lipsync": (
        "MuseTalk lip-sync of an avatar loop to speech you already have.\n\n"
        "Provide: the presenter loop (Presenter Loop) and a speech file (Speech), both uploaded.\n"
        "First: upload the loop and the speech.\n"
        "{models}\n"
        "Expect: a clip as long as the speech, only the mouth region changed, exported with the speech; Broadcast QC "
        "checks the file (loudness, A/V, lip-sync offset) and shows pass/fail.\n"
        "Options (Lip Sync): viseme_threshold 2 reuses the mouth of a repeated sound (no UNet, no VAE; -1 off, 0 "
        "exact = bit-identical output), the hit rate is in its summary; blend reinhard matches the mouth's colours "
        "(feather, poisson).\n"
        "Time: about real time on a GPU."),
    "ditto_talking_head": (
        "Ditto talking head from a presenter loop (or one portrait) and speech.\n\n"
        "Provide: the loop (Presenter Loop) and speech (Speech).\n"
        "First: upload the loop (or a portrait) and the speech.\n"
        "{models}\n"
        "Expect: a clip as long as the speech with head motion, exported with the speech; Broadcast QC checks the "
        "file and shows pass/fail.\n"
        "Options (Render): blend reinhard matches the mouth's colours to the frame (feather = upstream's, poisson "
        "= seamless clone of the face).\n"
        "Time: about real time on a GPU."),
    "wardrobe_mask_check": (
        "Run this before spending GPU time on a wardrobe swap: no models needed.\n\n"
        "Provide: the clip and a mask video (red = garment, green = hands).\n"
        "First: upload both.\n"
        "Expect: an overlay video: sampler token grid (blue), compositor pixel mask (green), protected hands (red).\n"
        "Time: seconds."),
    "wardrobe_vace_prompt": (
        "Encode the garment prompt once (Wan text encoder, about 11 GB); the VACE swap loads the result.\n\n"
        "Provide: the garment reference image.\n"
        "First: type the garment prompt.\n"
        "Models (core's, by name): models/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors, "
        "models/vae/wan_2.1_vae.safetensors.\n"
        "Expect: the folder wardrobe_vace_prompt (Save Prompt Conditioning): in datasets/ beside models/ on "
        "ComfyUI 0.33.0, in output/ on 0.3.75.\n"
        "Time: a minute."),
    "wardrobe_vace": (
        "Wardrobe swap with Wan 2.1 VACE: re-dress the presenter loop (then lip-sync the new loop).\n\n"
        "Provide: the loop (Load Video), a garment reference image, the prompt encoded by wardrobe_vace_prompt.\n"
        "First: run wardrobe_mask_check on your loop and wardrobe_vace_prompt for your prompt.\n"
        "{models}\nCore's files, by name: models/diffusion_models/wan2.1_vace_14B_fp16.safetensors, "
        "models/vae/wan_2.1_vae.safetensors.\n"
        "Expect: the re-dressed loop with the source audio, hands kept in front of the garment.\n"
        "Time: minutes per second of video on a large GPU."),
    "wardrobe_minimax_h3": (
        "Wardrobe swap on core's MiniMax H3 nodes.\n\n"
        "NEEDS A NEWER COMFYUI (0.33.0 or newer): EmptyMiniMaxH3LatentAV, MiniMaxH3ReferenceToVideo and "
        "MiniMaxH3SigmaShift are core nodes that ComfyUI 0.3.75 does not have; there they show as missing (red). "
        "Update ComfyUI to run it.\n"
        "Provide: the loop (Load Video) and the garment reference.\n"
        "First: upload the loop and the garment reference.\n"
        "{models}\nCore's files: the H3 model, LoRA, text encoder and VAEs named in the loaders.\n"
        "Expect: the re-dressed loop with the source audio.\n"
        "Time: minutes on a large GPU."),
}
NOTES = {stem: _with_models(stem, text) for stem, text in NOTES.items()}
