"""The pack's nodes in the real editor (frontend 1.32.9 on ComfyUI 0.3.75, 1.49.6 on 0.33.0), in headless Chromium:
previews stay inside their node and off their neighbours, the export summary is shown in full, internal widgets stay out of 1.49's Parameters
panel, and Broadcast Load Audio shows and plays a file uploaded through its button.

Screenshots are kept as test artifacts in each test's tmp_path (pytest keeps the last runs): `<step>.png` at each
checked step, and `page_at_end.png` (tests/comfy/conftest.py).
"""
from __future__ import annotations

import json
import uuid
import wave

import numpy as np
import pytest

from scripts.workflow.api import apply_overrides
from tests.comfy import frontend
from tests.workflow_cases import TEMPLATE_DIR, case_for

# The pack's widgets the editor must never show as parameters (web/js/broadcast_media.js).
INTERNAL = ("broadcast_preview", "broadcast_upload", "broadcast_audio", "broadcast_summary")

# Every video, audio and summary element shown in a node, with its node's rectangle on screen (the node's body and
# title bar converted with the canvas transform: client = canvas rect + (graph + offset) * scale). Elements the
# editor hides (zoomed out, collapsed) are left out.
BOUNDS_JS = """() => {
    const rect = app.canvas.canvas.getBoundingClientRect();
    const scale = app.canvas.ds.scale, [ox, oy] = app.canvas.ds.offset;
    const title = LiteGraph.NODE_TITLE_HEIGHT;
    const out = [];
    const onScreen = (n) => {
        const box = {left: rect.left + (n.pos[0] + ox) * scale, top: rect.top + (n.pos[1] - title + oy) * scale};
        box.right = box.left + n.size[0] * scale;
        box.bottom = rect.top + (n.pos[1] + n.size[1] + oy) * scale;
        return box;
    };
    for (const n of app.graph.nodes) {
        const box = onScreen(n), others = app.graph.nodes.filter(o => o !== n).map(onScreen);
        for (const w of n.widgets || []) {
            const root = w.element;
            if (!root) continue;
            const els = [root, ...root.querySelectorAll("video, audio, textarea")]
                .filter(e => e.matches("video, audio, textarea.broadcast-summary"));
            for (const e of els) {
                const r = e.getBoundingClientRect(), s = getComputedStyle(e);
                if (!e.isConnected || r.width === 0 || r.height === 0 || s.visibility === "hidden"
                    || s.display === "none") continue;
                out.push({node: n.title, widget: w.name, tag: e.tagName.toLowerCase(), node_rect: box, others,
                          rect: {left: r.left, top: r.top, right: r.right, bottom: r.bottom}});
            }
        }
    }
    return out;
}"""

# Previews outside their node, or over another node (a neighbour covered).
OUTSIDE_JS = "(" + BOUNDS_JS + """)().filter(e => e.rect.left < e.node_rect.left - 1 || e.rect.top < e.node_rect.top - 1
    || e.rect.right > e.node_rect.right + 1 || e.rect.bottom > e.node_rect.bottom + 1
    || e.others.some(o => e.rect.left < o.right - 1 && o.left < e.rect.right - 1 && e.rect.top < o.bottom - 1
                          && o.top < e.rect.bottom - 1))"""

ADD_NODE_JS = """([type, x, y]) => {
    const node = LiteGraph.createNode(type);
    node.pos = [x, y];
    app.graph.add(node);
    app.canvas.setDirty(true, true);
    return node.id;
}"""

def _tone(path, seconds=1.5, rate=22050):
    """A 440 Hz sine written as 16-bit PCM WAV with the standard library: its true length is frames / rate."""
    t = np.arange(int(seconds * rate)) / rate
    pcm = (np.sin(2 * np.pi * 440 * t) * 0.3 * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return len(pcm) / rate


def _all_inside(page, step, tmp_path):
    """Waits (on what the page draws, polled) until every preview lies inside its node; fails with the offenders."""
    page.evaluate(frontend.FIT_JS)
    try:
        page.wait_for_function("() => " + OUTSIDE_JS + ".length === 0", polling=100, timeout=20_000)
    except Exception:
        bad = [{k: v for k, v in e.items() if k != "others"} for e in page.evaluate("() => " + OUTSIDE_JS)]
        raise AssertionError(f"{step}: previews outside their node or over another node: {bad}") from None
    finally:
        page.screenshot(path=str(tmp_path / f"{step}.png"))
    return page.evaluate(BOUNDS_JS)


def _demo_loaded(page, comfy):
    wf = json.loads((TEMPLATE_DIR / "demo_export.json").read_text(encoding="utf-8"))
    case_for("demo_export").prepare(comfy)   # the sample clip the Load Video node names, in the input folder
    page.evaluate(frontend.REFRESH_DEFS_JS)
    page.evaluate(frontend.LOAD_JS, [wf, "demo_export"])
    return wf


def _run_demo(page, comfy, prefix, overrides=None):
    """Queues the loaded demo from the editor (a fresh output name, so the export is not cached) and waits for its
    end."""
    output = page.evaluate("async () => (await app.graphToPrompt()).output")
    output = apply_overrides(output, {"Broadcast Export Video.filename_prefix": prefix, **(overrides or {})},
                             comfy.object_info())
    queued = page.evaluate(frontend.QUEUE_JS, output)
    assert queued["ok"] and not queued["node_errors"], queued
    entry = comfy.finish(queued["prompt_id"], timeout=300)
    assert entry["status"]["status_str"] == "success"
    return entry


def test_previews_stay_inside_their_nodes_after_load_and_after_a_run(page, comfy, tmp_path):
    from scripts import sample_clip

    _demo_loaded(page, comfy)
    tone = f"bounds_{uuid.uuid4().hex[:8]}.wav"
    _tone(comfy.input_dir / tone)
    page.evaluate(frontend.REFRESH_DEFS_JS)
    # Right under Load Video, 266 px below its saved bottom edge (title bar included): its preview may grow the node
    # by the preview's minimum (140 px), and a run adds its audio player (76 px) and progress line, but the preview
    # must not grow it by the clip's height (a portrait clip at the node's width: some 500 px).
    audio_id = page.evaluate(ADD_NODE_JS, ["BroadcastLoadAudio", 504, 620])
    page.evaluate("""([id, name]) => { const n = app.graph.getNodeById(id);
        const combo = n.widgets.find(w => w.name === "audio_file"); combo.value = name; combo.callback?.(name); }""",
                  [audio_id, tone])
    # Loaded: the Load Video preview (the extension's on 0.3.75, core's upload preview on 0.33) has its picture, the
    # Load Audio player its file, before the bounds are read.
    page.wait_for_function(f"""() => [...document.querySelectorAll('video')].some(v => v.videoWidth > 0
        && (v.currentSrc || v.src).includes({json.dumps(sample_clip.SAMPLE_NAME)}))
        && [...document.querySelectorAll('audio')].some(a => a.duration > 0)""", polling=100, timeout=60_000)
    shown = _all_inside(page, "previews_loaded", tmp_path)
    assert {"video", "audio"} <= {e["tag"] for e in shown}, f"previews not shown after loading: {shown}"

    entry = _run_demo(page, comfy, f"broadcast/bounds_{uuid.uuid4().hex[:8]}")
    export_id = next(k for k, ui in entry["outputs"].items() if ui.get("text"))
    title = page.evaluate("(id) => app.graph.getNodeById(id).title", int(export_id))
    # After the run: the export's result video and its summary are shown in the Export node.
    page.wait_for_function("""(title) => { const n = app.graph.nodes.find(n => n.title === title);
        return (n.widgets || []).some(w => w.element && w.element.matches?.("textarea.broadcast-summary"))
            && [...document.querySelectorAll('video')].filter(v => v.videoWidth > 0).length >= 2; }""",
                           arg=title, polling=100, timeout=60_000)
    shown = _all_inside(page, "previews_after_run", tmp_path)
    in_export = {e["tag"] for e in shown if e["node"] == title}
    assert {"video", "textarea"} <= in_export, f"the export node shows {in_export}: {shown}"


def test_export_summary_is_shown_in_full_and_plainly(page, comfy, tmp_path):
    from engines.export.encoders import probe_encoder

    _demo_loaded(page, comfy)
    entry = _run_demo(page, comfy, f"broadcast/summary_{uuid.uuid4().hex[:8]}")
    text = "\n".join(next(ui["text"] for ui in entry["outputs"].values() if ui.get("text")))
    # The box holds the whole text: nothing scrolled out of view (its content height fits its visible height).
    try:
        page.wait_for_function("""(text) => [...document.querySelectorAll('textarea.broadcast-summary')].some(
            b => b.value === text && b.clientHeight > 0 && b.scrollHeight <= b.clientHeight + 1)""", arg=text,
                               polling=100, timeout=30_000)
    except Exception:
        boxes = page.evaluate("""() => [...document.querySelectorAll('textarea.broadcast-summary')].map(
            b => ({value: b.value, scrollHeight: b.scrollHeight, clientHeight: b.clientHeight}))""")
        raise AssertionError(f"the summary box does not show {text!r} in full: {boxes}") from None
    page.screenshot(path=str(tmp_path / "export_summary.png"))
    if probe_encoder("h264_nvenc") is not None:   # this machine (the server's) has no working NVENC
        assert text.count("NVENC: not available on this machine") == 1, text
        for noise in ("refused", "PermissionError", "h264_nvenc"):
            assert noise not in text, text


def test_internal_widgets_stay_out_of_the_parameters_panel(page, comfy, tmp_path):
    """Frontend 1.49's right-side Parameters panel lists the selected node's inputs, and only those."""
    has_panel = page.evaluate("""() => !!document.querySelector('#vue-app')?.__vue_app__?.config?.globalProperties
        ?.$pinia?._s?.has('rightSidePanel')""")
    if not has_panel:
        _, stats = comfy.request("GET", "/system_stats")
        version = stats["system"]["comfyui_version"]
        assert version.startswith("0.3."), f"ComfyUI {version}'s frontend should have the Parameters panel"
        pytest.skip(f"the frontend of ComfyUI {version} has no Parameters panel")
    _demo_loaded(page, comfy)
    page.evaluate(ADD_NODE_JS, ["BroadcastLoadAudio", 24, 460])
    _check_panel(page, comfy, tmp_path, "BroadcastLoadAudio", "loaded")
    _check_panel(page, comfy, tmp_path, "BroadcastLoadVideo", "loaded")
    # After a run the export shows its summary, Load Video a player of its audio: still not parameters. Load Video
    # reads 95 frames here, so it runs (and reports its audio) whatever an earlier test ran (ComfyUI reuses the
    # outputs of unchanged nodes of the previous prompt, and reports nothing for them).
    _run_demo(page, comfy, f"broadcast/panel_{uuid.uuid4().hex[:8]}", {"Broadcast Load Video.frame_cap": 95})
    page.wait_for_function("""() => app.graph.nodes.some(n => n.widgets?.some(w => w.name === "broadcast_summary"))
        && app.graph.nodes.some(n => n.widgets?.some(w => w.name === "broadcast_audio"))""", polling=100,
                           timeout=60_000)
    _check_panel(page, comfy, tmp_path, "BroadcastExportVideo", "ran")
    _check_panel(page, comfy, tmp_path, "BroadcastLoadVideo", "ran")


WIDGET_TYPES = ("INT", "FLOAT", "STRING", "BOOLEAN", "COMBO")


def _check_panel(page, comfy, tmp_path, node_type, step):
    """Selects the node, opens the Parameters panel, waits until it lists the node's widget inputs (the oracle: the
    server's /object_info), and checks that no internal widget is listed with them."""
    spec = comfy.object_info()[node_type]["input"]
    inputs = [name for group in ("required", "optional") for name, (kind, *rest) in spec.get(group, {}).items()
              if (isinstance(kind, list) or kind in WIDGET_TYPES) and not (rest and rest[0].get("forceInput"))]
    page.evaluate("""(type) => { const n = app.graph.nodes.find(n => n.type === type);
        app.canvas.deselectAll?.(); app.canvas.selectNode(n, false);
        const pinia = document.querySelector('#vue-app').__vue_app__.config.globalProperties.$pinia;
        pinia._s.get('rightSidePanel').openPanel('parameters'); }""", node_type)
    panel = page.locator("[data-testid=properties-panel]")
    panel.wait_for(timeout=30_000)
    try:
        page.wait_for_function("""([title, names]) => { const p = document.querySelector('[data-testid=properties-panel]');
            return p && p.innerText.includes(title) && names.every(n => p.innerText.includes(n)); }""",
                               arg=[comfy.object_info()[node_type]["display_name"], inputs], polling=100,
                               timeout=30_000)
    finally:
        page.screenshot(path=str(tmp_path / f"parameters_{node_type}_{step}.png"))
    shown = panel.inner_text()
    leaked = [name for name in (*INTERNAL, "choose file to upload") if name in shown]   # names, the button's label
    assert leaked == [], f"internal widgets in the Parameters panel of {node_type} ({step}): {leaked}\n{shown}"


def test_load_audio_shows_and_plays_a_file_uploaded_through_its_button(page, comfy, tmp_path):
    name = f"upload_{uuid.uuid4().hex[:8]}.wav"
    made = tmp_path / name
    seconds = _tone(made)
    # Playwright takes over the page's file choosers once a listener exists; it switches that on without waiting
    # for the browser (fire and forget, its channel_owner._update_subscription), so a chooser opened right after the
    # first listener is added can still go to the (headless) native dialog: the listener is added here, long before
    # the click, and stays.
    page.on("filechooser", lambda _chooser: None)
    page.evaluate("() => { app.graph.clear(); }")   # 1.49 opens on its default graph
    node_id = page.evaluate(ADD_NODE_JS, ["BroadcastLoadAudio", 100, 100])
    page.evaluate(frontend.FIT_JS)
    frontend.wait_unblocked(page)
    # The button as drawn on the canvas, clicked as a user does: its centre in page coordinates, once the page is
    # settled there (the same point on two polls, the canvas itself under it: no panel, toast or mask over it).
    where = page.wait_for_function("""(id) => {
        const n = app.graph.getNodeById(id);
        const w = n.widgets.find(w => w.name === "broadcast_upload");
        app.canvas.draw(true, true);
        const rect = app.canvas.canvas.getBoundingClientRect();
        const scale = app.canvas.ds.scale, [ox, oy] = app.canvas.ds.offset;
        const x = rect.left + (n.pos[0] + n.size[0] / 2 + ox) * scale;
        const y = rect.top + (n.pos[1] + w.y + LiteGraph.NODE_WIDGET_HEIGHT / 2 + oy) * scale;
        const same = window.__uploadAt && window.__uploadAt[0] === x && window.__uploadAt[1] === y;
        window.__uploadAt = [x, y];
        return same && document.elementFromPoint(x, y) === app.canvas.canvas && [x, y];
    }""", arg=node_id, polling=100, timeout=30_000).json_value()
    page.screenshot(path=str(tmp_path / "load_audio_before_upload.png"))
    page.evaluate("""() => { window.__pickerClicks = 0; const click = HTMLInputElement.prototype.click;
        HTMLInputElement.prototype.click = function () { if (this.type === "file") window.__pickerClicks++;
                                                         return click.apply(this, arguments); }; }""")
    try:
        with page.expect_file_chooser(timeout=30_000) as chooser:
            page.mouse.click(*where)
    except Exception:
        raise AssertionError(f"no file chooser after a click at {where}: the button opened the picker "
                             f"{page.evaluate('() => window.__pickerClicks')} times") from None
    chooser.value.set_files(str(made))
    page.wait_for_function("""([id, name]) => {
        const n = app.graph.getNodeById(id);
        const player = n.widgets.find(w => w.name === "broadcast_preview")?.element;
        return n.widgets.find(w => w.name === "audio_file").value === name && player
            && (player.currentSrc || player.src).includes(encodeURIComponent(name)) && player.duration > 0; }""",
                           arg=[node_id, name], polling=100, timeout=60_000)
    page.screenshot(path=str(tmp_path / "load_audio_uploaded.png"))
    assert (comfy.input_dir / name).read_bytes() == made.read_bytes(), "the uploaded file differs from the chosen one"
    played = page.evaluate("""(id) => app.graph.getNodeById(id).widgets.find(w => w.name === "broadcast_preview")
        .element.duration""", node_id)
    assert played == pytest.approx(seconds, abs=0.05), f"the player reads {played} s, the file is {seconds} s"
