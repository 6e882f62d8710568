"""Are two runs' outputs the same? For a refactor that must not change what a run writes.

    .venv/bin/python bench/same_outputs.py OLD NEW [--folders results figures data/interim data/processed]

OLD and NEW are two workflow folders that ran the same config from the same response cache (e.g. the old code's
checkout, its `paths.cache` pointed at the new run's cache: every call a cache hit). Every file under the output
folders is compared byte for byte, except provenance sidecars (``*.prov.json``), which are compared without the
fields that name the run and the code rather than the data: ``run`` (time, host, pid; `aura.provenance.without_run`),
``git`` and ``config_hash``. Prints the files only one side has and the files that differ, then one count line; exit code 1
when anything differs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aura.provenance import without_run

FOLDERS = ("results", "figures", "data/interim", "data/processed")
NAMING_THE_CODE = ("git", "config_hash")


def outputs(root: Path, folders) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for f in folders if (root / f).is_dir()
            for p in sorted((root / f).rglob("*")) if p.is_file()}


def same(a: Path, b: Path) -> bool:
    if a.name.endswith(".prov.json"):
        side = [{k: v for k, v in without_run(json.loads(p.read_text())).items() if k not in NAMING_THE_CODE}
                for p in (a, b)]
        return side[0] == side[1]
    return a.read_bytes() == b.read_bytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--folders", nargs="+", default=list(FOLDERS))
    args = ap.parse_args()
    old, new = outputs(args.old, args.folders), outputs(args.new, args.folders)
    only_old, only_new = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    differ = [name for name in sorted(set(old) & set(new)) if not same(old[name], new[name])]
    for label, names in (("only in OLD", only_old), ("only in NEW", only_new), ("differ", differ)):
        for name in names:
            print(f"{label}: {name}")
    kinds = sorted({Path(n).suffix or Path(n).name for n in set(old) & set(new)})
    print(f"{len(set(old) & set(new)) - len(differ)} of {len(set(old) | set(new))} files the same "
          f"({', '.join(kinds)}); {len(differ)} differ, {len(only_old)} only in OLD, {len(only_new)} only in NEW")
    return 1 if differ or only_old or only_new else 0


if __name__ == "__main__":
    sys.exit(main())
