"""A family whose package is missing is disabled with one log line naming the package; the others still load.

The pack is loaded the way ComfyUI (0.3.75 and 0.33.0) loads a custom-node folder (`spec_from_file_location` under the folder's
path as module name, so the package's relative imports resolve against it), in a fresh Python with ComfyUI on
sys.path. Before the pack registers its nodes, FAMILIES gets three extra entries: one needing a package that does
not exist, one whose nodes module does not exist (its import fails), one whose node schema is invalid. Then
`comfy_entrypoint()` runs as ComfyUI would.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, importlib.util, json, logging, os, sys
comfy_path, pack = sys.argv[1], sys.argv[2]
sys.path.insert(0, comfy_path)
sys.argv = [sys.argv[0], "--cpu"]
import comfy.options
comfy.options.enable_args_parsing()

records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep())
logging.getLogger().setLevel(logging.INFO)

module_name = os.path.join(os.path.dirname(pack), "custom_nodes", "broadcast_avatar").replace(".", "_x_")
spec = importlib.util.spec_from_file_location(module_name, os.path.join(pack, "__init__.py"))
module = importlib.util.module_from_spec(spec)
sys.modules[module_name] = module
spec.loader.exec_module(module)
real = {family: entry[0] for family, entry in module.FAMILIES.items()}
module.FAMILIES["ghost"] = ("export", [("ghost_package_for_guard_test", "ghost-package")])
module.FAMILIES["broken"] = ("module_that_is_not_there", [])
module.FAMILIES["tooold"] = ("export", [("av", "av<1")])

# A family whose node schema is invalid (two inputs share an id: refused by 0.3.75 and 0.33.0 alike; an input and
# an output sharing one is allowed since 0.33.0).
import types
from comfy_api.latest import io
class BroadcastGuardBroken(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="BroadcastGuardBroken", display_name="Broadcast Guard Broken",
                         category="Broadcast/test", inputs=[io.Int.Input("same"), io.Int.Input("same")],
                         outputs=[io.Int.Output("out")])
    @classmethod
    def execute(cls, same):
        return io.NodeOutput(same)
fake = types.ModuleType(module_name + ".nodes.guard_broken_schema")
fake.NODES = [BroadcastGuardBroken]
sys.modules[fake.__name__] = fake
module.FAMILIES["badschema"] = ("guard_broken_schema", [])

async def load():
    extension = await module.comfy_entrypoint()
    return await extension.get_node_list()
nodes = asyncio.run(load())
print("RESULT " + json.dumps({"real": real, "nodes": [n.__name__ for n in nodes],
                             "modules": sorted({n.__module__.rsplit(".", 1)[-1] for n in nodes}),
                             "log": [r for r in records if "Broadcast Avatar" in r]}))
"""


@pytest.fixture(scope="module")
def guarded_load():
    comfy_path = os.environ.get("COMFYUI_PATH")
    if not comfy_path:
        pytest.fail("COMFYUI_PATH is not set: run the suite with `bash scripts/test.sh`")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, comfy_path, str(REPO_ROOT)], cwd=comfy_path,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"loading the pack failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_missing_package_disables_only_its_family(guarded_load):
    ghost = [line for line in guarded_load["log"] if "ghost" in line]
    assert len(ghost) == 1, f"expected one log line for the family with a missing package, got {ghost}"
    assert "ghost-package" in ghost[0] and "disabled" in ghost[0]
    assert f'"{sys.executable}" -m pip install "ghost-package"' in ghost[0], "the line must give a command that works"


def test_package_outside_the_tested_range_disables_its_family(guarded_load):
    import av

    old = [line for line in guarded_load["log"] if "tooold" in line]
    assert len(old) == 1 and f"av<1 (found {av.__version__})" in old[0], old
    assert '-m pip install "av<1"' in old[0]


def test_failing_nodes_module_disables_only_its_family(guarded_load):
    broken = [line for line in guarded_load["log"] if "broken" in line]
    assert len(broken) == 1, f"expected one log line for the family whose import fails, got {broken}"
    assert "module_that_is_not_there" in broken[0]


def test_invalid_schema_disables_only_its_family(guarded_load):
    bad = [line for line in guarded_load["log"] if "badschema" in line]
    assert len(bad) == 1, f"expected one log line for the family with an invalid schema, got {bad}"
    assert "BroadcastGuardBroken" not in guarded_load["nodes"]


def test_other_families_still_load(guarded_load):
    assert guarded_load["real"], "FAMILIES is empty"
    others = [line for line in guarded_load["log"] if "disabled" in line
              and not any(word in line for word in ("ghost", "broken", "badschema", "tooold"))]
    assert others == [], f"real families were disabled: {others}"
    not_loaded = sorted(set(guarded_load["real"].values()) - set(guarded_load["modules"]))
    assert not_loaded == [], f"nodes modules whose nodes did not load: {not_loaded}"


def test_the_cache_size_is_logged_at_start(guarded_load):
    lines = [line for line in guarded_load["log"] if line.startswith("Broadcast Avatar: cache ")]
    assert len(lines) == 1 and " in " in lines[0] and "entries" in lines[0] and "cap " in lines[0], lines
