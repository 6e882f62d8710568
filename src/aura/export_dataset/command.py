"""`python -m aura export-dataset --configfile F --out DIR [--families a,b]`: write the export folder.

Each chosen family's ``export`` hook builds its Release from the run's produced files; the folder is
written beside DIR under a temporary name, its Croissant record checked with mlcroissant, and only then
put in place of DIR (an earlier export there is replaced; any other non-empty folder is refused). A
missing or bad file is one line naming it, and DIR is left as it was.
"""
from __future__ import annotations

import argparse
import os
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
    p.add_argument("--url", help="where the dataset will be published (the Croissant record's url)")


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
    if len(releases) == 1:
        return releases[0].title
    return "Benchmarks: " + ", ".join(r.title.split(":")[0].strip() for r in releases)


def build(config, releases: list, folder: Path, configfile: str, url: str | None) -> None:
    """Write every split, the card and the Croissant record into `folder` (a fresh, empty folder)."""
    from . import ExportError
    from . import card, croissant, parquet, sidecars

    subsets = [s for r in releases for s in r.subsets]
    names = [s.name for s in subsets]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ExportError(f"config name '{clash[0]}' is exported by two families")
    if not subsets:
        raise ExportError("nothing to export: no family handed over a config with rows")
    sizes = {(s.name, sp.name): parquet.write_split(folder, s.name, s.columns, sp) for s in subsets for sp in s.splits}
    provenance = {}
    for r in releases:
        for s in r.subsets:
            found = sidecars.collect([sp.source for sp in s.splits] + list(s.provenance_files))
            provenance[s.name] = {**found, "sources": list(r.sources)}
    features = {s.name: parquet.features_yaml(s.columns) for s in subsets}
    written = [f["created_at"] for p in provenance.values() for f in p["files"] if f.get("created_at")]
    pretty = title(releases)
    run = {"name": config.raw.get("name") or "unnamed", "configfile": configfile, "config_hash": config.hash}
    (folder / card.CARD_FILE).write_text(card.render(releases, pretty_name=pretty, run=run, features_yaml=features,
                                                     provenance=provenance, sizes=sizes), encoding="utf-8")
    record = croissant.build(
        folder, name=pretty, subsets=subsets, licenses=card.licenses(releases), url=url,
        description="; ".join(f"{r.title} ({', '.join(s.name for s in r.subsets)})" for r in releases)
        + f". Exported from the run {run['name']} (config hash {config.hash[:12]}); see README.md.",
        cite_as="\n\n".join(c.strip() for r in releases for c in r.citations),
        date_published=max(written)[:10] if written else time.strftime("%Y-%m-%d", time.gmtime()),
        version="1.0.0")
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
        families = chosen(config.raw, args.families)
        check_out(out)
        releases = [load_target(f.export)(config) for f in families]
        releases = [r for r in releases if r.subsets]
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's folder is private; the export is an ordinary folder
        build(config, releases, tmp, args.configfile, args.url)
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
