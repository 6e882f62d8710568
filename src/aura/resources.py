"""Where the repository's ``prompts/`` and ``config/`` folders are: the one loader the workflow and the Inspect
tasks share (aura.config's REPO_ROOT is ROOT; aura.prompts and the families' manifests find the prompts under it,
aura.inspect_support the paper configs).

In a checkout (and an editable install) they are the repository's own folders, ``<repository>/prompts`` and
``<repository>/config``, where the workflow and the docs point. A wheel carries copies of both inside the
package, ``aura/_resources/prompts`` and ``aura/_resources/config`` (setup.py's build step copies them when the
wheel is built), so an installed ``inspect eval aura/...`` finds its prompts and the paper's panels without the
repository. ROOT is the folder holding both: the checkout when this package lies in one, else the package's copy.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parents[1]  # <repository> when this file is <repository>/src/aura/resources.py
BUNDLED = PACKAGE / "_resources"
FOLDERS = ("prompts", "config")


def _holds_both(root: Path) -> bool:
    return all((root / folder).is_dir() for folder in FOLDERS)


def find_root() -> Path:
    """The checkout's root when this package is its src/aura and it holds prompts/ and config/; else the
    package's bundled copy (a wheel install); else the checkout's place, so a missing file is named there."""
    if PACKAGE == CHECKOUT / "src" / "aura" and _holds_both(CHECKOUT):
        return CHECKOUT
    if _holds_both(BUNDLED):
        return BUNDLED
    return CHECKOUT


ROOT = find_root()


def resource_path(*parts: str) -> Path:
    """A file or folder under ROOT, e.g. ``resource_path("config", "paper.yaml")``."""
    return ROOT.joinpath(*parts)


def same_places(folders) -> list[Path]:
    """Each folder resolved and, for one under ROOT, also the same relative place under the working folder.

    A family names its demo data under ROOT (``<ROOT>/data/raw/demo_seeds``). In a checkout that is where the data
    lies. A wheel carries no ``data/`` (ROOT is the package's ``_resources``), so an installed package meets the demo
    data in the copy of the workflow its command runs in, ``./data/raw/demo_seeds``; both are the family's."""
    resolved = [Path(f).resolve() for f in folders]
    return resolved + [Path.cwd() / f.relative_to(ROOT) for f in resolved if f.is_relative_to(ROOT)]
