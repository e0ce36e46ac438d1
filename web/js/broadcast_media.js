// Broadcast Avatar in the editor: players and summaries in the pack's nodes, an upload button with a preview on its
// loaders where the editor does not provide one. (The template browser: web/js/templates.js.)
//
// - Every pack node whose run returns audio (ui "audio") gets an <audio> player; one that returns text (ui "text":
//   the export's encode summary, the avatar's cache state) shows it in a read-only box.
// - Broadcast Load Audio: the editor's audio upload widget only serves core's Load Audio, so an upload button and a
//   player of the chosen file are added here. Broadcast Load Video gets the same where the core gave its combo no
//   video upload widget (older cores); otherwise the core's own button and preview are used.
// Frontend-only widgets are not saved into the prompt (options.serialize = false).
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";

const PACK_PREFIX = "Broadcast";

function viewUrl(file, type) {
  const [subfolder, filename] = file.includes("/") ? [file.slice(0, file.lastIndexOf("/")), file.slice(file.lastIndexOf("/") + 1)] : ["", file];
  const q = new URLSearchParams({ filename, subfolder, type: type || "input" });
  return api.apiURL(`/view?${q.toString()}`);
}

function mediaWidget(node, name, tag) {
  const existing = node.widgets?.find((w) => w.name === name);
  if (existing) return existing;
  const el = document.createElement(tag);
  el.controls = true;
  el.preload = "metadata";   // the player shows the file's length, not 0:00 / 0:00
  el.style.width = "100%";
  el.classList.add("broadcast-media");
  if (tag === "video") el.muted = true;
  const widget = node.addDOMWidget(name, tag, el, { serialize: false, hideOnZoom: false });
  widget.serialize = false;
  return widget;
}

function textWidget(node, name) {
  const existing = node.widgets?.find((w) => w.name === name);
  if (existing) return existing;
  const el = document.createElement("textarea");
  el.readOnly = true;
  el.rows = 4;
  el.style.width = "100%";
  el.style.fontSize = "11px";
  el.classList.add("broadcast-summary");
  const widget = node.addDOMWidget(name, "summary", el, { serialize: false });
  widget.serialize = false;
  return widget;
}

function addUpload(node, comboName, accept, previewTag) {
  const combo = node.widgets?.find((w) => w.name === comboName);
  if (!combo || node.widgets.find((w) => w.name === "broadcast_upload")) return;
  const player = mediaWidget(node, "broadcast_preview", previewTag);
  const show = () => {
    if (typeof combo.value === "string" && combo.value) player.element.src = viewUrl(combo.value, "input");
  };
  const previous = combo.callback;
  combo.callback = function () {
    const r = previous?.apply(this, arguments);
    show();
    return r;
  };
  const picker = document.createElement("input");
  picker.type = "file";
  picker.accept = accept;
  picker.style.display = "none";
  document.body.appendChild(picker);
  picker.onchange = async () => {
    const file = picker.files?.[0];
    if (!file) return;
    const body = new FormData();
    body.append("image", file);          // ComfyUI's upload route takes any file under this field name
    body.append("type", "input");
    const resp = await api.fetchApi("/upload/image", { method: "POST", body });
    if (resp.status !== 200) {
      app.extensionManager?.toast?.add({ severity: "error", summary: "Upload failed", detail: `${resp.status} ${resp.statusText}`, life: 5000 });
      return;
    }
    const data = await resp.json();
    const name = data.subfolder ? `${data.subfolder}/${data.name}` : data.name;
    if (!combo.options.values.includes(name)) combo.options.values.push(name);
    combo.value = name;
    combo.callback?.(name);   // as if picked in the list: the value is shown and the player reloaded
    show();
    node.setDirtyCanvas?.(true, true);
    picker.value = "";
  };
  const button = node.addWidget("button", "broadcast_upload", "choose file to upload", () => picker.click(), { serialize: false });
  button.label = "choose file to upload";
  button.serialize = false;
  const onRemoved = node.onRemoved;
  node.onRemoved = function () { picker.remove(); return onRemoved?.apply(this, arguments); };
  show();
  const configured = node.onGraphConfigured;
  node.onGraphConfigured = function () { configured?.apply(this, arguments); show(); };
}

// Search by what users type (text to speech, lip sync, wardrobe, mastering ...) without changing any title. Frontend
// 1.49 searches each node definition's search_aliases (the pack sets them where the core's schema has the field);
// 1.32 indexes only name and display_name (read in its bundle: FuseSearch keys, distance-weighted, so words late in a
// long title are not found either). There the node definitions get the aliases served by the pack
// (nodes/core_features.py) and the search index is rebuilt with that key too; only where the index lacks it, and
// again whenever the editor rebuilds it (node definitions reloaded).
async function aliasesForOlderSearch() {
  const pinia = document.querySelector("#vue-app")?.__vue_app__?.config?.globalProperties?.$pinia;
  const store = pinia?._s?.get("nodeDef");
  if (!store?.nodeSearchService) return;
  let words;
  try {
    const r = await api.fetchApi("/broadcast_avatar/search_keywords");
    if (!r.ok) return;
    words = await r.json();
  } catch {
    return;
  }
  const patch = () => {
    const search = store.nodeSearchService?.nodeFuseSearch;
    if (!search?.fuse || !Array.isArray(search.keys) || search.keys.includes("search_aliases")) return;
    for (const def of search.data || []) {
      if (words[def?.name] && !def.search_aliases?.length) def.search_aliases = words[def.name];
    }
    const Fuse = search.fuse.constructor;
    const keys = [...search.keys, "search_aliases"];
    search.keys = keys;
    search.fuse = new Fuse(search.data, { ...search.fuse.options, keys }, Fuse.createIndex(keys, search.data));
  };
  patch();
  store.$subscribe?.(() => setTimeout(patch, 0));
}

app.registerExtension({
  name: "broadcast_avatar.media",
  async setup() {
    await aliasesForOlderSearch();
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!nodeData?.name?.startsWith(PACK_PREFIX)) return;
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (message) {
      const r = onExecuted?.apply(this, arguments);
      const audio = message?.audio?.[0];
      if (audio) {
        const player = mediaWidget(this, "broadcast_audio", "audio");
        player.element.src = api.apiURL(`/view?${new URLSearchParams({ filename: audio.filename, subfolder: audio.subfolder || "", type: audio.type || "output" })}`);
      }
      const text = message?.text;
      if (text?.length) {
        // Tall enough to read in full (the encode summary runs to several sentences), at most 14 lines.
        const box = textWidget(this, "broadcast_summary").element;
        box.value = text.join("\n");
        const lines = box.value.split("\n").reduce((n, l) => n + Math.max(1, Math.ceil(l.length / 48)), 0);
        box.rows = Math.min(14, Math.max(4, lines));
      }
      this.setSize?.([this.size[0], Math.max(this.size[1], this.computeSize()[1])]);
      app.graph?.setDirtyCanvas(true, true);
      return r;
    };
    const created = nodeType.prototype.onNodeCreated;
    const videoSpec = nodeData.input?.required?.video;
    nodeType.prototype.onNodeCreated = function () {
      const r = created?.apply(this, arguments);
      if (nodeData.name === "BroadcastLoadAudio") addUpload(this, "audio_file", "audio/*,video/*", "audio");
      if (nodeData.name === "BroadcastLoadVideo" && !videoSpec?.[1]?.video_upload) addUpload(this, "video", "video/*", "video");
      return r;
    };
  },
});
