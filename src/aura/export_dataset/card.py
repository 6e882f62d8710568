"""The dataset card (``README.md``) of an export: YAML front matter that `datasets.load_dataset` reads (the
configs and their Parquet files, features, split sizes, licences), then the text: how to load it, each
config's columns, the sources and licences, the citations (in the text only: the card metadata has no
citation field), and the construction provenance of each config
(files with their stage, git revision and config hash; prompts with their sha256; model ids)."""
from __future__ import annotations

import json
from typing import Any

import yaml

from ..config import repo_path
from . import Release

CARD_FILE = "README.md"


def licenses(releases: list[Release]) -> list[str]:
    """Every distinct licence over the splits, in order of appearance."""
    out: list[str] = []
    for r in releases:
        for s in r.subsets:
            for sp in s.splits:
                if sp.license not in out:
                    out.append(sp.license)
    return out


def front_matter(releases: list[Release], pretty_name: str, features_yaml: dict[str, list],
                 sizes: dict[tuple[str, str], int]) -> dict[str, Any]:
    found = licenses(releases)
    subsets = [s for r in releases for s in r.subsets]
    return {
        "pretty_name": pretty_name,
        "license": found[0] if len(found) == 1 else found,
        "language": ["en"],
        "configs": [{"config_name": s.name,
                     "data_files": [{"split": sp.name, "path": f"{s.name}/{sp.name}.parquet"} for sp in s.splits]}
                    for s in subsets],
        "dataset_info": [{"config_name": s.name, "features": features_yaml[s.name],
                          "splits": [{"name": sp.name, "num_bytes": sizes[(s.name, sp.name)],
                                      "num_examples": len(sp.rows)} for sp in s.splits]}
                         for s in subsets],
    }


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return "" if v is None else str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows])


def render(releases: list[Release], *, pretty_name: str, run: dict[str, Any], features_yaml: dict[str, list],
           provenance: dict[str, dict], sizes: dict[tuple[str, str], int]) -> str:
    """The card's text. `run`: name, config hash, config file of the run; `provenance`: config -> what
    `sidecars.collect` found for it; `sizes`: (config, split) -> bytes of its table."""
    meta = yaml.safe_dump(front_matter(releases, pretty_name, features_yaml, sizes), sort_keys=False, allow_unicode=True)
    first = next((s.name for r in releases for s in r.subsets), "<config>")
    parts = [f"---\n{meta}---\n", f"# {pretty_name}\n",
             f"Exported by `python -m aura export-dataset` from the run `{run['name']}` (config `{run['configfile']}`, "
             f"config hash `{run['config_hash'][:12]}`). Every config is one benchmark's items; the files were "
             "read as the run produced them, no model was called.\n",
             "```python\nfrom datasets import load_dataset\n"
             f"ds = load_dataset(\"path/to/this/folder\", name=\"{first}\", split=\"test\")\n```\n",
             "`aura.export_dataset.parquet.read_split(folder, config, split)` reads a split as a list of dicts, "
             "the `*_json` columns decoded. `croissant.json` is the Croissant record of the same files.\n",
             "## Configs\n",
             _table(["config", "benchmark", "split", "rows", "licence", "read from"],
                    [[s.name, r.title, sp.name, len(sp.rows), sp.license, repo_path(sp.source)]
                     for r in releases for s in r.subsets for sp in s.splits]) + "\n"]
    for r in releases:
        for s in r.subsets:
            parts += [f"### Config `{s.name}`\n", s.description + "\n",
                      _table(["column", "type", "meaning"], [[f"`{c.name}`", c.type, c.description]
                                                             for c in s.columns]) + "\n"]
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
                            [[repo_path(f["file"]), f.get("stage") or "(no sidecar)", f.get("rows"),
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
