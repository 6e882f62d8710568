"""`python -m aura estimate`: calls, tokens and cost a run would spend, per stage and model.

Rollouts and judges: exact where their inputs exist (requests built as the stage builds them and
looked up in the cache: hits excluded). Construction stages: counted from their input files where
those exist (cache not checked), else projected from the seed count with the paper's funnel
ratios. Spends nothing: no server is started and no request is sent.
"""
from __future__ import annotations

import glob
from dataclasses import dataclass, replace
from pathlib import Path

from .config import Config, vendor_overlaps
from .data.fetch import seed_download, seed_folder
from .data.rjudge import load_rjudge, select_unintended
from .evaluate import judge, rollout
from .io import read_jsonl
from .llm import Cache, LLMClient, LLMRequest
from .llm.structured import parse_structured
from .pipeline.layout import layout
from .prompts import get_prompt
from .stats.human_validation import read_human_labels

CHARS_PER_TOKEN = 4
DEFAULT_COMPLETION = {"rollout": 200, "judge": 120, "construct": 700}
# Calls per seed in the paper's run (Appendix H): stage -> (role, calls per seed, input file, rows -> calls)
PAPER_PER_SEED = {
    "tag-truncate (P1)": ("generator", 1.0, "seeds", 1),
    "relevance (P2)": ("generator", 211 / 157, "prefixes", 1),
    "generate-variations (P3/P4)": ("generator", 1029 / 157, "relevance", None),
    "review-variations (P5/P6)": ("reviewers", 916 / 157, "variations", 1),
    "classify (P7)": ("classifier", 861 / 157, None, 1),
    "generate-pairs (P8)": ("generator", 593 / 157, "classified", None),
    "review-pairs (P9)": ("reviewers", 590 / 157, "pairs", 1),
}


@dataclass
class Line:
    stage: str
    model: str
    basis: str  # exact | counted | projected
    calls: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0  # live, full price
    batch_usd: float | None = None  # through the Batch API where the line can be (estimate_views)
    cached_usd: float | None = None  # live, the static prompt prefix partly at price.cached_input
    both_usd: float | None = None  # both levers


def _completion_tokens(config: Config, stage: str, model: str) -> int:
    params = config.models[model].params
    default = config.raw["estimate"]["completion_tokens"].get(stage, DEFAULT_COMPLETION.get(stage, 150))
    cap = params.get("max_tokens") or params.get("max_completion_tokens")
    return min(default, cap) if cap else default


def _exact(config: Config, client: LLMClient, stage: str, model: str, requests: list[LLMRequest]) -> Line:
    line = Line(stage, model, "exact")
    out_tok = _completion_tokens(config, stage, model)
    price = config.models[model].price
    for req in requests:
        messages, _, _, key = client.prepare(model, req)
        if client.cache.contains(key):
            line.cached += 1
            continue
        tin = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
        line.calls += 1
        line.tokens_in += tin
        line.tokens_out += out_tok
        line.cost_usd += price.cost(tin, out_tok)
    return line


def _projected(config: Config, stage: str, model: str, calls: int, tokens_in_each: int) -> Line:
    out_tok = _completion_tokens(config, stage, model)
    price = config.models[model].price
    return Line(stage, model, "projected", calls=calls, tokens_in=calls * tokens_in_each,
                tokens_out=calls * out_tok, cost_usd=price.cost(calls * tokens_in_each, calls * out_tok))


class Estimate(list):
    """The estimate's lines; ``seeds_note`` says where the seed count came from."""

    seeds_note: str = ""


def seed_count(config: Config) -> tuple[int, str]:
    """The number of seeds construction starts from, and a line saying where it came from.

    Read from the seed folder when it exists (a folder that cannot be read is an error, never a
    silent fallback). When it does not exist yet because it is to be downloaded (seed_download),
    the count is projected, and the line says so: from ``seed_counts.unintended`` when configured,
    else ``estimate.seeds``. A missing folder with no download configured is an error.
    """
    folder = Path(seed_folder(config.raw))
    if folder.is_dir():
        try:
            n = len(select_unintended(load_rjudge(folder)))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"estimate: cannot read the seeds in {folder}: {exc}") from None
        note = f"seeds: {n} unintended records read from {folder}"
    elif seed_download(config.raw):
        expected = (config.raw.get("seed_counts") or {}).get("unintended")
        n = expected or config.raw["estimate"]["seeds"]
        source = "seed_counts.unintended" if expected else "estimate.seeds"
        note = f"projected from {n} seeds ({source}): {folder} is not downloaded yet (rule fetch_seeds)"
    else:
        raise SystemExit(f"estimate: seed folder {folder} does not exist (paths.seeds) and no seed_download "
                         "is configured; point paths.seeds at an R-Judge data folder (<Domain>/*.json)")
    cap = config.raw["construct"]["max_seeds"]
    if cap and cap < n:
        return cap, f"{note}; capped at construct.max_seeds = {cap}"
    return n, note


def _construction(config: Config, lay: dict, seeds: int) -> list[Line]:
    """Calls per construction stage: counted from the stage's input file when it exists."""
    lines = []
    for stage, (role, per_seed, source, _) in PAPER_PER_SEED.items():
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
        models = config.role_models(role)
        for m in dict.fromkeys(models):
            n = (counted if counted is not None else round(seeds * per_seed)) * models.count(m)
            line = _projected(config, "construct", m, n, 1500)
            line.stage, line.basis = stage, "counted" if counted is not None else "projected"
            lines.append(line)
    return lines


def estimate(config: Config) -> Estimate:
    """Every enabled family's lines (aura.families: `families` in the config), with their batch and
    prefix-cache costs (estimate_views)."""
    lines = _families(config)
    estimate_views(config, lines)
    return lines


def _families(config: Config) -> Estimate:
    from .families import enabled

    names = [family.name for family in enabled(config.raw)]
    lines = _aura(config) if "aura" in names else Estimate()
    if "pasbench" in names:
        from .families.pasbench.estimate import pasbench_lines

        more, note = pasbench_lines(config)
        lines += more
        lines.seeds_note = "; ".join(x for x in (lines.seeds_note, note) if x)
    if "lpsbench" in names:
        from .families.lpsbench.estimate import lpsbench_lines

        more, note = lpsbench_lines(config)
        lines += more
        lines.seeds_note = "; ".join(x for x in (lines.seeds_note, note) if x)
    return lines


def _aura(config: Config) -> Estimate:
    lay = layout(config.raw)
    client = LLMClient(config, Cache(config.paths["cache"]))  # never entered: no server, no request
    seeds, note = seed_count(config)
    lines = Estimate(_construction(config, lay, seeds))
    lines.seeds_note = note
    evaluated, judges = config.role_models("evaluated"), list(dict.fromkeys(config.role_models("judges")))
    dataset_path = Path(lay["dataset"])
    items = list(read_jsonl(dataset_path)) if dataset_path.exists() else None
    prompt = get_prompt("rollout_react")
    jprompts = judge.load_prompts()
    n_items = len(items) if items is not None else round(seeds * config.raw["estimate"]["items_per_seed"])
    avg_in = (sum(len(it["model_input"]) for it in items) // max(1, len(items)) // CHARS_PER_TOKEN + 250
              if items else 900)
    by_id = {it["item_id"]: it for it in items or []}
    for m in evaluated:
        if items is not None:
            lines.append(_exact(config, client, "rollout", m, rollout.requests_for(items, prompt)))
        else:
            lines.append(_projected(config, "rollout", m, n_items, avg_in))
        files = sorted(glob.glob(lay["rollouts"].format(model=m, shard="*")))
        rolled = [r for f in files for r in read_jsonl(f) if r["status"] == "ok"] if files and items else None
        for j in judges:
            if rolled is not None:
                lines += _judge_lines(config, client, j, AXES3, rolled, by_id, jprompts, 0, f"judge:{{axis}} ({m})")
            else:
                line = _projected(config, "judge", j, 3 * n_items, avg_in + 150)
                line.stage = f"judge ({m})"
                lines.append(line)
    for job in _subset_jobs(config):
        lines += _subset_judging(config, client, lay, jprompts, by_id, n_items, avg_in, job)
    if config.raw["evaluate"]["open_ended"]["enabled"]:  # open-ended rollouts (off by default)
        from .evaluate.open_ended import estimate_lines

        lines += estimate_lines(config, n_items, avg_in)
    if config.raw["construct"]["composed"]["enabled"]:  # composed mechanisms (off by default)
        from .construct import composed

        lines += composed.estimate_lines(config, lay, seeds, avg_in)
    return lines


AXES3 = ("detection", "action_type", "safety")


def _cached_label(client: LLMClient, model: str, req: LLMRequest) -> str | None:
    """The label of a cached first answer (None when not cached or not parseable)."""
    hit = client.cache.get(client.prepare(model, req)[3])
    parsed, _ = parse_structured(hit["response"]["text"], req.schema) if hit else (None, None)
    return parsed.get("label") if isinstance(parsed, dict) else None


def _judge_lines(config: Config, client: LLMClient, model: str, axes, rolled: list[dict], by_id: dict,
                 jprompts: dict, sample_index: int, stage: str) -> list[Line]:
    """Exact lines of one judge job. Safety prompts carry the judge's own action type, so they are
    built from the cached action-type answers (a type not cached yet is 'unknown': same size)."""
    def reqs(axis, types=None):
        return [replace(q, sample_index=sample_index) for q in judge.requests_for(axis, jprompts, rolled, by_id, types)]

    types = [_cached_label(client, model, q) for q in reqs("action_type")]
    lines = []
    for axis in axes:
        line = _exact(config, client, "judge", model, reqs(axis, types if axis == "safety" else None))
        line.stage = stage.format(axis=axis)
        lines.append(line)
    return lines


def _subset_judging(config: Config, client: LLMClient, lay: dict, jprompts: dict, by_id: dict, n_items: int,
                    avg_in: int, job: dict) -> list[Line]:
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
    n = len(job["items"]) if job.get("items") is not None else min(n_items, config.raw["evaluate"][job["size"]])
    line = _projected(config, "judge", job["judge"], len(job["axes"]) * n, avg_in + 150)
    line.stage = f"{job['label']} ({job['model']})"
    return [line]


def _subset_jobs(config: Config) -> list[dict]:
    """Table 24 (replacement judge, two axes), Table 25 (every judge, repeats 1..runs-1) and the
    validation panel on the human-labelled items (Tables 3, 21-23)."""
    ev, jobs = config.raw["evaluate"], []
    for m in vendor_overlaps(config.raw):
        jobs.append({"label": "replacement", "model": m, "judge": config.roles["replacement_judge"], "run": 0,
                     "axes": ("action_type", "safety"), "sample": "vendor_sample", "size": "vendor_overlap_sample_size"})
    for m in ev["consistency_models"]:
        for j in dict.fromkeys(config.role_models("judges")):
            jobs += [{"label": f"repeat{r}", "model": m, "judge": j, "run": r, "axes": ("detection", "action_type", "safety"),
                      "sample": "consistency_sample", "size": "consistency_sample_size"}
                     for r in range(1, ev["consistency_runs"])]
    human = config.paths.get("human_labels")
    if human and config.roles.get("validation_judges") and Path(human).exists():
        labels = read_human_labels(Path(human))
        for m in sorted(set(labels["model"])):
            items = set(labels.loc[labels["model"] == m, "item_id"])
            # a scoring judge's validation requests equal its main ones (cache hits): counted once, above
            jobs += [{"label": "validation", "model": m, "judge": j, "run": 0, "axes": AXES3, "items": items}
                     for j in dict.fromkeys(config.role_models("validation_judges"))
                     if j not in config.role_models("judges")]
    return jobs


# The Batch API takes single-turn calls of these roles (llm.batch.roles); construction stage -> (role, prompts)
BATCH_ROLES = ("judge", "reviewer", "classifier")
STAGE_PROMPTS = {
    "tag-truncate (P1)": (None, ["p1_step_tagging"]),
    "relevance (P2)": (None, ["p2_dimension_relevance"]),
    "generate-variations (P3/P4)": (None, ["p3_harm_intensity_variation", "p4_contextual_variation"]),
    "review-variations (P5/P6)": ("reviewer", ["p5_harm_intensity_review", "p6_contextual_review"]),
    "classify (P7)": ("classifier", ["p7_pair_classification"]),
    "generate-pairs (P8)": (None, ["p8_pair_generation"]),
    "review-pairs (P9)": ("reviewer", ["p9_pair_review"]),
    "rollout": (None, ["rollout_react"]),
    "composed-variations": (None, ["composed_variation"]),
    "composed-review": ("reviewer", ["composed_review"]),
    "composed-classify": ("classifier", ["p7_pair_classification"]),
}
JUDGE_LABELS = ("judge", "replacement", "validation", "repeat")


def _role_and_prompts(stage: str) -> tuple[str | None, list[str]]:
    """The role (when the Batch API can take the line's calls) and the prompts of an AURA estimate line."""
    if stage in STAGE_PROMPTS:
        return STAGE_PROMPTS[stage]
    head = stage.split(" ", 1)[0]
    label, _, axis = head.partition(":")
    if label.startswith(JUDGE_LABELS):
        return "judge", [f"judge_{axis}"] if axis in AXES3 else [f"judge_{a}" for a in AXES3]
    return None, []  # PaSBench / LPS-Bench lines: no batch, no prefix-cache assumption


def static_prefix_tokens(name: str) -> int:
    """Tokens of a prompt before its first variable (system and user text): the part every call of the
    prompt shares, which a provider's prefix cache can serve (chars / CHARS_PER_TOKEN)."""
    p = get_prompt(name)
    text = (p.system or "") + "\n" + (p.user or "")
    cut = text.find("{{")
    return (len(text) if cut < 0 else cut) // CHARS_PER_TOKEN


def estimate_views(config: Config, lines: list[Line]) -> None:
    """Fill each line's batch, cached and batch+cached cost.

    batch: the line's calls at (1 - price.batch_discount) when its role is one the Batch API takes and
    its model's endpoint says `batch: true`. cached: per call, estimate.prefix_cache_hit_share of the
    prompt's static prefix at price.cached_input (not when the prefix is under
    estimate.prefix_cache_min_tokens, or the model has no cached_input price). Both: cached, then batch.
    """
    est = config.raw["estimate"]
    share, min_tokens = est.get("prefix_cache_hit_share", 0.9), est.get("prefix_cache_min_tokens", 1024)
    for ln in lines:
        role, prompts = _role_and_prompts(ln.stage)
        model = config.models.get(ln.model)
        if model is None:
            ln.batch_usd = ln.cached_usd = ln.both_usd = ln.cost_usd
            continue
        price = model.price
        prefix = sum(static_prefix_tokens(p) for p in prompts) // max(1, len(prompts))
        cached_each = round(share * prefix) if prompts and prefix >= min_tokens and price.cached_input is not None else 0
        saved = min(ln.tokens_in, ln.calls * cached_each) * (price.input_per_mtok - (price.cached_input or 0)) / 1e6
        ln.cached_usd = ln.cost_usd - saved
        batch = role in BATCH_ROLES and config.endpoints[model.endpoint].batch
        factor = 1.0 - price.batch_discount if batch else 1.0
        ln.batch_usd, ln.both_usd = ln.cost_usd * factor, ln.cached_usd * factor


def _views_note(config: Config, lines: list[Line]) -> list[str]:
    est = config.raw["estimate"]
    roles = config.raw.get("llm", {}).get("batch", {}).get("roles") or []
    live_only: dict[str, float] = {}
    for ln in lines:
        model = config.models.get(ln.model)
        if model is not None and _role_and_prompts(ln.stage)[0] in BATCH_ROLES and not config.endpoints[model.endpoint].batch:
            live_only[model.endpoint] = live_only.get(model.endpoint, 0.0) + ln.cost_usd
    rows = [
        "live = full price; batch = judge, review and classify calls (single-turn) at each model's price.batch_discount "
        "(default 50%, OpenAI and Gemini Batch API) where the endpoint says batch: true; cached = "
        f"{est.get('prefix_cache_hit_share', 0.9):.0%} of each call's static prompt prefix (the rubric before the first "
        "variable) at price.cached_input (estimate.prefix_cache_hit_share; a prefix under "
        f"{est.get('prefix_cache_min_tokens', 1024)} tokens gets none: OpenAI caches from 1,024 tokens on); "
        "batch+cached = both, the cache discount assumed to hold inside a batch.",
        f"this config sends through the Batch API: {', '.join(roles) if roles else 'nothing'} (llm.batch.roles)",
    ]
    live_only = {ep: usd for ep, usd in live_only.items() if usd > 0}
    if live_only:
        rows.append("batchable calls on endpoints without batch: true (stay at live price): " + ", ".join(
            f"{ep} ${usd:,.2f}" for ep, usd in sorted(live_only.items(), key=lambda x: -x[1])))
    return rows


def format_estimate(lines: list[Line], config: Config | None = None) -> str:
    note = getattr(lines, "seeds_note", "")
    head = (f"{'stage':<34} {'model':<26} {'basis':<9} {'calls':>8} {'cached':>7} {'tokens_in':>11} {'tokens_out':>11} "
            f"{'cost_usd':>10} {'batch_usd':>10} {'cached_usd':>10} {'batch+cached':>12}")

    def views(x) -> str:
        b, c, bc = (x.cost_usd if v is None else v for v in (x.batch_usd, x.cached_usd, x.both_usd))
        return f" {b:>10.4f} {c:>10.4f} {bc:>12.4f}"

    rows = ([note] if note else []) + [head, "-" * len(head)]
    for ln in lines:
        rows.append(f"{ln.stage:<34} {ln.model:<26} {ln.basis:<9} {ln.calls:>8} {ln.cached:>7} "
                    f"{ln.tokens_in:>11} {ln.tokens_out:>11} {ln.cost_usd:>10.4f}" + views(ln))
    tot = Line("TOTAL", "", "", sum(x.calls for x in lines), sum(x.cached for x in lines),
               sum(x.tokens_in for x in lines), sum(x.tokens_out for x in lines), sum(x.cost_usd for x in lines))
    rows.append("-" * len(head))
    for name in ("batch_usd", "cached_usd", "both_usd"):
        setattr(tot, name, sum(ln.cost_usd if getattr(ln, name) is None else getattr(ln, name) for ln in lines))
    rows.append(f"{tot.stage:<34} {'':<26} {'':<9} {tot.calls:>8} {tot.cached:>7} {tot.tokens_in:>11} "
                f"{tot.tokens_out:>11} {tot.cost_usd:>10.4f}" + views(tot))
    rows.append("exact = requests built and checked against the cache (hits excluded); counted = calls counted "
                "from the stage's input file (cache not checked, first answers only); projected = inputs not "
                "produced yet, from the seed count and the paper's funnel ratios (config.estimate); PaSBench: from the item "
                "counts, N samples and estimate.pasbench_miss_share")
    if config is not None:
        rows += _views_note(config, lines)
    return "\n".join(rows)
