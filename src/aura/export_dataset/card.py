"""The dataset card (``README.md``) of an export: YAML front matter that `datasets.load_dataset` and the Hub
read (licence, language, pretty name, task categories, tags, size category computed from the row count,
annotation creators, source datasets, the configs and their Parquet files, features, split sizes), then the
text: a demo warning when the export is not the benchmark, how to load it, each config's columns, what the
data are for and not for, their limitations, biases and personal information (each family's CardText), how
they were collected, the sources and licences, the citations (in the text only: the card metadata has no
citation field), and the construction provenance of each config (files with their stage, git revision and
config hash; prompts with their sha256; model ids). No path of the machine that ran the export appears:
files are named as `aura.export_dataset.public_paths` names them, the config by its file name and hash."""
from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, Callable

import yaml

from . import CardText, Release

CARD_FILE = "README.md"
# Hugging Face's size categories: (rows below, label)
SIZES = ((10**3, "n<1K"), (10**4, "1K<n<10K"), (10**5, "10K<n<100K"), (10**6, "100K<n<1M"), (10**7, "1M<n<10M"),
         (10**8, "10M<n<100M"), (10**9, "100M<n<1B"), (10**10, "1B<n<10B"), (10**11, "10B<n<100B"),
         (10**12, "100B<n<1T"))
# The card's sections from the families' CardText: (heading, the text of one family's card)
SECTIONS = (("Uses", lambda c: c.uses), ("Out-of-scope use", lambda c: c.out_of_scope),
            ("Limitations", lambda c: c.limitations), ("Bias", lambda c: c.bias),
            ("Personal and sensitive information", lambda c: c.personal_information),
            ("Data collection", lambda c: c.collection))
# The CardText fields that go into the front matter under their own names: its tuples (task_categories, ...)
FRONT_MATTER_FIELDS = tuple(f.name for f in fields(CardText) if f.default == ())


def licenses(releases: list[Release]) -> list[str]:
    """Every distinct licence over the splits, in order of appearance."""
    out: list[str] = []
    for r in releases:
        for s in r.subsets:
            for sp in s.splits:
                if sp.license not in out:
                    out.append(sp.license)
    return out


def size_category(rows: int) -> str:
    """Hugging Face's size category of a dataset of `rows` rows."""
    return next((label for below, label in SIZES if rows < below), "n>1T")


def card_values(releases: list[Release], pick: Callable[[CardText], tuple[str, ...]]) -> list[str]:
    """Every distinct value of a CardText tuple (`pick` reads it) over the releases, in order of appearance."""
    out: list[str] = []
    for r in releases:
        for v in pick(r.card) if r.card else ():
            if v not in out:
                out.append(v)
    return out


def front_matter(releases: list[Release], pretty_name: str, features_yaml: dict[str, list],
                 sizes: dict[tuple[str, str], int]) -> dict[str, Any]:
    found = licenses(releases)
    subsets = [s for r in releases for s in r.subsets]
    rows = sum(len(sp.rows) for s in subsets for sp in s.splits)
    meta = {
        "pretty_name": pretty_name,
        "license": found[0] if len(found) == 1 else found,
        "language": ["en"],
        "multilinguality": ["monolingual"],
        "size_categories": [size_category(rows)],
    }
    for name in FRONT_MATTER_FIELDS:
        values = card_values(releases, lambda c, name=name: getattr(c, name))
        if values:
            meta[name] = values
    return {
        **meta,
        "configs": [{"config_name": s.name,
                     "data_files": [{"split": sp.name, "path": f"{s.name}/{sp.name}.parquet"} for sp in s.splits]}
                    for s in subsets],
        "dataset_info": [{"config_name": s.name, "features": features_yaml[s.name],
                          "splits": [{"name": sp.name, "num_bytes": sizes[(s.name, sp.name)],
                                      "num_examples": len(sp.rows)} for sp in s.splits]}
                         for s in subsets],
    }


def short_title(release: Release) -> str:
    """A release's title before its colon (its benchmark's short name)."""
    return release.title.split(":")[0].strip()


def sections(releases: list[Release]) -> list[str]:
    """The card's Uses ... Data collection sections, each family's text under its name (a family that gives
    no CardText is named as such)."""
    parts = []
    for heading, pick in SECTIONS:
        parts.append(f"## {heading}\n")
        for r in releases:
            text = pick(r.card).strip() if r.card else "The family states nothing here."
            parts.append(f"**{short_title(r)}.** {text}\n" if len(releases) > 1 else text + "\n")
    return parts


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return "" if v is None else str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows])


def render(releases: list[Release], *, pretty_name: str, run: dict[str, Any], features_yaml: dict[str, list],
           provenance: dict[str, dict], sizes: dict[tuple[str, str], int], banner: str = "",
           public: Callable[[str], str] = str) -> str:
    """The card's text. `run`: name, config hash, config file name and Hub id (or None) of the run;
    `provenance`: config -> what `sidecars.collect` found for it, its paths already public; `sizes`: (config,
    split) -> bytes of its table; `banner`: the demo warning, the text's first line ("" for the benchmark);
    `public`: names a produced file without the machine's folders."""
    meta = yaml.safe_dump(front_matter(releases, pretty_name, features_yaml, sizes), sort_keys=False, allow_unicode=True)
    first = next((s.name for r in releases for s in r.subsets), "<config>")
    where = run.get("hub_id") or "path/to/this/folder"
    parts = [f"---\n{meta}---\n", f"# {pretty_name}\n", *([banner] if banner else []),
             f"Exported by `python -m aura export-dataset` from the run `{run['name']}` (config `{run['configfile']}`, "
             f"config hash `{run['config_hash'][:12]}`). Every config is one benchmark's items; the files were "
             "read as the run produced them, no model was called.\n",
             "```python\nfrom datasets import load_dataset\n"
             f"ds = load_dataset(\"{where}\", name=\"{first}\", split=\"test\")\n```\n",
             "`aura.export_dataset.parquet.read_split(folder, config, split)` reads a split as a list of dicts, "
             "the `*_json` columns decoded. `croissant.json` is the Croissant record of the same files.\n",
             "## Configs\n",
             _table(["config", "benchmark", "split", "rows", "licence", "read from"],
                    [[s.name, r.title, sp.name, len(sp.rows), sp.license, public(sp.source)]
                     for r in releases for s in r.subsets for sp in s.splits]) + "\n"]
    for r in releases:
        for s in r.subsets:
            parts += [f"### Config `{s.name}`\n", s.description + "\n",
                      _table(["column", "type", "meaning"], [[f"`{c.name}`", c.type, c.description]
                                                             for c in s.columns]) + "\n"]
    parts += sections(releases)
    parts.append("## Sources and licences\n")
    for r in releases:
        parts.append(f"### {r.title}\n")
        for src in r.sources:
            parts.append("- " + "; ".join(f"{k}: {_text(v)}" for k, v in src.items() if v not in (None, "", {}, [])))
        parts += [f"- note: {n}" for n in r.notes]
        parts.append("")
    parts.append("## Citation\n")
    parts.append("The citations live here, in the card's text: a Hugging Face dataset card's metadata has no "
                 "citation field, so the front matter carries none (`croissant.json` has them as `citeAs`).\n")
    parts.append("```bibtex\n" + "\n\n".join(c.strip() for r in releases for c in r.citations) + "\n```\n")
    parts.append("## Construction provenance\n")
    parts.append("Per config: the produced files it was read from, with their sidecars' stage, git revision and "
                 "config hash; every prompt (file and sha256) and model (id and endpoint) those stages used. The "
                 "JSON block holds the same, for programs.\n")
    for name, prov in provenance.items():
        parts.append(f"### `{name}`\n")
        parts.append(_table(["file", "stage", "rows", "git revision", "config hash"],
                            [[f["file"], f.get("stage") or "(no sidecar)", f.get("rows"),
                              (f.get("git_revision") or "")[:12] + (" dirty" if f.get("git_dirty") else ""),
                              (f.get("config_hash") or "")[:12]] for f in prov["files"]]) + "\n")
        if prov["prompts"]:
            parts.append(_table(["prompt", "file", "sha256"], [[k, v["path"], v["sha256"]]
                                                               for k, v in prov["prompts"].items()]) + "\n")
        if prov["models"]:
            parts.append(_table(["model", "model id", "endpoint"], [[k, v["model_id"], v["endpoint"]]
                                                                    for k, v in prov["models"].items()]) + "\n")
    parts.append("```json\n" + json.dumps(provenance, indent=1, ensure_ascii=False, sort_keys=True) + "\n```\n")
    return "\n".join(parts)
