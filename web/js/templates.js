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
    for (const [pack, names] of Object.entries(byPack || {})) {
      // This pack's list (its folder name is the user's choice): the one holding every workflow of the spec.
      if (!Array.isArray(names) || !order.length || !order.every((n) => names.includes(n))) continue;
      const rank = (n) => (order.includes(n) ? order.indexOf(n) : order.length);
      const openable = names.filter((n) => !(n in lacking));
      byPack[pack] = openable.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b)).map((n) => {
        const shown = title.get(n) || n;
        titleToFile.set(`${pack}/${shown}`, n);
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
