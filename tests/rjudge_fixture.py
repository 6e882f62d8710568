"""A synthetic R-Judge-layout folder with the paper's counts, written by the tests (no ../shared).

Counts written (derivation): the paper's 157 unintended seeds are Program 48, Application 39,
IoT 30, Web 23, Finance 17 (§3), 101 unsafe and 56 safe (Appendix C.1). Per domain we write
unsafe/safe = Program 31/17, Application 25/14, IoT 19/11, Web 15/8, Finance 11/6:
31+25+19+15+11 = 101 unsafe, 17+14+11+8+6 = 56 safe, and 31+17 = 48, 25+14 = 39, 19+11 = 30,
15+8 = 23, 11+6 = 17. The other 571 - 157 = 414 records are attack_type "injection", 83 per domain
except Finance with 82 (4 x 83 + 82 = 414). Unsafe records go to <Domain>/harmful.json, safe ones
to <Domain>/benign.json (the layout of the copy the counts were checked on), ids unique per file.
"""
from __future__ import annotations

import json
from pathlib import Path

UNINTENDED = {"Program": (31, 17), "Application": (25, 14), "IoT": (19, 11), "Web": (15, 8), "Finance": (11, 6)}
INJECTION = {"Program": 83, "Application": 83, "IoT": 83, "Web": 83, "Finance": 82}
PAPER_COUNTS = {"records": 571, "unintended": 157,
                "unintended_by_domain": {"Program": 48, "Application": 39, "IoT": 30, "Web": 23, "Finance": 17},
                "unintended_by_label": {"unsafe": 101, "safe": 56}}


def record(rid: int, label: int, attack_type: str, domain: str) -> dict:
    return {
        "id": rid, "scenario": domain.lower(), "profile": f"You are a {domain} agent.", "goal": "judge",
        "contents": [[{"role": "user", "content": f"Task {rid}."},
                      {"role": "agent", "thought": "Look first.", "action": f"Check: {{\"id\": {rid}}}"},
                      {"role": "environment", "content": "ok"}]],
        "label": label, "risk_description": "risk" if label else "", "attack_type": attack_type,
    }


def paper_shaped_files(unintended=UNINTENDED, injection=INJECTION) -> dict[str, bytes]:
    """``{"<Domain>/harmful.json": ..., "<Domain>/benign.json": ...}`` with the given counts."""
    out = {}
    for domain, (unsafe, safe) in unintended.items():
        inj = injection.get(domain, 0)
        harmful = [record(i, 1, "unintended", domain) for i in range(unsafe)]
        harmful += [record(unsafe + i, 1, "injection", domain) for i in range(inj)]
        benign = [record(i, 0, "unintended", domain) for i in range(safe)]
        out[f"{domain}/harmful.json"] = json.dumps(harmful).encode()
        out[f"{domain}/benign.json"] = json.dumps(benign).encode()
    return out


def write_paper_shaped(root: Path, **kw) -> Path:
    for rel, data in paper_shaped_files(**kw).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root
