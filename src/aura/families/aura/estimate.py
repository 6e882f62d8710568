"""`python -m aura estimate` for AURA: calls, tokens and cost per stage and model, spending nothing.

Rollouts and judges: exact where their inputs exist (requests built as the stage builds them and looked
up in the cache: hits excluded). Construction stages: counted from their input files where those exist
(cache not checked), else projected from the seed count with the paper's funnel ratios. The subset
judgings (Table 24 replacement judge, Table 25 repeats, the human-validation panel) and the optional
experiments (open-ended rollouts, composed mechanisms) follow. Every line carries the LLM-layer role
its stage passes to `LLMClient.run` and the prompts it renders (aura.estimate.Line).
"""
from __future__ import annotations

import glob
from dataclasses import replace
from pathlib import Path

from aura.config import Config, UserError
from aura.estimate import CHARS_PER_TOKEN, Line, call_out_tokens, exact_line, offline_client, stage_line
from aura.io import read_jsonl
from aura.llm.structured import parse_structured
from aura.pipeline.layout import layout
from aura.prompts import get_prompt

from . import STAGES
from .construct import composed as C
from .data.rjudge import load_rjudge, select_unintended
from .data.seed_source import seed_download, seed_folder
from .evaluate import judge
from .evaluate import open_ended as OE
from .evaluate import rollout
from .settings import role_models, roles, section, vendor_overlaps

AXES3 = ("detection", "action_type", "safety")
JUDGE_PROMPTS = {axis: f"judge_{axis}" for axis in AXES3}
ROLLOUT_PROMPT = "rollout_react"


def _call(stage: str) -> str:
    """The one call kind an AURA stage declares (its manifest's Stage.calls)."""
    [kind] = STAGES[stage].calls
    return kind


def _out(config: Config, stage: str, model: str) -> int:
    return call_out_tokens(config, stage, _call(stage), model)


def _projected(config: Config, stage: str, label: str, model: str, calls: int, tokens_in_each: int, *,
               prompts=None, basis: str = "projected") -> Line:
    """`calls` calls of the stage's declared call (role, prompts, completion tokens): aura.estimate.stage_line."""
    return stage_line(config, stage, _call(stage), model, calls, tokens_in_each, label=label, prompts=prompts,
                      basis=basis)


def _judge_prompts(axes) -> tuple[str, ...]:
    return tuple(JUDGE_PROMPTS[a] for a in axes)


# Calls per seed in the paper's run (Appendix H). line -> (stage, aura.roles key naming the models, calls per
# seed, input file, rows -> calls); each call's role and prompts are the stage's declaration.
PAPER_PER_SEED = {
    "tag-truncate (P1)": ("tag-truncate", "generator", 1.0, "seeds"),
    "relevance (P2)": ("relevance", "generator", 211 / 157, "prefixes"),
    "generate-variations (P3/P4)": ("generate-variations", "generator", 1029 / 157, "relevance"),
    "review-variations (P5/P6)": ("review-variations", "reviewers", 916 / 157, "variations"),
    "classify (P7)": ("classify", "classifier", 861 / 157, None),
    "generate-pairs (P8)": ("generate-pairs", "generator", 593 / 157, "classified"),
    "review-pairs (P9)": ("review-pairs", "reviewers", 590 / 157, "pairs"),
    "leak-probe": ("leak-probe", "classifier", 1249 / 157, "dataset"),  # one guess per released row
}
# Input tokens of one call where a stage's requests are far from construction's usual 1,500 (a rationale alone).
TOKENS_IN = {"leak-probe": 250}


def seed_count(config: Config) -> tuple[int, str]:
    """The number of seeds construction starts from, and a line saying where it came from.

    Read from the seed folder when it exists (a folder that cannot be read is an error, never a
    silent fallback). When it does not exist yet because it is to be downloaded (aura.seed_download),
    the count is projected, and the line says so: from ``aura.seed_counts.unintended`` when configured,
    else ``aura.estimate.seeds``. A missing folder with no download configured is an error.
    """
    raw = config.raw
    folder = Path(seed_folder(raw))
    if folder.is_dir():
        try:
            n = len(select_unintended(load_rjudge(folder)))
        except (OSError, ValueError) as exc:
            raise UserError(f"estimate: cannot read the seeds in {folder}: {exc}") from None
        note = f"seeds: {n} unintended records read from {folder}"
    elif seed_download(raw):
        expected = (section(raw).get("seed_counts") or {}).get("unintended")
        n = expected or section(raw)["estimate"]["seeds"]
        source = "aura.seed_counts.unintended" if expected else "aura.estimate.seeds"
        note = f"projected from {n} seeds ({source}): {folder} is not downloaded yet (rule fetch_seeds)"
    else:
        raise UserError(f"estimate: seed folder {folder} does not exist (paths.seeds) and no aura.seed_download "
                         "is configured; point paths.seeds at an R-Judge data folder (<Domain>/*.json)")
    cap = section(raw)["construct"]["max_seeds"]
    if cap and cap < n:
        return cap, f"{note}; capped at aura.construct.max_seeds = {cap}"
    return n, note


def construction_lines(config: Config, lay: dict, seeds: int) -> list[Line]:
    """Calls per construction stage: counted from the stage's input file when it exists."""
    lines = []
    for label, (stage, models_of, per_seed, source) in PAPER_PER_SEED.items():
        path = Path(lay[source]) if source else None
        counted = None
        if path is not None and path.exists():
            rows = list(read_jsonl(path))
            if source == "relevance":
                counted = sum(len(r["requests"]) for r in rows)
            elif source == "classified":
                counted = sum(1 for r in rows if r["status"] == "ok" and r["pairable"])
            elif source in ("variations", "pairs"):
                counted = sum(1 for r in rows if r["status"] == "ok")
            else:
                counted = len(rows)
        models = role_models(config, models_of)
        for m in dict.fromkeys(models):
            n = (counted if counted is not None else round(seeds * per_seed)) * models.count(m)
            lines.append(_projected(config, stage, label, m, n, TOKENS_IN.get(stage, 1500),
                                    basis="counted" if counted is not None else "projected"))
    return lines


def estimate_lines(config: Config) -> tuple[list[Line], str]:
    """AURA's lines (the manifest's estimate hook) and the line saying where the seed count came from."""
    raw = config.raw
    ev = section(raw)["evaluate"]
    lay = layout(raw)
    client = offline_client(config)
    seeds, note = seed_count(config)
    lines = construction_lines(config, lay, seeds)
    evaluated, judges = role_models(config, "evaluated"), list(dict.fromkeys(role_models(config, "judges")))
    dataset_path = Path(lay["dataset"])
    items = list(read_jsonl(dataset_path)) if dataset_path.exists() else None
    prompt = get_prompt(ROLLOUT_PROMPT)
    jprompts = judge.load_prompts()
    n_items = len(items) if items is not None else round(seeds * section(raw)["estimate"]["items_per_seed"])
    avg_in = (sum(len(it["model_input"]) for it in items) // max(1, len(items)) // CHARS_PER_TOKEN + 250
              if items else 900)
    by_id = {it["item_id"]: it for it in items or []}
    for m in evaluated:
        if items is not None:
            lines.append(exact_line(config, client, "rollout", m, rollout.requests_for(items, prompt),
                                    role="evaluated", prompts=(ROLLOUT_PROMPT,), out_each=_out(config, "rollout", m)))
        else:
            lines.append(_projected(config, "rollout", "rollout", m, n_items, avg_in, prompts=(ROLLOUT_PROMPT,)))
        files = sorted(glob.glob(lay["rollouts"].format(model=m, shard="*")))
        rolled = [r for f in files for r in read_jsonl(f) if r["status"] == "ok"] if files and items else None
        for j in judges:
            if rolled is not None:
                lines += _judge_lines(config, client, j, AXES3, rolled, by_id, jprompts, 0, f"judge:{{axis}} ({m})")
            else:
                lines.append(_projected(config, "judge", f"judge ({m})", j, 3 * n_items, avg_in + 150))
    for job in _subset_jobs(config):
        lines += _subset_judging(config, client, lay, jprompts, by_id, n_items, avg_in, job)
    if ev["open_ended"]["enabled"]:  # open-ended rollouts (off by default)
        lines += open_ended_lines(config, n_items, avg_in)
    if section(raw)["construct"]["composed"]["enabled"]:  # composed mechanisms (off by default)
        lines += composed_lines(config, lay, seeds, avg_in)
    return lines, note


def _cached_label(client, model: str, req) -> str | None:
    """The label of a cached first answer (None when not cached or not parseable)."""
    hit = client.cache.get(client.prepare(model, req)[3])
    parsed, _ = parse_structured(hit["response"]["text"], req.schema) if hit else (None, None)
    return parsed.get("label") if isinstance(parsed, dict) else None


def _judge_lines(config: Config, client, model: str, axes, rolled: list[dict], by_id: dict, jprompts: dict,
                 sample_index: int, stage: str) -> list[Line]:
    """Exact lines of one judge job, one per axis. Safety prompts carry the judge's own action type, so
    they are built from the cached action-type answers (a type not cached yet is 'unknown': same size)."""
    def reqs(axis, types=None):
        return [replace(q, sample_index=sample_index) for q in judge.requests_for(axis, jprompts, rolled, by_id, types)]

    types = [_cached_label(client, model, q) for q in reqs("action_type")]
    return [exact_line(config, client, stage.format(axis=axis), model, reqs(axis, types if axis == "safety" else None),
                       role=STAGES["judge"].call("judge").role, prompts=_judge_prompts([axis]),
                       out_each=_out(config, "judge", model))
            for axis in axes]


def _subset_judging(config: Config, client, lay: dict, jprompts: dict, by_id: dict, n_items: int, avg_in: int,
                    job: dict) -> list[Line]:
    """A judge re-labelling one model's rollouts on a subset of items (Tables 23-25): exact when the
    subset and the rollouts exist, else projected from the subset size."""
    files = sorted(glob.glob(lay["rollouts"].format(model=job["model"], shard="*")))
    sample = job.get("items")
    if sample is None and Path(lay[job["sample"]]).exists():
        sample = {r["item_id"] for r in read_jsonl(Path(lay[job["sample"]]))}
    if sample is not None and files and by_id:
        rolled = [r for f in files for r in read_jsonl(f) if r["status"] == "ok" and r["item_id"] in sample]
        return _judge_lines(config, client, job["judge"], job["axes"], rolled, by_id, jprompts, job["run"],
                            f"{job['label']}:{{axis}} ({job['model']})")
    ev = section(config.raw)["evaluate"]
    n = len(job["items"]) if job.get("items") is not None else min(n_items, ev[job["size"]])
    return [_projected(config, "judge", f"{job['label']} ({job['model']})", job["judge"], len(job["axes"]) * n,
                       avg_in + 150, prompts=_judge_prompts(job["axes"]))]


def _subset_jobs(config: Config) -> list[dict]:
    """Table 24 (replacement judge, two axes), Table 25 (every judge, repeats 1..runs-1) and the
    validation panel on the human-labelled items (Tables 3, 21-23)."""
    raw = config.raw
    ev, jobs = section(raw)["evaluate"], []
    for m in vendor_overlaps(raw):
        jobs.append({"label": "replacement", "model": m, "judge": roles(raw)["replacement_judge"], "run": 0,
                     "axes": ("action_type", "safety"), "sample": "vendor_sample", "size": "vendor_overlap_sample_size"})
    for m in ev["consistency_models"]:
        for j in dict.fromkeys(role_models(config, "judges")):
            jobs += [{"label": f"repeat{r}", "model": m, "judge": j, "run": r, "axes": AXES3,
                      "sample": "consistency_sample", "size": "consistency_sample_size"}
                     for r in range(1, ev["consistency_runs"])]
    human = config.paths.get("human_labels")
    if human and roles(raw).get("validation_judges") and Path(human).exists():
        from .stats.human_validation import read_human_labels

        labels = read_human_labels(Path(human))
        for m in sorted(set(labels["model"])):
            items = set(labels.loc[labels["model"] == m, "item_id"])
            # a scoring judge's validation requests equal its main ones (cache hits): counted once, above
            jobs += [{"label": "validation", "model": m, "judge": j, "run": 0, "axes": AXES3, "items": items}
                     for j in dict.fromkeys(role_models(config, "validation_judges"))
                     if j not in role_models(config, "judges")]
    return jobs


# --- the optional experiments ---------------------------------------------------------------------

def open_ended_lines(config: Config, n_items: int, avg_in: int) -> list[Line]:
    """Open-ended rollouts (projected; only when enabled): per model, the agent's steps 2..K and the
    emulator's K-1 replies, and per judge 2 calls (action type, safety) per step 2..K. Step 1 and its judging
    are the main rollout's and judges' own requests (cache hits), counted there. Each later step's prompt grows
    by one step and one reply (~350 tokens); episodes that stop early need fewer calls: an upper bound."""
    oe = OE.section(config.raw)
    n = min(n_items, oe["sample_size"]) if oe.get("sample_size") else n_items
    later = range(2, oe["max_steps"] + 1)
    grown = [avg_in + 350 * (k - 1) for k in later]  # the prompt of step k
    each = sum(grown) // max(1, len(grown))
    steps = n * len(grown)
    lines = []
    for m in OE.models(config.raw):
        lines.append(stage_line(config, "open-ended", "agent", m, steps, each, label=f"open-ended agent ({m})"))
        lines.append(stage_line(config, "open-ended", "environment", None, steps, each + 150,  # its Call's model
                                label=f"open-ended emulator ({m})"))
        for j in dict.fromkeys(role_models(config, "judges")):
            lines.append(_projected(config, "judge", f"open-ended judge ({m})", j, 2 * steps, each + 150,
                                    prompts=_judge_prompts(("action_type", "safety"))))
    return lines


def composed_lines(config: Config, lay: dict, seeds: int, avg_in: int) -> list[Line]:
    """Composed mechanisms (only when enabled). New calls only: per composition, 1 generation, 1 review per
    reviewer, 1 classification, and per evaluated model 1 rollout and 3 judge calls per judge; the singles are
    the main run's own requests (cache hits), counted there. Compositions are counted from P2's answers when
    they exist (`candidates`), else projected: each dimension named on a prefix at the paper's rate (1,029
    requests / 211 prefixes / 11 dimensions), the two of a pair independently. An upper bound: every
    composition is assumed to pass its checks and review."""
    cfg = C.settings(config)
    pairs = C.canonical_pairs(cfg["pairs"])
    relevance = Path(lay["relevance"])
    if relevance.exists():
        design = C.candidates(list(read_jsonl(relevance)), pairs)
        n, basis = sum(1 for c in design if C.is_composed(c["dimension"])), "counted"
    else:
        share = 1029 / 211 / 11
        n, basis = round(seeds * PAPER_PER_SEED["relevance (P2)"][2] * share * share * len(pairs)), "projected"
    r = roles(config.raw)
    # (line, stage, models, calls per composition, prompt tokens per call, prompts: None = the call's)
    steps = [("composed-variations", "composed-variations", [r["generator"]], 1, 1500, None),
             ("composed-review", "composed-review", list(r["reviewers"]), 1, 1500, None),
             ("composed-classify", "composed-classify", [r["classifier"]], 1, 1500, None)]
    for m in cfg["models"] or r["evaluated"]:
        steps += [(f"rollout (composed, {m})", "rollout", [m], 1, avg_in, (ROLLOUT_PROMPT,)),
                  *((f"judge (composed, {m})", "judge", [j], 3, avg_in + 150, None) for j in dict.fromkeys(r["judges"]))]
    return [_projected(config, stage, label, model, n * per, tokens_in, prompts=prompts, basis=basis)
            for label, stage, models, per, tokens_in, prompts in steps for model in models]
