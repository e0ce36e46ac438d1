"""nodes/core_workflows.py: which shipped workflows a core lacks nodes for, said once per workflow by name."""
import json
import logging

from nodes import core_workflows as CW
from tests.workflow_cases import H3_CORE_NODES, REPO_ROOT, api_workflows


def _all_types():
    return {n["class_type"] for p in api_workflows() for n in json.loads(p.read_text()).values()}


def test_a_core_without_h3_lacks_exactly_the_h3_nodes_for_the_h3_workflow():
    available = _all_types() - set(H3_CORE_NODES)
    assert CW.missing_core_nodes(available, REPO_ROOT / "workflows") == {"wardrobe_minimax_h3": sorted(H3_CORE_NODES)}
    assert CW.missing_core_nodes(_all_types(), REPO_ROOT / "workflows") == {}
    assert set(H3_CORE_NODES) <= set(CW.CORE_NODES_SINCE)
    assert CW.missing_core_nodes(_all_types() - {"SAM3_VideoTrack"}, REPO_ROOT / "workflows") == {
        "wardrobe_core_sam3_masks": ["SAM3_VideoTrack"]}


def test_only_newer_core_nodes_are_reported_and_the_log_says_it_once(tmp_path, caplog):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.api.json").write_text(json.dumps({
        "1": {"class_type": "BroadcastExportVideo", "inputs": {}},
        "2": {"class_type": "MiniMaxH3SigmaShift", "inputs": {}},
        "3": {"class_type": "SomeOtherPackNode", "inputs": {}}}))
    (tmp_path / "broken.api.json").write_text("{not json")
    assert CW.missing_core_nodes(set(), tmp_path) == {"a": ["MiniMaxH3SigmaShift"]}
    assert CW.missing_core_nodes({"MiniMaxH3SigmaShift"}, tmp_path) == {}
    CW._reported.discard("wardrobe_minimax_h3")
    available = _all_types() - set(H3_CORE_NODES)
    with caplog.at_level(logging.WARNING, logger="broadcast_avatar"):
        CW.report_missing_core_nodes(available)
        CW.report_missing_core_nodes(available)
    lines = [r.getMessage() for r in caplog.records if "wardrobe_minimax_h3" in r.getMessage()]
    assert len(lines) == 1
    assert "ComfyUI 0.33.0 or newer" in lines[0] and all(n in lines[0] for n in H3_CORE_NODES)
