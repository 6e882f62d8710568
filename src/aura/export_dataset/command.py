"""`python -m aura export-dataset --configfile F --out DIR [--families a,b] [--hub-id O/N | --url U]`.

Each chosen family's ``export`` hook builds its Release from the run's produced files; the folder is
written beside DIR under a temporary name, its Croissant record checked with mlcroissant, and only then
put in place of DIR (an earlier export there is replaced; any other non-empty folder is refused). A
missing or bad file is one line naming it, and DIR is left as it was. An export of anything but a
paper-config run of the benchmark is titled a demo (`demo`). The Croissant record's url: --url, else the
Hub page of --hub-id, else the project's URL from the installed package's metadata (pyproject's
``[project.urls]``), else ``README.md`` (the card beside the record, wherever the folder is published).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", default="config/config.yaml", help="the run's config (its paths and families)")
    p.add_argument("--out", required=True, metavar="DIR", help="the export folder (Parquet, README.md, croissant.json)")
    p.add_argument("--families", help="comma-separated families to export (default: the config's families that "
                                      "export a benchmark)")
    p.add_argument("--url", help="where the dataset will be published (the Croissant record's url; default: the "
                                 "Hub page of --hub-id, else the project's URL)")
    p.add_argument("--hub-id", metavar="OWNER/NAME", help="the Hugging Face dataset id it will be pushed to (the "
                                                          "card's load_dataset line and the record's url)")


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
PACKAGE = "aura-eval"  # the distribution whose metadata names the project's URL


def project_url() -> str | None:
    """The project's URL from its installed metadata (``[project.urls]`` of pyproject.toml, first listed;
    else Home-page); None when it names none."""
    try:
        meta = importlib.metadata.metadata(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    urls = [u.split(",", 1)[1].strip() for u in meta.get_all("Project-URL") or [] if "," in u]
    return urls[0] if urls else meta.get("Home-page")


def dataset_url(url: str | None, hub_id: str | None) -> str:
    """The Croissant record's url (see the module's docstring); a malformed --hub-id is one line."""
    from . import ExportError

    if hub_id is not None and not HUB_ID.fullmatch(hub_id):
        raise ExportError(f"--hub-id: '{hub_id}' is not a Hugging Face dataset id (OWNER/NAME)")
    if url:
        return url
    if hub_id:
        return f"https://huggingface.co/datasets/{hub_id}"
    return project_url() or "README.md"


def chosen(raw: dict, names: str | None) -> list:
    """The families to export: those named (each must have an export hook), else the config's that have one."""
    from ..families import enabled, load
    from . import ExportError

    if names is None:
        return [f for f in enabled(raw) if f.export]
    families = [load(n.strip()) for n in names.split(",") if n.strip()]
    without = [f.name for f in families if not f.export]
    if without:
        raise ExportError(f"--families: family '{without[0]}' exports no dataset (its manifest has no export hook)")
    if not families:
        raise ExportError("--families: no family named")
    return families


def check_out(out: Path) -> None:
    from . import ExportError
    from .croissant import RECORD_FILE

    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / RECORD_FILE).is_file())):
        raise ExportError(f"{out}: exists and is not an earlier export (no {RECORD_FILE}); choose another --out")


def title(releases: list) -> str:
    """The export's name, from the families' releases: one family's own title, else their short names
    (each title's part before a colon)."""
    from .card import short_title

    if len(releases) == 1:
        return releases[0].title
    return "Benchmarks: " + ", ".join(short_title(r) for r in releases)


def build(config, releases: list, folder: Path, configfile: str, url: str, hub_id: str | None = None) -> None:
    """Write every split, the card and the Croissant record into `folder` (a fresh, empty folder)."""
    from . import ExportError
    from . import card, croissant, demo, parquet, sidecars
    from .public_paths import public_path

    subsets = [s for r in releases for s in r.subsets]
    names = [s.name for s in subsets]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ExportError(f"config name '{clash[0]}' is exported by two families")
    if not subsets:
        raise ExportError("nothing to export: no family handed over a config with rows")
    sizes = {(s.name, sp.name): parquet.write_split(folder, s.name, s.columns, sp) for s in subsets for sp in s.splits}

    def public(path):
        return public_path(path, config)

    provenance, written = {}, []
    for r in releases:
        for s in r.subsets:
            found = sidecars.collect([sp.source for sp in s.splits] + list(s.provenance_files))
            written += [f["created_at"] for f in found["files"] if f.get("created_at")]
            found["files"] = [{**f, "file": public(f["file"])} for f in found["files"]]
            found["prompts"] = {k: {**v, "path": public(v["path"])} for k, v in found["prompts"].items()}
            provenance[s.name] = {**found, "sources": list(r.sources)}
    features = {s.name: parquet.features_yaml(s.columns) for s in subsets}
    why = demo.reasons(configfile, releases)
    pretty = demo.title(title(releases), why)
    run = {"name": config.raw.get("name") or "unnamed", "configfile": Path(configfile).name,
           "config_hash": config.hash, "hub_id": hub_id}
    (folder / card.CARD_FILE).write_text(card.render(releases, pretty_name=pretty, run=run, features_yaml=features,
                                                     provenance=provenance, sizes=sizes, banner=demo.banner(why),
                                                     public=public), encoding="utf-8")
    record = croissant.build(
        folder, name=pretty, subsets=subsets, licenses=card.licenses(releases), url=url,
        description=(f"{demo.DEMO_PREFIX}{'; '.join(why)}. " if why else "")
        + "; ".join(f"{r.title} ({', '.join(s.name for s in r.subsets)})" for r in releases)
        + f". Exported from the run {run['name']} (config {run['configfile']}, hash {config.hash[:12]}); see README.md.",
        cite_as="\n\n".join(c.strip() for r in releases for c in r.citations),
        date_published=max(written)[:10] if written else time.strftime("%Y-%m-%d", time.gmtime()),
        version="1.0.0", keywords=card.card_values(releases, lambda c: c.tags), rai=croissant.rai_fields(releases))
    croissant.check(croissant.write(folder, record))


def swap(tmp: Path, out: Path) -> None:
    """Put the finished folder `tmp` at `out`; an earlier export there is moved aside first, then removed."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        out.rename(old / out.name)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    from ..config import UserError, load_config
    from ..families.base import load_target

    out = Path(args.out)
    tmp = None
    try:
        config = load_config(args.configfile)
        url = dataset_url(args.url, args.hub_id)
        families = chosen(config.raw, args.families)
        check_out(out)
        releases = [load_target(f.export)(config) for f in families]
        releases = [r for r in releases if r.subsets]
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's folder is private; the export is an ordinary folder
        build(config, releases, tmp, args.configfile, url, args.hub_id)
        swap(tmp, out)
    except (UserError, OSError) as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
        msg = f"{where}{exc.strerror}" if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"error: export-dataset: {' '.join(msg.split())}", file=sys.stderr)
        return 2
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    rows = ", ".join(f"{s.name} {sum(len(sp.rows) for sp in s.splits)}" for r in releases for s in r.subsets)
    print(f"export-dataset: {out} ({rows} rows; README.md, croissant.json)")
    return 0
