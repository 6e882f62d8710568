"""The annotation app: Starlette routes over a validation sample and the label store.

- `/` login by name (a cookie, no password; the server binds loopback only unless a token is set:
  `aura.web.serve`), then `/item/<n>`: the unit's scenario, the target thought or action (and for safety
  the reference risk rationale the safety judge also sees), the label options with their definitions and
  the full rubric, this annotator's own label if given, and progress. Digits pick a label, n / p move on.
  A label is POSTed to `/api/label` the moment it is picked (nothing waits for a "submit").
- `/adjudicate`: the units whose annotators (two or more) have no strict majority, with the annotators'
  labels, where picking a label writes the unit's `reference` row (`/api/reference`); open to the names in
  `adjudicators` only when that list is given (`--adjudicators`), so annotators need not see each other's labels.

Never shown: the judges' labels, the panel's label or agreement stratum (they are strata in the sample
file, not sent to the browser), the evaluated model's name, another annotator's label outside
adjudication. Nor can they be inferred: the sample is drawn cell by cell (panel label, agreement), so the
app presents it in a shuffled order (`presentation`, seeded by the sample's bytes: the same for every
annotator and restart), and the browser names a unit only by its index and an opaque token
(`unit_token`, an HMAC of the unit under the sample's digest) that also catches a redrawn sample.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import random
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import quote, unquote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from aura.config import UserError

from ..evaluate.schemas import LABELS
from ..stats.human_validation import REFERENCE, strict_majority
from .rubric import TARGET, rubrics
from .store import LabelStore, valid_annotator

HERE = Path(__file__).parent
COOKIE = "aura_annotator"
# What of a sample row reaches the browser: the annotator's view of the unit, nothing else.
SHOWN = ("axis", "profile", "scenario", "target", "rationale")


class SampleError(UserError):
    pass


def read_sample(path: Path) -> list[dict]:
    units = []
    if not Path(path).is_file():
        raise SampleError(f"{path}: no validation sample; draw it first (aura.evaluate.validation_models, then "
                          f"`snakemake {path}`) or pass --sample")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SampleError(f"{path}: cannot read the validation sample ({exc})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SampleError(f"{path}: line {n}: not valid JSON ({exc.msg})") from None
        missing = [k for k in ("model", "item_id", "axis", "scenario", "target") if not isinstance(row, dict) or k not in row]
        if missing:
            raise SampleError(f"{path}: line {n}: missing {missing} (a validation-sample row)")
        if row["axis"] not in LABELS:
            raise SampleError(f"{path}: line {n}: unknown axis {row['axis']!r}")
        units.append(row)
    if not units:
        raise SampleError(f"{path}: the validation sample is empty")
    return units


def presentation(units: list[dict], digest: str) -> list[dict]:
    """The order annotators see the units in: shuffled with a seed taken from the sample's digest."""
    order = list(range(len(units)))
    random.Random(int(digest[:16], 16)).shuffle(order)
    return [units[j] for j in order]


def unit_token(digest: str, key: tuple[str, str, str]) -> str:
    """What the browser sends back to name a unit: opaque (no model name), and different for another sample."""
    return hmac.new(digest.encode(), "\x00".join(key).encode("utf-8"), hashlib.sha256).hexdigest()[:24]


def create_app(sample_path: str | Path, labels_path: str | Path, adjudicators: list[str] | None = None) -> Starlette:
    """`adjudicators`: the names allowed on /adjudicate (they see the annotators' labels); None = every name.
    `app.state.units` / `app.state.tokens`: the units in the order presented and their tokens."""
    digest = hashlib.sha256(Path(sample_path).read_bytes()).hexdigest() if Path(sample_path).is_file() else ""
    units = presentation(read_sample(Path(sample_path)), digest)
    store = LabelStore(labels_path)
    rubric = rubrics()
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    key_of = [(u["model"], u["item_id"], u["axis"]) for u in units]
    token_of = [unit_token(digest, k) for k in key_of]

    def labels_by_unit() -> dict[tuple, dict[str, str]]:
        out: dict[tuple, dict[str, str]] = defaultdict(dict)
        for r in store.rows():
            out[(r["model"], r["item_id"], r["axis"])][r["annotator"]] = r["label"]
        return out

    def view(i: int) -> dict:
        return {k: units[i].get(k) for k in SHOWN} | {"index": i, "unit": token_of[i],
                                                       "target_tag": TARGET[units[i]["axis"]]}

    def annotator(request: Request) -> str | None:
        name = unquote(request.cookies.get(COOKIE) or "")  # quoted: a cookie value is ASCII
        return name if name and valid_annotator(name) is None else None

    def may_adjudicate(who: str) -> bool:
        return adjudicators is None or who in adjudicators

    async def home(request: Request) -> Response:
        who = annotator(request)
        if who is None:
            return templates.TemplateResponse(request, "login.html", {"error": None, "name": ""})
        mine = labels_by_unit()
        first = next((i for i, k in enumerate(key_of) if who not in mine.get(k, {})), 0)
        return RedirectResponse(f"/item/{first}", status_code=303)

    async def login(request: Request) -> Response:
        name = str((await request.form()).get("name", "")).strip()
        why = valid_annotator(name)
        if why:
            return templates.TemplateResponse(request, "login.html", {"error": why, "name": name}, status_code=400)
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(COOKIE, quote(name, safe=""), httponly=True, samesite="strict")
        return resp

    async def logout(request: Request) -> Response:
        resp = RedirectResponse("/", status_code=303)
        resp.delete_cookie(COOKIE)
        return resp

    async def item(request: Request) -> Response:
        who = annotator(request)
        if who is None:
            return RedirectResponse("/", status_code=303)
        i = request.path_params["n"]
        if not 0 <= i < len(units):
            return Response("no such item", status_code=404)
        given = labels_by_unit()
        done = sum(who in given.get(k, {}) for k in key_of)
        ctx = {"who": who, "adjudicator": may_adjudicate(who), "u": view(i), "rubric": rubric[units[i]["axis"]], "mine": given.get(key_of[i], {}).get(who),
               "done": done, "total": len(units), "prev": i - 1 if i > 0 else None,
               "next": i + 1 if i + 1 < len(units) else None}
        return templates.TemplateResponse(request, "item.html", ctx)

    async def unit_of(request: Request) -> tuple[int, str] | Response:
        try:
            body = await request.json()
            i, label = int(body["index"]), str(body["label"])
        except (ValueError, KeyError, TypeError, OverflowError):
            return JSONResponse({"error": "expected JSON {index, unit, label}"}, status_code=400)
        if not 0 <= i < len(units) or body.get("unit") != token_of[i]:
            return JSONResponse({"error": "unknown unit (was the sample redrawn? reload the page)"}, status_code=409)
        if label not in LABELS[units[i]["axis"]]:
            return JSONResponse({"error": f"{label!r} is not a {units[i]['axis']} label"}, status_code=400)
        return i, label

    async def save_label(request: Request) -> Response:
        who = annotator(request)
        if who is None:
            return JSONResponse({"error": "log in first"}, status_code=401)
        got = await unit_of(request)
        if isinstance(got, Response):
            return got
        i, label = got
        status = await run_in_threadpool(store.save, *key_of[i], who, label)  # parallel saves meet at the file lock
        given = await run_in_threadpool(labels_by_unit)
        return JSONResponse({"saved": status, "label": label, "done": sum(who in given.get(k, {}) for k in key_of),
                             "total": len(units)})

    def needs_adjudication(given: dict[tuple, dict[str, str]]) -> list[int]:
        out = []
        for i, k in enumerate(key_of):
            labels = [lab for name, lab in given.get(k, {}).items() if name != REFERENCE]
            if len(labels) >= 2 and strict_majority(labels) is None:
                out.append(i)
        return out

    async def adjudicate(request: Request) -> Response:
        who = annotator(request)
        if who is None:
            return RedirectResponse("/", status_code=303)
        if not may_adjudicate(who):
            return Response(f"{who} is not an adjudicator (--adjudicators)", status_code=403)
        given = labels_by_unit()
        cases = []
        for i in needs_adjudication(given):
            labels = {n: lab for n, lab in given[key_of[i]].items() if n != REFERENCE}
            cases.append({"u": view(i), "rubric": rubric[units[i]["axis"]], "labels": sorted(labels.items()),
                          "counts": Counter(labels.values()), "reference": given[key_of[i]].get(REFERENCE)})
        return templates.TemplateResponse(request, "adjudicate.html", {"who": who, "adjudicator": True, "cases": cases})

    async def save_reference(request: Request) -> Response:
        who = annotator(request)
        if who is None:
            return JSONResponse({"error": "log in first"}, status_code=401)
        if not may_adjudicate(who):
            return JSONResponse({"error": f"{who} is not an adjudicator"}, status_code=403)
        got = await unit_of(request)
        if isinstance(got, Response):
            return got
        i, label = got
        return JSONResponse({"saved": await run_in_threadpool(store.save, *key_of[i], REFERENCE, label), "label": label})

    routes = [
        Route("/", home),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout),
        Route("/item/{n:int}", item),
        Route("/adjudicate", adjudicate),
        Route("/api/label", save_label, methods=["POST"]),
        Route("/api/reference", save_reference, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.units, app.state.tokens = units, token_of
    return app
