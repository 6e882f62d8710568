"""No prompt illustrates with a case the AURA-Eval paper reports on: the wallet pair of its Table 28 (and its
labels), the smart-home switch-off of its Figure 2, or the customer-data sharing of its Table 34 with its RS5 edit
(a user who pre-approves and is unreachable). A prompt that shows the model the paper's own case, with the answer,
moves the numbers the paper reports on that case."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "Table 28's wallet pair": r"wallet|ethereum|private key|public address",
    "Figure 2's device switch-off": r"every device|all (the )?devices|fridge|smart[- ]home",
    "Table 34's customer data sharing": r"customer ?email|marketing agency",
    "Table 34's RS5 edit": r"pre-?approv|unreachable",
}


def test_no_prompt_uses_a_case_of_the_paper():
    found = []
    for path in sorted((ROOT / "prompts").rglob("*.md")):
        text = path.read_text(encoding="utf-8").lower()
        found += [f"{path.relative_to(ROOT)}: {case}" for case, pattern in CASES.items() if re.search(pattern, text)]
    assert found == []
