"""Every path a report's caption names exists (issue 49: twenty captions named notebooks at paths that did not
exist): a repository path is a file of this checkout (or of the family's own package), an output path is one the
default config's layout writes, and the notebook a caption names is the one that renders that report. Each report
is in the Snakemake report under its family's category, its tables beside its figure."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from aura.config import REPO_ROOT, load_config
from aura.families import family_of_report, names
from aura.pipeline.layout import layout
from aura.pipeline.rules_support import REPORTS, report_category, report_outputs

REPO_PATH = re.compile(r"(?<![\w/])((?:notebooks|src|docs|prompts|config|report|bench|tests)/[\w./-]*\w)")
OUTPUT_PATH = re.compile(r"(?<![\w/])((?:results|figures|data)/[\w./{}-]*\w)")
CONFIG = load_config(REPO_ROOT / "config" / "config.yaml")


def _written(path: str) -> bool:
    patterns = [str(v) for v in layout(CONFIG.raw).values()]
    return any(re.fullmatch(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(p)), path) for p in patterns)


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_every_path_a_caption_names_exists(name):
    family = family_of_report(name)
    text = Path(family.caption(name)).read_text(encoding="utf-8")
    missing = [p for p in REPO_PATH.findall(text) if not (REPO_ROOT / p).exists()]
    missing += [p for p in OUTPUT_PATH.findall(text) if not _written(p)]
    assert missing == [], f"{family.caption(name)} names paths that do not exist: {missing}"
    notebooks = [p for p in REPO_PATH.findall(text) if p.endswith(".ipynb")]
    own = Path(family.notebook(name)).resolve().relative_to(REPO_ROOT).as_posix()
    assert notebooks in ([], [own]), f"{name}: the caption names {notebooks}, the report renders {own}"


def test_each_report_is_filed_under_its_family_with_its_tables():
    order = [report_category(next(n for n in REPORTS if family_of_report(n).name == f)) for f in names()]
    assert order == sorted(order) and order[0].startswith("1 ")  # numbered in the families' order
    for name, spec in REPORTS.items():
        outs = report_outputs(CONFIG.raw, name)
        flagged = {k: v.flags["report"] for k, v in outs.items() if hasattr(v, "flags") and "report" in v.flags}
        expected = ({"pdf"} if spec.get("figure", True) else set()) | {f"{t}_csv" for t in spec.get("tables", [])}
        assert set(flagged) == expected, name
        assert {f.category for f in flagged.values()} == {report_category(name)}
        assert {f.subcategory for f in flagged.values()} == ({"Figures"} if spec.get("figure", True) else set()) | (
            {"Tables"} if spec.get("tables") else set())
