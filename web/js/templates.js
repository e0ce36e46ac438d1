// Broadcast Avatar's templates in the editor's template browser: "start here" order, readable titles, and no
// template this core cannot open. (ComfyUI loads every .js file of web/js.)
import { api } from "../../../scripts/api.js";

// The template browser: this pack's workflows in "start here" order, each under a readable title. Both come from
// ../templates.json (scripts/workflow/layout.py reads the same file). The server lists a pack's templates by file
// name in file-system order, and the editor shows a custom template under the name it was listed with (its title
// is `title ?? name` and its store sets title = name), then asks for `<name>.jpg` and `<name>.json` through
// api.apiURL("/workflow_templates/<pack>/<name>..."). So the list is sorted and its names replaced by the titles
// here, and apiURL maps a title back to its file name: the thumbnail and the workflow load as before.
const TEMPLATES_URL = new URL("../templates.json", import.meta.url);
let templateSpec = null;
function loadTemplateSpec() {
  templateSpec ||= fetch(TEMPLATES_URL).then((r) => (r.ok ? r.json() : { templates: [] })).then((j) => j.templates || [])
    .catch(() => []);
  return templateSpec;
}
const titleToFile = new Map(); // "<pack>/<title>" -> file name (without .json)
const describedTitles = new Map(); // listed title -> the card's description (what the graph makes)

// Templates this core cannot open (they use core nodes of a newer ComfyUI): the pack's server side lists them, found
// by looking their node types up in core's registry (nodes/core_workflows.py); they are left out of the list.
async function templatesThisCoreLacks() {
  try {
    const r = await api.fetchApi("/broadcast_avatar/core_templates");
    return r.ok ? (await r.json()).lacking || {} : {};
  } catch {
    return {};
  }
}

if (typeof api.getWorkflowTemplates === "function" && typeof api.apiURL === "function" && !api.__broadcastTitled) {
  const list = api.getWorkflowTemplates.bind(api);
  api.getWorkflowTemplates = async function () {
    const [byPack, spec, lacking] = await Promise.all([list(), loadTemplateSpec(), templatesThisCoreLacks()]);
    const order = spec.map((t) => t.name);
    const title = new Map(spec.map((t) => [t.name, t.title]));
    const description = new Map(spec.map((t) => [t.name, t.description]));
    for (const [pack, names] of Object.entries(byPack || {})) {
      // This pack's list (its folder name is the user's choice): the one holding every workflow of the spec.
      if (!Array.isArray(names) || !order.length || !order.every((n) => names.includes(n))) continue;
      const rank = (n) => (order.includes(n) ? order.indexOf(n) : order.length);
      const openable = names.filter((n) => !(n in lacking));
      byPack[pack] = openable.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b)).map((n) => {
        const shown = title.get(n) || n;
        titleToFile.set(`${pack}/${shown}`, n);
        if (description.get(n)) describedTitles.set(shown, description.get(n));
        return shown;
      });
    }
    return byPack;
  };
  const apiURL = api.apiURL.bind(api);
  api.apiURL = function (route) {
    const m = typeof route === "string" && route.match(/^\/workflow_templates\/([^/]+)\/(.+?)(\.json|\.jpg)?$/);
    const file = m && titleToFile.get(`${m[1]}/${m[2]}`);
    return apiURL(file ? `/workflow_templates/${m[1]}/${encodeURIComponent(file)}${m[3] || ""}` : route);
  };
  api.__broadcastTitled = true;
}

// Card descriptions. Both frontends build a custom template's description from its listed name (frontend 1.32.9
// and 1.49.6, src/platform/workflow/templates/repositories/workflowTemplatesStore.ts: `description: name`), and the
// list carries names only, so there is no field to put ours in. 1.32.9's card shows getTemplateDescription(template)
// in a <p> under the title; 1.49.6's card shows the title and tags only (src/components/custom/widget/
// WorkflowTemplateSelectorDialog.vue). Both mark each card `data-testid="template-workflow-<name>"` (the name as
// listed: our title). So when cards appear, each of ours gets its description: 1.32.9's <p> gets our text, 1.49.6's
// card gets a <p> under its title. Vue patches what it rendered from its own virtual DOM, so the text stays until the
// card is rendered anew, and a new card is found again.
const CARD_PREFIX = "template-workflow-";
function describeCards() {
  for (const card of document.querySelectorAll(`[data-testid^="${CARD_PREFIX}"]`)) {
    const text = describedTitles.get(card.getAttribute("data-testid").slice(CARD_PREFIX.length));
    const heading = card.querySelector("h3");
    if (!text || !heading) continue;
    let p = card.querySelector("p.broadcast-template-description") || heading.parentElement.querySelector("h3 ~ * p");
    if (!p) {
      p = document.createElement("p");
      p.className = "m-0 line-clamp-2 text-sm text-muted";
      heading.after(p);
    }
    p.classList.add("broadcast-template-description");
    if (p.textContent !== text) p.textContent = text;
    if (p.title !== text) p.title = text;
  }
}
if (typeof MutationObserver === "function" && document.body) {
  let queued = false;
  new MutationObserver(() => {
    if (queued || !describedTitles.size) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      describeCards();
    });
  }).observe(document.body, { childList: true, subtree: true });
}
