"""What the money buys, from the real prompts: `aura estimate`'s projection set beside a rehearsal's request stream.

Before a run, `aura estimate` projects each line's calls and prompt tokens (from the data's counts and the
prompts' sizes, without the items a run produces). A rehearsal has produced them: every request the run would
send has been sent once, to the simulator, with its real prompt. So the rehearsal can say, line by line, what the
projection would have missed:

- ``projected``: the estimate's lines as `aura estimate` prints them for this config before anything runs (the
  rehearsal's config with empty output folders: no produced item, no cache, no logged call to measure);
- ``stream``: the distinct requests the jobs logged (``*.calls.jsonl`` under the rehearsal's logs; one per cache
  key, so a request a resumed run answered from the cache counts once, as the provider would bill it), their
  prompt tokens measured as the estimate counts them (the simulator's usage: characters // 4 of what was sent),
  their output tokens as the projection assumes per call (a simulated answer's length is not a model's).

Lines are compared per (model, role): a logged call names its model, role and prompt, not its stage's label, and
a paper config may send upstream's own prompt text under upstream's name where the estimate names the project's
prompt. A (model, role) whose calls, prompt tokens or live cost differ by more than ``THRESHOLD`` is named;
requests of a (model, role) no projected line has are named "not projected".

Read agents' lines with care: how many turns an episode takes, and so how many calls and how long the context
grows, is the model's behaviour; the simulated one ends episodes in a few turns, so there the stream says what
the prompts weigh per call, not how many calls a real model makes.
"""
from __future__ import annotations

import csv
import tempfile
from collections import defaultdict
from pathlib import Path

THRESHOLD = 0.10
FIELDS = ("group", "model", "role", "prompts", "projected_calls", "stream_calls", "projected_tokens_in",
          "stream_tokens_in", "projected_usd", "stream_usd", "differs")


def projected_lines(raw_derived: dict, source: str, outputs: tuple[str, ...]) -> list:
    """`aura estimate`'s lines for the rehearsal's config as they read before the run: its output folders (the
    ``paths`` keys named in ``outputs``) swapped for an empty one, so nothing produced, cached or logged is
    counted or measured."""
    from ..config import validate_config
    from ..estimate import family_lines

    with tempfile.TemporaryDirectory(prefix="aura-projection-") as tmp:
        raw = {**raw_derived, "paths": {**raw_derived["paths"],
                                        **{k: str(Path(tmp) / k) for k in outputs}}}
        return list(family_lines(validate_config(raw, source=f"projection of {source}")))


def stream_calls(logs: Path) -> dict[tuple[str, str, str], dict]:
    """Distinct logged requests by (model, role, prompt without version): count and prompt tokens."""
    from ..estimate import _prompt_base
    from ..io import read_jsonl

    seen: dict[str, tuple] = {}
    for path in sorted(logs.rglob("*.calls.jsonl")):
        try:
            records = list(read_jsonl(path))
        except (OSError, ValueError):
            continue  # a log cut short by a kill; its requests are logged again (as cache hits) by the rerun
        for rec in records:
            if rec.get("purpose") != "answer" or rec.get("status") != "ok" or not rec.get("prompt_name"):
                continue
            key = (rec.get("model"), rec.get("role"), _prompt_base(rec["prompt_name"]))
            if rec.get("key") not in seen or (rec.get("tokens_in") and not seen[rec["key"]][1]):
                seen[rec["key"]] = (key, rec.get("tokens_in") or 0)
    out: dict[tuple[str, str, str], dict] = defaultdict(lambda: {"calls": 0, "tokens_in": 0})
    for key, tokens_in in seen.values():
        out[key]["calls"] += 1
        out[key]["tokens_in"] += tokens_in
    return dict(out)


def compare(config, lines: list, stream: dict[tuple[str, str, str], dict]) -> list[dict]:
    """One row per (model, role): the projected lines' sums beside the stream's, whichever prompt names either
    side uses (a paper config may render upstream's own prompt text where the estimate names ours)."""
    from ..estimate import _prompt_base

    groups: dict[tuple[str, str], dict] = {}
    for ln in lines:
        if ln.role is None or not ln.calls:
            continue
        g = groups.setdefault((ln.model, ln.role), {"stages": [], "prompts": set(), "calls": 0, "tokens_in": 0,
                                                    "tokens_out": 0, "usd": 0.0})
        g["stages"].append(ln.stage.split(" (")[0])
        g["prompts"].update(_prompt_base(p) for p in ln.prompts)
        for k, v in (("calls", ln.calls), ("tokens_in", ln.tokens_in), ("tokens_out", ln.tokens_out),
                     ("usd", ln.cost_usd)):
            g[k] += v
    got: dict[tuple[str, str], dict] = defaultdict(lambda: {"calls": 0, "tokens_in": 0, "prompts": set()})
    for (model, role, prompt), s in stream.items():
        got[(model, role)]["calls"] += s["calls"]
        got[(model, role)]["tokens_in"] += s["tokens_in"]
        got[(model, role)]["prompts"].add(prompt)
    rows = []
    for gkey in list(groups) + [k for k in got if k not in groups]:
        g = groups.get(gkey, {"stages": ["not projected"], "prompts": set(), "calls": 0, "tokens_in": 0,
                              "tokens_out": 0, "usd": 0.0})
        s = got.get(gkey, {"calls": 0, "tokens_in": 0, "prompts": set()})
        model, role = gkey
        out_each = g["tokens_out"] / g["calls"] if g["calls"] else 0
        price = config.models[model].price if model in config.models else None
        usd = price.cost(s["tokens_in"], round(s["calls"] * out_each)) if price else 0.0
        differs = [name for name, a, b in (("calls", g["calls"], s["calls"]),
                                          ("tokens_in", g["tokens_in"], s["tokens_in"]),
                                          ("usd", g["usd"], usd)) if _off(a, b)]
        rows.append({"group": " + ".join(dict.fromkeys(g["stages"])), "model": model, "role": role,
                     "prompts": " ".join(sorted(g["prompts"] | s["prompts"])), "projected_calls": g["calls"],
                     "stream_calls": s["calls"], "projected_tokens_in": g["tokens_in"],
                     "stream_tokens_in": s["tokens_in"], "projected_usd": round(g["usd"], 2),
                     "stream_usd": round(usd, 2), "differs": " ".join(differs)})
    return rows


def _off(projected: float, stream: float) -> bool:
    if not projected:
        return bool(stream)
    return abs(stream - projected) / projected > THRESHOLD


def write(rows: list[dict], path: Path) -> None:
    from ..io import atomic_file

    with atomic_file(path) as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def summary(rows: list[dict]) -> dict:
    proj = sum(r["projected_usd"] for r in rows)
    got = sum(r["stream_usd"] for r in rows)
    return {"groups": len(rows), "differ": sum(bool(r["differs"]) for r in rows),
            "projected_calls": sum(r["projected_calls"] for r in rows),
            "stream_calls": sum(r["stream_calls"] for r in rows),
            "projected_usd": round(proj, 2), "stream_usd": round(got, 2)}


def report_lines(rows: list[dict]) -> list[str]:
    s = summary(rows)
    lines = [f"aura rehearse: estimate from the request stream: {s['stream_calls']} calls ${s['stream_usd']:,.2f} "
             f"live (output tokens as assumed) vs aura estimate's {s['projected_calls']} calls "
             f"${s['projected_usd']:,.2f}; {s['differ']} of {s['groups']} lines differ by more than "
             f"{THRESHOLD:.0%}"]
    for r in rows:
        if r["differs"]:
            lines.append(f"aura rehearse:   {r['group']} / {r['model']} ({r['role']}): calls {r['projected_calls']:,} "
                         f"-> {r['stream_calls']:,}, prompt tokens per call {_each(r, 'projected')} -> "
                         f"{_each(r, 'stream')}, ${r['projected_usd']:,.2f} -> ${r['stream_usd']:,.2f}")
    return lines


def _each(row: dict, side: str) -> str:
    calls = row[f"{side}_calls"]
    return f"{row[f'{side}_tokens_in'] / calls:,.0f}" if calls else "-"
