"""The person's side of case generation: the review file that keeps or rejects each draft (stage
``lpsbench-review-cases``) and the feedback file a next iteration reads (generate.py's docstring gives both
formats)."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from aura.config import UserError
from aura.io import person_verdicts, read_person_table
from aura.pipeline.context import StageContext
from aura.provenance import provenance, write_provenance


class ReviewError(UserError):
    """A problem in the person-written review or feedback file (one line: file and row)."""


def read_table(path: str | Path, columns: list[str], what: str) -> list[tuple[str, dict]]:
    """(where, row) for every row of a CSV or JSONL file a person writes; `where` names file and row."""
    return read_person_table(path, columns, what, ReviewError)


def _text(row: dict, field: str) -> str:
    value = row.get(field)
    return value.strip() if isinstance(value, str) else ""


def read_feedback(path: str | Path, planned: set[str]) -> dict[str, dict]:
    """case_id -> {"lines": its feedback in file order, "previous": the rejected draft of its last row that carries
    one, else None} (rows {case_id, feedback[, previous]}; ids must be planned slots)."""
    out: dict[str, dict] = {}
    for where, row in read_table(path, ["case_id", "feedback"], "feedback"):
        cid, text = _text(row, "case_id"), _text(row, "feedback")
        if not cid or not text:
            raise ReviewError(f"{where}: case_id and feedback must both be non-empty")
        if cid not in planned:
            raise ReviewError(f"{where}: case_id {cid!r} is not a slot of this generation "
                              f"(planned: {', '.join(sorted(planned))})")
        prev = row.get("previous")
        if prev is not None and not (isinstance(prev, dict) and isinstance(prev.get("instruction"), str)):
            raise ReviewError(f"{where}: previous must be the rejected draft (an object with its instruction)")
        got = out.setdefault(cid, {"lines": [], "previous": None})
        got["lines"].append(text)
        got["previous"] = prev or got["previous"]
    return out


def read_review(path: str | Path, drafts: dict[str, dict]) -> dict[str, dict]:
    """case_id -> {verdict, feedback, where}; every problem is a ReviewError naming the file and row."""
    out: dict[str, dict] = {}
    for where, cid, verdict, row in person_verdicts(path, "case_id", drafts, "a generated draft", ["feedback"],
                                                    "review", ReviewError):
        feedback = _text(row, "feedback")
        if verdict == "reject" and not feedback:
            raise ReviewError(f"{where}: a reject needs feedback (the next iteration's prompts get it)")
        draft = drafts[cid]
        if verdict == "accept" and draft["status"] != "ok":
            raise ReviewError(f"{where}: {cid} has no case to accept (draft {draft['status']} at {draft['step']}: "
                              f"{draft['reason']})")
        if _text(row, "digest") and _text(row, "digest") != draft["digest"]:
            raise ReviewError(f"{where}: digest {_text(row, 'digest')!r} does not match draft {cid} "
                              f"({draft['digest']}): the review is for an earlier draft; review it again")
        out[cid] = {"verdict": verdict, "feedback": feedback or None, "where": where}
    return out



# stage: lpsbench-review-cases ------------------------------------------------------------------------
def write_cases(folder: Path, drafts: list[dict]) -> None:
    """Write the cases as <folder>/<domain>/<RISK>_<n>.json (a case's mock-tool module as <folder>/tools/<MCP.file>,
    the folder then serves as the upstream back-end's checkout): built in a sibling folder, then renamed over
    the old one, so a stopped job never leaves half a folder."""
    tmp, old = folder.with_name(f".{folder.name}.tmp"), folder.with_name(f".{folder.name}.old")
    for leftover in (tmp, old):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp.mkdir(parents=True)
    for d in drafts:
        path = tmp / d["domain"] / f"{d['risk']}_{d['number']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(d["case"], indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if d.get("module"):  # as upstream's checkout keeps them: tools/<MCP.file>, served by the upstream back-end
            (tmp / "tools").mkdir(exist_ok=True)
            (tmp / "tools" / d["case"]["MCP"]["file"]).write_text(d["module"], encoding="utf-8")
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


REVIEW_FILE = "lpsbench_review.csv"  # the file the stop message suggests


def missing_review(drafts: list[dict], where) -> str:
    """The one line that stops the review stage when no review file is configured: which file to write, how."""
    ok = [d for d in drafts if d["status"] == "ok"]
    example = f"{ok[0]['case_id']},accept,,{ok[0]['digest']}" if ok else "<case_id>,reject,<what to change>,"
    return (f"lpsbench-review-cases: {len(ok)} generated draft(s) in {where} wait for a person's review, and no case "
            f"reaches the episodes without one: write {REVIEW_FILE} (CSV header case_id,verdict,feedback,digest; one "
            f"row per draft: verdict accept or reject, feedback required for a reject, digest from the draft, e.g. "
            f"{example}; or JSONL objects with those keys) and set lpsbench.generate.review: {REVIEW_FILE}")


def run_review(ctx: StageContext) -> None:
    from .generate_settings import settings

    cfg = settings(ctx.config.raw, generating=False)
    drafts = ctx.read("drafts")
    by_id = {d["case_id"]: d for d in drafts}
    if not cfg["review"]:
        raise ReviewError(missing_review(drafts, ctx.inputs["drafts"]))
    review = read_review(cfg["review"], by_id)
    kept, reviews, feedback, tally = [], [], [], Counter()
    for d in drafts:
        r = review.get(d["case_id"])
        if d["status"] != "ok":
            keep, decided = False, "automatic_check" if d["status"] == "rejected" else "generation"
            reason = f"{d['status']} at {d['step']}: {d['reason'] or 'no detail'}"
        elif r is None:
            keep, decided, reason = False, "not_reviewed", f"no row in {cfg['review']}"
        else:
            keep, decided = r["verdict"] == "accept", "review"
            reason = None if keep else f"review reject: {r['feedback']}"
        ident = {k: d[k] for k in ("case_id", "domain", "risk", "number", "digest")}
        reviews.append({**ident, "draft_status": d["status"], "verdict": r["verdict"] if r else None,
                        "feedback": r["feedback"] if r else None, "decision": "accept" if keep else "reject",
                        "decided_by": decided, "reason": reason})
        tally[f"{'accept' if keep else 'reject'}:{decided}"] += 1
        if keep:
            kept.append(d)
        if r and r["verdict"] == "reject":  # the rejected draft goes with its feedback (upstream: previous_case)
            previous = {k: d[k] for k in ("scenario", "instruction", "tool_specs", "criterion")}
            previous.update({"module": d["module"]} if d.get("module") else {})
            feedback.append({**ident, "feedback": r["feedback"], "previous": previous})
    folder = Path(ctx.outputs["cases"])
    write_cases(folder, kept)
    review_file = str(cfg["review"])
    write_provenance(folder, provenance(ctx.stage, ctx.config, ctx.prompts_used, ctx.models_used,
                                        inputs=[str(p) for p in ctx.inputs.values()],
                                        extra={"cases": len(kept), "review": review_file}))
    ctx.write("reviews", reviews, decisions=dict(sorted(tally.items())), review=review_file)
    ctx.write("feedback", feedback)
