"""Drive ComfyUI's real frontend (served by the test server) in headless Chromium with Playwright.

The recipe (verified against frontend 1.32.9): seed two user settings so no Templates modal and no restored graph
race a load; wait until the app, its node types and its websocket client id exist; load with `app.loadGraphData`
(which never throws, so problems are read afterwards from an `afterConfigureGraph` hook, placeholder nodes, dialogs,
toasts and the console); convert with `app.graphToPrompt` and queue with `app.api.queuePrompt`.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field

CHROMIUM = os.environ.get("BA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-dev-shm-usage"]
# The shipped workflows carry `models` metadata (scripts/workflow/model_links.py), so frontend 1.32 opens its
# "Missing models" dialog over a workflow loaded without them; that dialog is tested on its own
# (tests/comfy/test_editor_templates.py), the other tests load workflows without it.
SETTINGS = {"Comfy.TutorialCompleted": True, "Comfy.Workflow.Persist": False,
            "Comfy.Workflow.ShowMissingModelsWarning": False}

READY_JS = """() => !!(window.app && window.app.graph && window.app.api && window.app.api.clientId
    && window.LiteGraph && Object.keys(window.LiteGraph.registered_node_types || {}).length > 0)"""

HOOKS_JS = """() => {
    window.__ba = {missing: null, toasts: []};
    app.registerExtension({name: "broadcast.pytest.capture",
        afterConfigureGraph(missing) { window.__ba.missing = (missing || []).map(m => m.type || String(m)); }});
    app.extensionManager.toast.$onAction(({name, args}) => {
        const p = args[0];
        window.__ba.toasts.push({action: name,
            text: typeof p === "string" ? p : JSON.stringify({severity: p && p.severity, summary: p && p.summary,
                                                               detail: p && p.detail})});
    });
}"""

# Re-read the node definitions (model and media combos) the page fetched when it opened: a case writes its models and
# media after that, as a user who adds files while the editor is open presses "r". 1.49 has reloadNodeDefs; 1.32 only
# refreshComboInNodes. Their "updated" toasts say nothing about a workflow, so the captured toasts are cleared.
REFRESH_DEFS_JS = """async () => {
    if (typeof app.reloadNodeDefs === "function") await app.reloadNodeDefs(); else await app.refreshComboInNodes();
    await new Promise(r => setTimeout(r, 100));
    window.__ba.toasts = [];
}"""

LOAD_JS = """async ([wf, name]) => {
    const registered = window.LiteGraph.registered_node_types;
    const types = (wf.nodes || []).map(n => n.type);
    const preMissing = [...new Set(types.filter(t => !(t in registered)))];
    await app.loadGraphData(wf, true, true, name);
    await new Promise(r => setTimeout(r, 300));
    const dialogs = [...document.querySelectorAll('.p-dialog')].map(d => d.innerText.trim());
    const errorNodes = app.graph.nodes.filter(n => n.has_errors).map(n => n.type);
    return {preMissing, hookMissing: window.__ba.missing, dialogs, toasts: window.__ba.toasts, errorNodes,
            nodeCount: app.graph.nodes.length};
}"""

def openable_stems(page) -> list[str]:
    """The templates this editor's core can open, in the template browser's order (the others are not offered there):
    those whose API twin uses only node types the editor has registered."""
    from scripts.workflow.layout import ORDER, api_of

    registered = set(page.evaluate("() => Object.keys(LiteGraph.registered_node_types)"))
    return [stem for stem in ORDER if {n["class_type"] for n in api_of(stem).values()} <= registered]


def open_at_saved_view(page, wf: dict, name: str) -> None:
    """Open `wf` as the template browser does and wait until it shows its saved view (`extra.ds`) and frontend 1.49's
    PrimeVue BlockUI mask, up while it finishes loading a graph, is gone: events the page shows, not delays."""
    page.evaluate("async ([wf, name]) => { await app.loadGraphData(wf, true, true, name); }", [wf, name])
    page.wait_for_function("(s) => Math.abs(app.canvas.ds.scale - s) < 1e-6", arg=wf["extra"]["ds"]["scale"],
                           polling=100, timeout=30_000)
    wait_unblocked(page)
    page.evaluate(DRAWN_JS)


# The editor places its DOM widgets (players, previews) where a drawn frame put their nodes: the canvas's foreground
# draw records each widget's position (src/components/graph/DomWidgets.vue: updateWidgets, chained on
# onDrawForeground) and Vue moves the elements on its next render. Until then a new element stands at the canvas
# origin, over whatever is drawn there (seen in CI: Load Video's <video> over the first group's title). So: one
# foreground draw after the load (asked for), then two animation frames for Vue to apply it.
DRAWN_JS = """async () => {
    const canvas = app.canvas;
    await new Promise((resolve) => {
        const previous = canvas.onDrawForeground;
        canvas.onDrawForeground = function () {
            const out = previous?.apply(this, arguments);
            if (canvas.onDrawForeground !== previous) canvas.onDrawForeground = previous;
            resolve();
            return out;
        };
        canvas.setDirty(true, true);
    });
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}"""


def wait_unblocked(page) -> None:
    """Until frontend 1.49's loading mask (a PrimeVue BlockUI over the page) is gone; 1.32 shows none."""
    page.wait_for_function("() => !document.querySelector('.p-blockui-mask')", polling=100, timeout=30_000)


QUEUE_JS = """async (overridden) => {
    const p = await app.graphToPrompt();
    const output = overridden || p.output;
    try {
        const r = await app.api.queuePrompt(0, {output, workflow: p.workflow});
        return {ok: true, prompt_id: r.prompt_id, node_errors: r.node_errors};
    } catch (e) {
        return {ok: false, error: String(e), response: e.response || null};
    }
}"""

# The whole graph in view, as a user looks at the result: the editor draws (and builds previews of) visible nodes.
FIT_JS = """() => {
    const xs = [], ys = [];
    for (const n of app.graph.nodes) { xs.push(n.pos[0], n.pos[0] + n.size[0]); ys.push(n.pos[1] - 30, n.pos[1] + n.size[1]); }
    app.canvas.ds.fitToBounds([Math.min(...xs), Math.min(...ys), Math.max(...xs) - Math.min(...xs),
                               Math.max(...ys) - Math.min(...ys)], {zoom: 0.95});
    app.canvas.setDirty(true, true);
}"""

# Offline noise of every fresh page (see the notes): release checks and registry look-ups at api.comfy.org,
# optional user files that do not exist, and one Vue warning at start-up. Frontend 1.49 (ComfyUI 0.33.0) also logs
# its own "ComfyApp graph accessed before initialization" while it starts with no restored graph (the pack ships no
# web extension; the harness reads only `app.graph`, which does not log).
BENIGN = ("api.comfy.org", "ERR_NAME_NOT_RESOLVED", "user.css", "favicon.ico", "/api/userdata",
          "comfy.templates.json", "reading 'id'", "ERR_ABORTED", "ERR_INTERNET_DISCONNECTED",
          "ComfyApp graph accessed before initialization")


def is_benign(text: str) -> bool:
    return any(b in text for b in BENIGN)


@dataclass
class PageLog:
    console_errors: list = field(default_factory=list)
    page_errors: list = field(default_factory=list)
    failed_requests: list = field(default_factory=list)
    benign_404: str = ""  # a URL part whose 404s are expected (media of a workflow that is only loaded)

    def clear(self) -> None:
        self.console_errors.clear()
        self.page_errors.clear()
        self.failed_requests.clear()

    def problems(self) -> list[str]:
        out = [f"console error: {t}" for t in self.console_errors if not is_benign(t)
               and not (self.benign_404 and "404" in t and self.benign_404 in t)]
        out += [f"page error: {t}" for t in self.page_errors if not is_benign(t)]
        out += [f"request failed: {t}" for t in self.failed_requests if not is_benign(t)]
        return out


@contextmanager
def chromium(comfy):
    """Headless Chromium for the tests of one module, with the settings seeded on `comfy` (skips without it)."""
    import pytest

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (scripts/env.sh installs Debian's chromium as root)")
    from playwright.sync_api import sync_playwright

    status, _ = comfy.request("POST", "/settings", SETTINGS)
    assert status == 200, f"seeding the frontend settings failed: HTTP {status}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser, url: str):
    """A fresh context and page on the frontend, ready to load workflows; returns (context, page, log)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script("localStorage.setItem('vueNodesBannerDismissed', 'true')")
    page = context.new_page()
    log = PageLog()
    page.on("console", lambda m: log.console_errors.append(m.text + f" @ {m.location.get('url', '')}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: log.page_errors.append(str(e)))
    page.on("requestfailed", lambda r: log.failed_requests.append(f"{r.url} {r.failure}"))
    page.goto(url, wait_until="domcontentloaded", timeout=90_000)
    page.wait_for_function(READY_JS, polling=100, timeout=90_000)
    page.evaluate(HOOKS_JS)
    return context, page, log
