"""The pilot configs (config/pilot_{aura,lpsbench,pasbench}.yaml): each extends its family's paper config, changes
only the pilot's caps, model subset, name and output paths, and `aura estimate` prices it below the paper run."""
from __future__ import annotations

import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from aura.config import load_config, read_raw

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"
OUTPUT_PATHS = ("interim", "processed", "results", "figures", "logs")
BUDGET_USD = 50.0  # what each pilot was sized to at batch price (see each file's comment)

# pilot file -> (its paper config, its name, the leaf keys it may change: the pilot's caps, models, name, paths)
PILOTS = {
    "pilot_aura.yaml": ("paper.yaml", "aura-pilot", {
        "name", "families", *(f"paths.{p}" for p in OUTPUT_PATHS),
        "aura.roles.evaluated", "aura.construct.max_seeds",
        "aura.evaluate.format_models", "aura.evaluate.vendor_overlap_models",
        "aura.evaluate.consistency_models", "aura.evaluate.validation_models"}),
    "pilot_lpsbench.yaml": ("lpsbench.yaml", "lpsbench-pilot", {
        "name", *(f"paths.{p}" for p in OUTPUT_PATHS), "lpsbench.evaluated", "lpsbench.variants", "lpsbench.max_cases"}),
    "pilot_pasbench.yaml": ("pasbench.yaml", "pasbench-pilot", {
        "name", *(f"paths.{p}" for p in OUTPUT_PATHS), "pasbench.evaluated", "pasbench.roster.models",
        "pasbench.reactive_probe", "pasbench.propose_verify"}),
}


def changed(base: dict, over: dict, prefix: str = "") -> dict[str, tuple]:
    """Leaf key -> (base value, over value) wherever the two differ (a list is one leaf, as `extends` merges it)."""
    out = {}
    for key in sorted(set(base) | set(over)):
        a, b, path = base.get(key), over.get(key), f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out.update(changed(a, b, path + "."))
        elif a != b:
            out[path] = (a, b)
    return out


@lru_cache(maxsize=None)
def estimate_output(name: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "aura", "estimate", "--configfile", str(Path("config") / name)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"aura estimate --configfile config/{name}: rc {proc.returncode}\n{proc.stderr}"
    return proc.stdout


def totals(out: str) -> tuple[float, float]:
    """(live, batch) USD of the estimate's TOTAL line: ... cost_usd batch_usd cached_usd batch+cached."""
    line = next(ln for ln in out.splitlines() if re.match(r"TOTAL\s+\d", ln))
    numbers = [float(x.replace(",", "")) for x in line.split()[1:]]
    return numbers[-4], numbers[-3]


@pytest.mark.parametrize("pilot", sorted(PILOTS))
def test_pilot_loads_and_extends_its_paper_config(pilot):
    paper, name, _ = PILOTS[pilot]
    own = yaml.safe_load((CONFIG / pilot).read_text(encoding="utf-8"))
    assert own["extends"] == paper
    config = load_config(CONFIG / pilot)  # validated: schema, families, provider rules, roster
    assert config.raw["name"] == name != read_raw(CONFIG / paper)["name"]


@pytest.mark.parametrize("pilot", sorted(PILOTS))
def test_pilot_differs_from_its_paper_config_only_in_the_pilot_keys(pilot):
    paper_file, _, allowed = PILOTS[pilot]
    paper, mine = read_raw(CONFIG / paper_file), read_raw(CONFIG / pilot)
    assert set(changed(paper, mine)) == allowed


@pytest.mark.parametrize("pilot", sorted(PILOTS))
def test_pilot_writes_to_its_own_folders(pilot):
    paper = load_config(CONFIG / PILOTS[pilot][0]).paths
    mine = load_config(CONFIG / pilot).paths
    others = [load_config(CONFIG / p).paths for p in PILOTS if p != pilot]
    for key in OUTPUT_PATHS:
        assert mine[key] != paper[key]
        assert not Path(mine[key]).is_relative_to(paper[key]) and not Path(paper[key]).is_relative_to(mine[key])
        assert all(mine[key] != o[key] for o in others)
    assert mine["cache"] == paper["cache"]  # content-addressed, shared: a later full run gets the pilot's cache hits


def test_pilot_settings():
    aura, paper = load_config(CONFIG / "pilot_aura.yaml").raw, load_config(CONFIG / "paper.yaml").raw
    assert aura["families"] == ["aura"]
    assert aura["aura"]["construct"]["max_seeds"] == 40
    assert aura["aura"]["roles"]["evaluated"] == ["claude-sonnet-4.6"]
    assert set(aura["aura"]["roles"]["evaluated"]) <= set(paper["aura"]["roles"]["evaluated"])
    assert aura["aura"]["roles"]["judges"] == paper["aura"]["roles"]["judges"]  # the paper's panel judges

    lps, lps_paper = load_config(CONFIG / "pilot_lpsbench.yaml").raw, load_config(CONFIG / "lpsbench.yaml").raw
    assert lps["lpsbench"]["variants"] == ["raw"]  # Tables 3 and 4 are without mitigation
    assert lps["lpsbench"]["max_cases"] == 126  # 14 per risk, spread over the domains (see the file)
    assert set(lps["lpsbench"]["evaluated"]) < set(lps_paper["lpsbench"]["evaluated"])
    assert lps["lpsbench"]["evaluator"] == lps_paper["lpsbench"]["evaluator"]

    pas, pas_paper = load_config(CONFIG / "pilot_pasbench.yaml").raw, load_config(CONFIG / "pasbench.yaml").raw
    pb, pbp = pas["pasbench"], pas_paper["pasbench"]
    assert set(pb["evaluated"]) < set(pbp["evaluated"])
    assert pb["max_items"] == pbp["max_items"] == {"text": None, "image": None}
    assert (pb["samples"], pb["judge"]) == (pbp["samples"], pbp["judge"])
    unavailable = [m for m in pbp["roster"]["models"] if pas_paper["models"][m].get("unavailable")]
    assert set(pb["roster"]["models"]) == set(unavailable) | set(pb["evaluated"])
    assert pb["roster"]["paper_total"] == pbp["roster"]["paper_total"]
    assert pb["reactive_probe"] is False and pb["propose_verify"] is False


@pytest.mark.parametrize("pilot", sorted(PILOTS))
def test_estimate_prices_the_pilot_below_the_paper_run(pilot):
    paper_file = PILOTS[pilot][0]
    live, batch = totals(estimate_output(pilot))
    paper_live, paper_batch = totals(estimate_output(paper_file))
    assert 0 < batch <= live
    assert batch <= paper_batch and live <= paper_live
    out = estimate_output(pilot)
    if not re.search(r"\b(exact|counted|projected)\*", out):  # nothing measured yet: the assumptions it was sized on
        assert batch <= BUDGET_USD, f"{pilot}: ${batch:.2f} at batch price, over the ${BUDGET_USD:.0f} it was sized to"
