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

// Sizes that follow the node. The editor places a DOM widget's element in a box of the widget's computed height less
// its margin above and below (src/scripts/domWidget.ts computeLayoutSize: getMinHeight, else 50 px;
// src/components/graph/DomWidgets.vue: height - 2 * margin) and grows the node when its widgets need more
// (src/lib/litegraph/src/LGraphNode.ts _arrangeWidgets); the element itself must fill that box, not take its own
// size: a <video> at width 100% and height auto is as tall as its picture, and ran over the node and its neighbours.
// Internal widgets are kept out of frontend 1.49's Parameters panel (src/components/rightSidePanel/shared.ts skips
// options.hideInPanel, canvasOnly and hidden; hideInPanel still draws them in the Vue node body) and out of the
// prompt and the saved workflow (options.serialize / widget.serialize = false).
const INTERNAL = { serialize: false, hideInPanel: true };
const AUDIO_HEIGHT = 56;          // Chromium's audio controls are 54 px tall
const VIDEO_MIN_HEIGHT = 120;
const WIDGET_MARGIN = 10;         // the editor's DOM widget margin on each side (BaseDOMWidgetImpl.DEFAULT_MARGIN)

function fillBox(el) {
  Object.assign(el.style, { width: "100%", height: "100%", maxWidth: "100%", maxHeight: "100%", display: "block",
                            boxSizing: "border-box" });
}

// Grow the node to what its widgets need now (never shrink what the user made larger).
function fitNode(node) {
  if (!node.computeSize || !node.setSize) return;
  const needs = node.computeSize();
  if (needs[1] > node.size[1] || needs[0] > node.size[0]) {
    node.setSize([Math.max(node.size[0], needs[0]), Math.max(node.size[1], needs[1])]);
  }
  node.setDirtyCanvas?.(true, true);
}

function mediaWidget(node, name, tag) {
  const existing = node.widgets?.find((w) => w.name === name);
  if (existing) return existing;
  const el = document.createElement(tag);
  el.controls = true;
  el.preload = "metadata";   // the player shows the file's length, not 0:00 / 0:00
  fillBox(el);
  el.classList.add("broadcast-media");
  // The player takes the room the node gives it (a video letterboxed in it), at least a small picture: the node
  // grows only by that, not to the clip's full height, which pushed it over the nodes below it.
  const minHeight = (tag === "video" ? VIDEO_MIN_HEIGHT : AUDIO_HEIGHT) + 2 * WIDGET_MARGIN;
  const maxHeight = tag === "video" ? undefined : minHeight;
  if (tag === "video") {
    el.muted = true;
    el.style.objectFit = "contain";
  }
  const widget = node.addDOMWidget(name, tag, el, { ...INTERNAL, hideOnZoom: false, getMinHeight: () => minHeight,
                                                    getMaxHeight: () => maxHeight });
  widget.serialize = false;
  return widget;
}

// The core previews a video in a pack node (Broadcast Load Video's upload widget on 0.33, the export's result) with
// the widget "video-preview", whose height it sets to the clip's at the node's width
// (src/composables/node/useNodeImage.ts: computeLayoutSize assigned after addDOMWidget): a portrait clip made the node
// some 500 px taller, over the nodes laid out below it. Its <video> already fills its box, letterboxed (the core's CSS: object-fit contain, 100%), so
// here it gets the same minimum as the extension's preview and the rest of the node's room: its layout size is fixed
// on this node's widget, and the core's later assignment has no effect.
function sizeCorePreview(node) {
  const add = node.addDOMWidget;
  if (typeof add !== "function") return;
  node.addDOMWidget = function (name) {
    const widget = add.apply(this, arguments);
    if (name === "video-preview" && widget) {
      const layout = () => ({ minHeight: VIDEO_MIN_HEIGHT + 2 * WIDGET_MARGIN, minWidth: 0 });
      Object.defineProperty(widget, "computeLayoutSize", { get: () => layout, set: () => {}, configurable: true });
    }
    return widget;
  };
}

// The height `box`'s text needs at its current width: measured on a hidden copy with the same font and padding
// (a textarea's scrollHeight at height 0 is its content's height).
let measurer = null;
function textHeight(box, node) {
  measurer ||= Object.assign(document.createElement("textarea"), { rows: 1, tabIndex: -1 });
  if (!measurer.isConnected) {
    Object.assign(measurer.style, { position: "absolute", visibility: "hidden", left: "-10000px", top: "0",
                                    height: "0", overflow: "hidden" });
    document.body.appendChild(measurer);
  }
  const style = getComputedStyle(box);
  for (const key of ["fontFamily", "fontSize", "lineHeight", "letterSpacing", "padding", "border", "boxSizing",
                     "whiteSpace", "wordBreak", "overflowWrap"]) measurer.style[key] = style[key];
  measurer.style.height = "0";
  const width = box.clientWidth > 0 ? box.offsetWidth : node.size[0] - 2 * WIDGET_MARGIN;
  measurer.style.width = `${width}px`;
  measurer.value = box.value;
  const border = parseFloat(style.borderTopWidth || 0) + parseFloat(style.borderBottomWidth || 0);
  return Math.ceil(measurer.scrollHeight + border) + 2 + 2 * WIDGET_MARGIN;
}

function textWidget(node, name) {
  const existing = node.widgets?.find((w) => w.name === name);
  if (existing) return existing;
  const el = document.createElement("textarea");
  el.readOnly = true;
  fillBox(el);
  el.style.fontSize = "11px";
  el.style.resize = "none";
  el.classList.add("broadcast-summary");
  // Asked on every frame the node is drawn: measured again only when the text or the box's width changed.
  let measured = { key: null, height: 40 };
  const height = () => {
    const key = `${el.offsetWidth}|${node.size[0]}|${el.value}`;
    if (key !== measured.key) measured = { key, height: Math.max(40, textHeight(el, node)) };
    return measured.height;
  };
  const widget = node.addDOMWidget(name, "summary", el, { ...INTERNAL, getMinHeight: height });
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
  const button = node.addWidget("button", "broadcast_upload", "choose file to upload", () => picker.click(), { ...INTERNAL });
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
        // The box is as tall as its text needs at the node's width (the node grows to hold it): read in full.
        textWidget(this, "broadcast_summary").element.value = text.join("\n");
      }
      fitNode(this);
      app.graph?.setDirtyCanvas(true, true);
      return r;
    };
    const created = nodeType.prototype.onNodeCreated;
    const videoSpec = nodeData.input?.required?.video;
    nodeType.prototype.onNodeCreated = function () {
      const r = created?.apply(this, arguments);
      if (nodeData.name === "BroadcastLoadAudio") addUpload(this, "audio_file", "audio/*,video/*", "audio");
      if (nodeData.name === "BroadcastLoadVideo" && !videoSpec?.[1]?.video_upload) addUpload(this, "video", "video/*", "video");
      sizeCorePreview(this);   // the core's video preview: Load Video's upload (0.33), a video result (the export)
      return r;
    };
  },
});
