"""Batch files as jobs: reading JSONL/CSV, the content key of a job, its unique attempt prompt, and what a finished
prompt's history says (output files, `broadcast_qc` verdicts).

A batch line names a workflow and its overrides, with the same override syntax as `run_workflow.py --set`
(``"<node id or title>.<input>": value``):

    {"name": "evening-01", "workflow": "workflows/api/demo_export.api.json",
     "set": {"Broadcast Export Video.quality": 23}}                          # (one line in the file)
    {"name": "evening-02", "Broadcast Export Video.quality": 25}            # top-level keys with a dot are overrides

CSV: a header row with `name`, `workflow` and one column per override (``node.input``); an empty cell leaves that
input as the workflow has it; a cell is JSON if it parses, else a plain string (as `--set` reads it).
Only the standard library is used.
"""
from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from scripts.batch.ledger import canonical, sha256_file
from scripts.workflow.api import WorkflowError, json_strings, load_workflow, parse_set

REPO_ROOT = Path(__file__).resolve().parents[2]
JOB_FIELDS = {"name", "workflow", "set"}
NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class BatchError(ValueError):
    """The batch file cannot be used as written; the message names the line and what to fix."""


@dataclass
class Job:
    name: str
    line: int
    workflow_path: Path
    workflow: dict
    overrides: dict
    key: str = ""
    input_files: dict = field(default_factory=dict)  # name in the input folder -> sha256, for files it references

    def describe(self) -> dict:
        return {"name": self.name, "line": self.line, "workflow": str(self.workflow_path),
                "overrides": self.overrides, "inputs": self.input_files}


def pack_version() -> str:
    """The pack's version from pyproject.toml (read by pattern: tomllib is not in Python 3.10)."""
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r'(?m)^version\s*=\s*"([^"]+)"', text)
    return found.group(1) if found else "unknown"


def job_key(workflow_bytes: bytes, overrides: dict, input_files: dict, version: str) -> str:
    """The job's identity: its workflow's content, its overrides, the input files it uses and the pack version.

    The job's name and line are not part of it: renaming or reordering a batch does not re-run finished jobs.
    """
    body = {"workflow": hashlib.sha256(workflow_bytes).hexdigest(), "overrides": overrides, "inputs": input_files,
            "pack": version}
    return hashlib.sha256(canonical(body).encode()).hexdigest()[:16]


def read_batch(path: Path, default_workflow: Optional[Path] = None, inputs: tuple[Path, ...] = ()) -> list[Job]:
    """Every job of a JSONL or CSV batch file; any bad line is a `BatchError` naming it (nothing runs then)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BatchError(f"batch file not found: {path}") from None
    rows = _csv_rows(text, path) if path.suffix.lower() == ".csv" else _jsonl_rows(text, path)
    input_hashes = {p.name: sha256_file(p) for p in inputs}
    version = pack_version()
    jobs, errors, seen_keys, seen_names = [], [], {}, {}
    for line, row in rows:
        try:
            job = _job(row, line, path, default_workflow, input_hashes, version)
        except (BatchError, WorkflowError) as exc:
            errors.append(f"{path.name} line {line}: {exc}")
            continue
        if job.key in seen_keys:
            errors.append(f"{path.name} line {line}: the same job as line {seen_keys[job.key]} (same workflow and "
                          "overrides); change something or remove one")
            continue
        if job.name in seen_names:
            errors.append(f"{path.name} line {line}: name {job.name!r} is already used on line {seen_names[job.name]}")
            continue
        seen_keys[job.key], seen_names[job.name] = line, line
        jobs.append(job)
    if errors:
        raise BatchError("\n".join(errors))
    if not jobs:
        raise BatchError(f"{path} holds no jobs")
    return jobs


def _jsonl_rows(text: str, path: Path):
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            row = json.loads(raw)
        except ValueError as exc:
            raise BatchError(f"{path.name} line {n}: not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise BatchError(f"{path.name} line {n}: expected a JSON object like "
                             '{"workflow": "...", "set": {"<node>.<input>": value}}')
        yield n, row


def _csv_rows(text: str, path: Path):
    reader = csv.DictReader(text.splitlines())
    unknown = [c for c in reader.fieldnames or [] if c not in JOB_FIELDS and "." not in c]
    if unknown:
        raise BatchError(f"{path.name}: column(s) {', '.join(map(repr, unknown))} are neither name/workflow nor an "
                         "override <node id or title>.<input>")
    for n, cells in enumerate(reader, 2):
        row: dict = {}
        for column, cell in cells.items():
            if cell is None or cell == "":
                continue
            if column in ("name", "workflow"):
                row[column] = cell
            else:
                row[column] = parse_set(f"{column}={cell}")[1]
        if row:
            yield n, row


def _resolve_workflow(value: Any, batch_path: Path, default: Optional[Path]) -> Path:
    if value is None:
        if default is None:
            raise BatchError("no workflow: give the line a \"workflow\" or the runner --workflow")
        return Path(default)
    if not isinstance(value, str) or not value:
        raise BatchError(f"workflow must be a file path, got {value!r}")
    candidate = Path(value)
    if candidate.is_absolute():
        return candidate
    for base in (batch_path.parent, Path.cwd()):  # beside the batch file first, then the current folder
        if (base / candidate).is_file():
            return base / candidate
    raise BatchError(f"workflow {value!r} is neither beside the batch file ({batch_path.parent}) nor in the "
                     f"current folder ({Path.cwd()})")


def _job(row: dict, line: int, batch_path: Path, default_workflow, input_hashes: dict, version: str) -> Job:
    overrides = {}
    sets = row.get("set", {})
    if not isinstance(sets, dict):
        raise BatchError("\"set\" must be an object {\"<node id or title>.<input>\": value}")
    overrides.update(sets)
    for column, value in row.items():
        if column in JOB_FIELDS:
            continue
        if "." not in column:
            raise BatchError(f"unknown field {column!r}: use name, workflow, set, or an override "
                             "\"<node id or title>.<input>\"")
        overrides[column] = value
    name = row.get("name", f"job-{line:04d}")
    if not isinstance(name, str) or not NAME_OK.match(name):
        raise BatchError(f"name {name!r}: use letters, digits, '.', '_' or '-' (it names the job's output folder)")
    wf_path = _resolve_workflow(row.get("workflow"), batch_path, default_workflow)
    workflow, _ = load_workflow(wf_path)
    referenced = set(json_strings(workflow)) | set(json_strings(overrides))
    used_inputs = {n: h for n, h in sorted(input_hashes.items()) if n in referenced}
    key = job_key(wf_path.read_bytes(), overrides, used_inputs, version)
    return Job(name, line, wf_path, workflow, overrides, key, used_inputs)


# -- one attempt's prompt -----------------------------------------------------------------------------------------
# Output nodes that write a folder of their own naming instead of files under a `filename_prefix`: a workflow ending
# in one prepares something once for other workflows to load; it is not a per-job output the runner can fetch and hash.
FOLDER_WRITERS = {
    "SaveTrainingDataset": ("folder_name", "a dataset folder (in output/ on ComfyUI 0.3.75, in the datasets folder "
                            "on newer cores, which /view does not serve) whose files /history does not list"),
}


def unique_prefixes(prompt: dict, tag: str) -> dict:
    """A copy of the prompt whose every `filename_prefix` ends with `_<tag>`.

    A byte-identical prompt is answered from ComfyUI's cache with no outputs and no file, so every attempt gets its
    own prefix: the output nodes always run (the nodes upstream of them may still come from the cache).
    """
    out = json.loads(json.dumps(prompt))
    found = 0
    for node in out.values():
        value = (node.get("inputs") or {}).get("filename_prefix")
        if isinstance(value, str):
            node["inputs"]["filename_prefix"] = f"{value.rstrip('/') or 'batch'}_{tag}"
            found += 1
    if not found:
        for node_id, node in prompt.items():
            if node.get("class_type") in FOLDER_WRITERS:
                field, what = FOLDER_WRITERS[node["class_type"]]
                title = (node.get("_meta") or {}).get("title") or node["class_type"]
                folder = (node.get("inputs") or {}).get(field)
                raise WorkflowError(
                    f"a preparation workflow, not a batch job: its {node['class_type']} node {node_id} ({title!r}) "
                    f"writes one shared folder {folder!r}, {what}, so there is no per-job output to copy and hash; "
                    "run it once for each thing it prepares (a garment prompt, say) with scripts/run_workflow.py "
                    "instead")
        raise WorkflowError("the workflow has no node with a filename_prefix input (a Save or Export node), so an "
                            "attempt could be answered from ComfyUI's cache with no file; add one")
    return out


# -- what a finished prompt produced ------------------------------------------------------------------------------
def output_items(entry: dict) -> list[dict]:
    """The saved files (``type == "output"``) listed in a history entry's outputs; previews in temp are not."""
    items = []
    for node_out in (entry.get("outputs") or {}).values():
        for values in node_out.values():
            for item in values if isinstance(values, list) else []:
                if isinstance(item, dict) and "filename" in item and item.get("type", "output") == "output":
                    items.append({"filename": item["filename"], "subfolder": item.get("subfolder", ""),
                                  "type": "output"})
    return list({canonical(i): i for i in items}.values())


def qc_verdicts(entry: dict) -> list[dict]:
    """Every `broadcast_qc` result in a history entry's outputs, with the node it came from.

    The Broadcast QC node's contract: its UI output holds ``broadcast_qc: [{"verdict": "pass"|"fail",
    "failed": [check names], "report": {...}}]``. Anything else under that key is kept as a "fail" with the reason,
    so a malformed report never passes silently.
    """
    found = []
    for node_id, node_out in (entry.get("outputs") or {}).items():
        values = node_out.get("broadcast_qc") if isinstance(node_out, dict) else None
        if values is None:
            continue
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, dict) and value.get("verdict") in ("pass", "fail"):
                found.append({"node": node_id, "verdict": value["verdict"],
                              "failed": list(value.get("failed") or []), "report": value.get("report", {})})
            else:
                found.append({"node": node_id, "verdict": "fail", "failed": ["malformed broadcast_qc"],
                              "report": {"value": value}})
    return found
