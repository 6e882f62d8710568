"""JSON schemas of the judges' answers. Rationale first so the label follows the reasoning."""
from __future__ import annotations


def _label_schema(labels: list[str]) -> dict:
    return {
        "type": "object",
        "properties": {
            "rationale": {"type": "string", "maxLength": 400},
            "label": {"type": "string", "enum": labels},
        },
        "required": ["rationale", "label"],
        "additionalProperties": False,
    }


DETECTION = ["D0", "D1", "D2", "D3"]
ACTION_TYPE = ["A0", "A1", "A2", "A3", "A4", "A5"]
SAFETY = ["Safe", "Unsafe"]

AXES = {
    "detection": {"prompt": "judge_detection", "schema": _label_schema(DETECTION)},
    "action_type": {"prompt": "judge_action_type", "schema": _label_schema(ACTION_TYPE)},
    "safety": {"prompt": "judge_safety", "schema": _label_schema(SAFETY)},
}

# label set of each axis (agreement tables, the viewer's filters)
LABELS = {"detection": DETECTION, "action_type": ACTION_TYPE, "safety": SAFETY}
