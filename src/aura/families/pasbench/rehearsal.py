"""PaSBench's planted truth for `aura rehearse` (aura.simulator.plant): what its simulated models answer.

What it plants (from reference/*.csv, as ``aura.stats.reproduction.load_folder`` reads it; deviations through
``Plan.rate`` with the row's own column):

- proactive detection per model and set (Figures 3-4, ``avg_of_n``): each (item, sample) answer of an evaluated
  model names the risk with the model x set's rate. An item first draws its class from ``Plan.draw(model, set,
  item)``: *always* detected (a share w = 1 - ``missed_of_n``, or a ``worst_of_n`` point / a deviated bound),
  *never* (and *rare*, per-sample rate 0.04) from Figure 7's ``first_best`` at its K's, else *common*: each sample
  then draws ``Plan.draw(model, set, item, sample) < q``, q chosen so the mean over items is the reported rate.
  Without a row the other set's rate stands in, else a rate drawn from the seed in [10, 70]% (the paper's spread,
  §4.1); the upper bounds on Worst-of-N hold then (q^16 is tiny).
- the judge (risk_judge, proactive and reactive answers): the evaluated answer carries ``mark("pas", hit|miss)``
  in its ``Answer:`` line (what the judge reads) and the judge returns ``detected`` = the mark (no mark: false).
  A miss answers "none" or, drawn half the time, a generic warning (a proposal for propose-then-verify).
- the knowledge probe (Figure 5): per distinct statement, "A. True" with a correct explanation at the model's
  ``knowledge_accuracy`` (models without a row: midway between the "all models" lower bound and 100%); a miss
  is an A with a wrong explanation, B or C (a third each); the knowledge judge reads the mark back.
- the reactive probe (Table 2): a failed sample asked again is detected at the model x set's reactive rate
  (``reactive_detected_samples`` / n; others: the middle of §4.2.2's 68-93% range), judged as above.
- propose-then-verify: a proposal is verified exactly when it carries a hit (not in the reference).
- construction (off in the paper config): a profile, a log of the schema's minimum entries at the middle of the
  prompt's word range and free of every word the automatic checks look for, an accepting review and image check,
  one or two neutral image prompts: answers the family's checks accept, nothing planted; the images endpoint's
  frame prompts (ending as ``construct.image_text`` ends them) get the server's default PNGs (answer ``{}``).

How requests are recognised: by the family's own prompt texts (``PROMPTS`` of the manifest, in the version in
use): the first line of each prompt's system text (the user text's for the knowledge probe), cut at its first
placeholder, found in the request's text. Text or image set: whether the request carries image_url parts. An
item is the hash of the last user turn's content (log or images); a sample is the body's ``seed`` (seed + s in
every evaluated model of the paper config), else the count of identical bodies seen so far.

Not planted (``plantable``): correlations and their p-values (they follow from the planted rates), Table 1 and the
data's typical sizes (facts of the items), the model counts (the roster), the manual "nuanced" knowledge reading,
ranges and averages over models the paper does not name, Robustness rows that name no set, and every row of a
model the config does not evaluate (or that has no vision, for the image set) or of a probe it switches off.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

import pandas as pd

from aura.prompts import get_prompt
from aura.simulator.plant import Plan, Request, mark, read_mark
from aura.stats.reproduction import load_folder

from . import PROMPTS, evaluated, probe_on, samples_of, section
from .reproduction import REACTIVE_MODELS, REFERENCE, _modality

FAMILY = "pasbench"
KEY = "pas"
RARE = 0.04  # the per-sample rate of the "rare" items that Figure 7's two K's call for
DEFAULT_SPREAD = (10.0, 70.0)  # a model without a reported rate: drawn in the paper's spread of rates (§4.1)
REACTIVE_DEFAULT = (68.0 + 93.0) / 2  # the middle of §4.2.2's range of the reactive setting
SETS = ("text", "image")
IMAGE_SUFFIX = "Photorealistic, no text in the image."  # how construct.image_text ends every frame's prompt


def _marker(name: str) -> str:
    """The first line of the prompt's system text (else its user text), up to its first placeholder."""
    p = get_prompt(name)
    return (p.system.strip() or p.user.strip()).split("\n")[0].split("{{")[0].strip()


def _has_image(body: dict) -> bool:
    return any(isinstance(m, dict) and isinstance(m.get("content"), list)
               and any(isinstance(x, dict) and x.get("type") == "image_url" for x in m["content"])
               for m in body.get("messages") or [])


def _item_key(body: dict) -> str:
    """The last user turn's content (text and image parts), hashed: the item (with its knowledge, if shown)."""
    user = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    content = user[-1].get("content") if user else None
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:24]


def _percent(row) -> float:
    """A rate row's value in percent (a count of n as its share)."""
    if row["unit"] == "count":
        return 100.0 * float(row["value"]) / float(row["n"])
    return float(row["value"]) * (100.0 if row["unit"] == "fraction" else 1.0)


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value)) or str(value) in ("", "<NA>", "nan")


def _model(row) -> str:
    return "" if _blank(row["model"]) else str(row["model"])


def _set(row) -> str | None:
    """The set a row names (its column, else its note), as the reproduction stage reads it."""
    return _modality(row["column"], "" if _blank(row["note"]) else row["note"])


class PasbenchPlanter:
    """Answers every PaSBench request (module docstring); ``answer`` is None for any other family's."""

    def __init__(self, config, plan: Plan, reference=REFERENCE) -> None:
        self.config, self.plan = config, plan
        self.rows = load_folder(reference)[0].to_dict("records")
        self.cache: dict[tuple, object] = {}  # rates and classes: fixed for one plan
        self.markers = {name: _marker(name) for name in PROMPTS}
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    # planted rates (probabilities) -----------------------------------------------------------------
    def _rows(self, measures: str, model: str, modality: str | None = None) -> list:
        return [r for r in self.rows if r["measures"] == measures and _model(r) == model
                and (modality is None or _set(r) == modality)]

    def _rate(self, model: str, row) -> float:
        return self.plan.rate(FAMILY, model, row["column"], _percent(row))

    def detection(self, model: str, modality: str) -> float:
        """The planted Average-of-N of a model on one set."""
        rows = self._rows("avg_of_n", model, modality) or [
            r for other in SETS if other != modality for r in self._rows("avg_of_n", model, other)]
        if rows:
            return self._rate(model, rows[0])
        lo, hi = DEFAULT_SPREAD
        return (lo + (hi - lo) * self.plan.draw(FAMILY, "default-rate", model)) / 100.0

    def classes(self, model: str, modality: str) -> dict[str, tuple[float, float]]:
        """Item classes of a model x set: name -> (share of items, per-sample detection rate)."""
        if ("classes", model, modality) not in self.cache:
            self.cache["classes", model, modality] = self._classes(model, modality)
        return self.cache["classes", model, modality]

    def _classes(self, model: str, modality: str) -> dict[str, tuple[float, float]]:
        p = self.detection(model, modality)
        missed = self._rows("missed_of_n", model, modality)
        points = [r for r in self._rows("worst_of_n", model, modality) if r["kind"] != "bound"
                  or self.plan.shift(FAMILY, model, r["column"])]
        w = 1 - self._rate(model, missed[0]) if missed else (self._rate(model, points[0]) if points else 0.0)
        best = sorted((int(str(r["column"]).rsplit("=", 1)[1]), self._rate(model, r))
                      for r in self._rows("first_best", model) if modality == "image")
        a, z = 0.0, (1 - best[-1][1] if best else 0.0)
        if len(best) > 1:  # two K's: a rare class closes the gap between them
            (k1, b1), (k2, b2) = best[0], best[-1]
            a = max(0.0, (b2 - b1) / ((1 - RARE) ** k1 - (1 - RARE) ** k2))
            z = max(0.0, 1 - b2 - a * (1 - RARE) ** k2)
        c = max(0.0, 1 - w - z - a)
        q = min(1.0, max(0.0, (p - w - a * RARE) / c)) if c > 0 else 0.0
        return {"always": (w, 1.0), "never": (z, 0.0), "rare": (a, RARE), "common": (c, q)}

    def knowledge(self, model: str) -> float:
        own = self._rows("knowledge_accuracy", model)
        if own:
            return self._rate(model, own[0])
        bound = self._rows("knowledge_accuracy", "")
        return ((_percent(bound[0]) + 100.0) / 2 if bound else 90.0) / 100.0

    def reactive(self, model: str, modality: str) -> float:
        own = self._rows("reactive_detected_samples", model, modality)
        return self._rate(model, own[0]) if own else REACTIVE_DEFAULT / 100.0

    # draws ------------------------------------------------------------------------------------------
    def _sample(self, body: dict) -> str:
        if body.get("seed") is not None:
            return f"seed={body['seed']}"
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self.lock:
            self.seen[digest] = self.seen.get(digest, 0) + 1
            return f"repeat={self.seen[digest]}"

    def detects(self, model: str, modality: str, item: str, sample: str) -> bool:
        """Does this proactive (item, sample) answer name the risk? Its item's class, then the sample's draw."""
        u, rate = self.plan.draw(FAMILY, model, modality, item), 0.0
        for share, rate in self.classes(model, modality).values():
            if u < share:
                break
            u -= share
        return self.plan.draw(FAMILY, model, modality, item, sample) < rate

    # answers ----------------------------------------------------------------------------------------
    def answer(self, request: Request) -> dict | None:
        text = request.text
        if "messages" not in request.body:  # the images endpoint (construction): its default PNGs
            return {} if "prompt" in request.body and text.endswith(IMAGE_SUFFIX) else None
        name = next((n for n, m in self.markers.items() if m and m in text), None)
        if name is None:
            return None
        kind = name.rsplit("_", 1)[0] if name.endswith(("_text", "_image")) else name
        modality = "image" if _has_image(request.body) else "text"
        hit, model, item = read_mark(text, KEY) == "hit", request.model, _item_key(request.body)
        sample = self._sample(request.body) if kind in ("proactive", "reactive") else ""
        if kind == "proactive":
            # a mark of this model's own answer, in the alert the judge reads: two models' (and two samples')
            # alerts differ, as real ones do, so the judge asked about each pays for each
            own = mark("pas.answer", hashlib.sha256(f"{model}:{item}:{sample}".encode()).hexdigest()[:8])
            if self.detects(model, modality, item, sample):
                alert = (f"Please stop: what you are doing now can hurt you, take care of it first. {own} "
                         f"{mark(KEY, 'hit')}")
            elif self.plan.draw(FAMILY, model, "false-alarm", item, sample) < 0.5:
                alert = f"Stay safe and take care today. {own} {mark(KEY, 'miss')}"
            else:
                alert = "none"
            return {"content": f"Thought: I look at what the person does and what may follow.\nAnswer: {alert}"}
        if kind == "reactive":
            if self.plan.draw(FAMILY, model, "reactive", item, sample) < self.reactive(model, modality):
                return {"content": "Thought: One behaviour goes against the knowledge.\nWarn: yes\n"
                                   f"Answer: The last behaviour violates it and can cause harm. {mark(KEY, 'hit')}"}
            return {"content": "Thought: Nothing seems to go against the knowledge.\nWarn: no\nAnswer: none"}
        if kind == "risk_judge":
            return {"json": {"rationale": "The reminder names the risk." if hit else "The reminder misses the risk.",
                             "detected": hit}}
        if kind == "verify":
            return {"json": {"rationale": "Confirmed." if hit else "Not a real danger here.", "verified": hit}}
        if kind == "knowledge_probe":
            if self.plan.draw(FAMILY, model, "knowledge", item) < self.knowledge(model):
                return {"content": f"A. True (Correct)\nIt prevents the harm the statement names. {mark(KEY, 'hit')}"}
            miss = self.plan.draw(FAMILY, model, "knowledge-miss", item)
            if miss < 1 / 3:
                return {"content": f"A. True (Correct)\nIt is simply a common rule. {mark(KEY, 'miss')}"}
            return {"content": "B. False (Incorrect)\nIt depends on the situation." if miss < 2 / 3
                    else "C. Not sure\nI cannot tell without more context."}
        if kind == "knowledge_judge":
            return {"json": {"rationale": "A valid reason." if hit else "Not a valid reason.", "correct": hit}}
        return {"json": _construction(kind, request)}


NEUTRAL = ("The room is bright and tidy, with a wooden table, two chairs, a shelf of books and a plant near the "
           "window; a clock hangs on the wall and the floor is clean.",
           "The person walks across the room at an easy pace, looks around for a moment, picks up a cup from the "
           "table, drinks from it and then puts it back in its place.")  # no word the log checks look for
WORDS = " ".join(NEUTRAL).split()
PLACES = ("Kitchen", "Living room", "Hallway", "Garden", "Garage", "Bedroom", "Balcony", "Study")


def _neutral(size: int, at: int) -> str:
    """`size` neutral words from word `at` on (cycling), as a sentence."""
    return " ".join(WORDS[(at + i) % len(WORDS)] for i in range(size)) + "."


def _construction(kind: str, request: Request) -> dict:
    """A valid answer of a construction stage (nothing planted): what its schema and automatic checks accept."""
    schema = request.schema or {}
    if kind == "construct_profile":
        return {"occupation": "school teacher", "hobbies": ["gardening", "cooking"]}
    if kind == "construct_review":
        return {"suggests_risk": True, "realistic": True, "observable": True, "before_incident": True,
                "rationale": "All four criteria hold.", "verdict": "accept"}
    if kind == "construct_image_check":
        return {"consistent": True, "realistic": True, "conveys": True, "rationale": "A good frame.",
                "verdict": "accept"}
    if kind == "construct_image_prompts":
        n = min(2, int(schema.get("properties", {}).get("images", {}).get("maxItems", 2)))
        return {"scene": "A person at home in a bright kitchen.",
                "images": [f"The person stands at the counter, frame {k}." for k in range(1, n + 1)]}
    from .construct import assemble_log  # the log as the stage assembles it, to count its words

    n = int(schema.get("properties", {}).get("entries", {}).get("minItems", 4))
    found = re.search(r"(\d+) to (\d+) words", request.text)  # the prompt's word range (construct_log)
    middle = (int(found[1]) + int(found[2])) // 2 if found else 488

    def log(size: int) -> list[dict]:  # n entries, each field `size` neutral words after its own opening
        return [{"time": f"{8 + k:02d}:{15 * (k % 4):02d}", "location": PLACES[k % len(PLACES)],
                 "environment": f"{PLACES[k % len(PLACES)]}, moment {k + 1}: {_neutral(size, 0)}",
                 "behaviour": f"At moment {k + 1} the person is there. {_neutral(size, 30)}"} for k in range(n)]
    size = 1  # grown until the log reaches the middle of the prompt's word range
    while len(assemble_log(log(size)).split()) < middle and size < 100:
        size += 1
    return {"entries": log(size)}


def planter(config, plan: Plan) -> PasbenchPlanter:
    """The family's planter factory (Family.rehearsal)."""
    return PasbenchPlanter(config, plan)


# which reference rows are planted --------------------------------------------------------------------
DATA_FACTS = {"items", "knowledge_points", "length_max", "length_mean", "length_min", "n_images", "log_entries"}
REASONS = {"models": "the roster: which models the config runs, not what they answer",
           "knowledge_accuracy_nuanced": "a manual re-reading of B/C answers: no reproduced counterpart"}
PER_MODEL = ("avg_of_n", "worst_of_n", "missed_of_n", "first_best", "knowledge_accuracy", "reactive_detected_samples")
PROBE = {"knowledge_accuracy": "knowledge_probe", "reactive_detected_samples": "reactive_probe",
         "reactive_sample_rate": "reactive_probe"}


def _unplanted_model(raw: dict, model: str, modality: str | None) -> str | None:
    spec = (raw.get("models") or {}).get(model) or {}
    if model not in evaluated(raw):
        return f"model not evaluated: {spec.get('unavailable') or 'not in pasbench.evaluated'}"
    if modality == "image" and not spec.get("vision"):
        return "model has no vision: its image items are never sent"
    return None


def _reason(row, raw: dict) -> str | None:
    m, model = row["measures"], "" if _blank(row["model"]) else str(row["model"])
    if m.startswith("pearson_"):
        return "a correlation: it follows from the planted rates across models and items, not planted itself"
    if m in DATA_FACTS or row["table"] == "Table 1":
        return "a fact of the items (the data), not of the models' answers"
    if m in REASONS:
        return REASONS[m]
    if m in PROBE and not probe_on(raw, PROBE[m]):
        return f"pasbench.{PROBE[m]} is off"
    if m == "reactive_sample_rate":  # the range over Table 2's cells
        gone = [x for x in REACTIVE_MODELS for s in SETS if _unplanted_model(raw, x, s)]
        return f"a range over Table 2's models: {sorted(set(gone))} not run on both sets" if gone else None
    if m == "knowledge_accuracy" and not model:  # a lower bound over every model: each planted at or above it
        return None if evaluated(raw) else "no model evaluated"
    if m not in PER_MODEL:
        return "no model answer decides it"
    if not model:
        return "a range or average over models the paper does not name"
    modality = "image" if m == "first_best" else (_set(row) if m != "knowledge_accuracy" else None)
    if m != "knowledge_accuracy" and modality is None:
        return "the paper does not say which set"
    if why := _unplanted_model(raw, model, modality):
        return why
    if m == "first_best":
        k, n = int(str(row["column"]).rsplit("=", 1)[1]), samples_of(raw, model, "image")
        return None if n >= k else f"the config runs {n} image samples of {model}, fewer than K = {k}"
    return None


def plantable(reference, config) -> list[str | None]:
    """Per row of the reference frame (``load_folder``'s rows; a folder is loaded): None when the planter plants
    it under this config, else why not."""
    ref = load_folder(reference)[0] if isinstance(reference, (str, Path)) else reference
    raw = getattr(config, "raw", config)
    if not section(raw):
        return ["pasbench is not configured"] * len(ref)
    return [_reason(row, raw) for _, row in ref.iterrows()]
