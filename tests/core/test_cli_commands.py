"""The CLI's commands: one table of the core's command names (aura.core_commands) that the parser and the family
registry both read; a user's mistake raised by any command (a family's estimate hook included) is one line and exit
status 2; no option is taken for an abbreviation of another; `aura estimate --config KEY=VALUE` overrides the
config as the workflow's --config does."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aura.cli import build_parser, main
from aura.config import load_config, read_raw
from aura.core_commands import CORE_COMMANDS
from aura.estimate import estimate, format_estimate
from conftest import REPO, base_config
from rjudge_fixture import write_paper_shaped

OVERRIDE = "aura={construct: {max_seeds: 3}}"


def _configfile(tmp_path: Path, seeds: Path | None = None) -> Path:
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["paths"]["seeds"] = str(seeds or write_paper_shaped(tmp_path / "seeds", unintended={"Program": (4, 2)},
                                                            injection={"Web": 2}))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _subcommands() -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_the_cli_offers_every_command_of_the_one_table():
    assert {"estimate", "summary", "render", "view", "cache", "preflight", "export-dataset", "rehearse"} == set(CORE_COMMANDS)
    assert set(CORE_COMMANDS) <= _subcommands()


def test_estimate_config_overrides_merge_as_the_workflows_do(tmp_path, capsys):
    path = _configfile(tmp_path)
    assert main(["estimate", "--configfile", str(path), "--config", OVERRIDE]) == 0
    overridden = capsys.readouterr().out
    assert main(["estimate", "--configfile", str(path)]) == 0
    plain = capsys.readouterr().out
    assert overridden != plain
    # the same text as for the file the Snakefile writes from the workflow's --config (Snakemake's reading of it)
    from snakemake.cli import parse_config

    from aura.config import workflow_config

    merged, written = workflow_config(path, parse_config([OVERRIDE]), tmp_path / "merged")
    assert read_raw(written)["aura"]["construct"]["max_seeds"] == 3 and merged["aura"]["construct"]["max_seeds"] == 3
    config = load_config(written)
    assert format_estimate(estimate(config), config) + "\n" == overridden


def test_no_option_is_read_as_an_abbreviation(tmp_path, capsys):
    """Every parser, a command's own sub-commands' included, takes an option by its full name only."""
    path = str(_configfile(tmp_path))
    for argv, unknown in ((["estimate", "--configfile", path, "--configfil", path], "--configfil"),
                          (["select-seeds", "--configfile", path, "--mod", "m"], "--mod"),
                          (["cache", "export", "--configfile", path, "--out", "x.tar.gz", "--conf", path], "--conf")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and f"unrecognized arguments: {unknown} " in capsys.readouterr().err, argv


def test_a_malformed_override_is_one_line(tmp_path, capsys):
    assert main(["estimate", "--configfile", str(_configfile(tmp_path)), "--config", "no-equals-sign"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --config no-equals-sign: ") and err.count("\n") == 1


def test_a_user_error_of_a_familys_estimate_hook_is_one_line(tmp_path, capsys):
    """AURA's estimate hook refuses a seed folder that does not exist (UserError): no traceback, exit 2."""
    path = _configfile(tmp_path, seeds=tmp_path / "nowhere")
    assert main(["estimate", "--configfile", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: estimate: seed folder {tmp_path / 'nowhere'} does not exist (paths.seeds) and no " \
                  "aura.seed_download is configured; point paths.seeds at an R-Judge data folder (<Domain>/*.json)\n"


def install_family(site: Path, name: str, stages: list[str], version: str = "1.0.0", code: str = "",
                   **manifest: str) -> Path:
    """A one-manifest family package `<name>` with a distribution `aura-<name>` (its dist-info, entry point in
    aura.families) written into `site`, as pip would install it; its stages run nothing. `code` goes into the
    package's module, `manifest` (hook name -> target) into its Family."""
    package = site / name
    package.mkdir(parents=True)
    hooks = "".join(f", {hook}={target!r}" for hook, target in manifest.items())
    (package / "__init__.py").write_text(
        "from pathlib import Path\nfrom aura.families.base import Family, Stage\n" + code +
        f"\nFAMILY = Family(name={name!r}, title={name!r}, layout=lambda raw: {{}}, reports={{}}, targets=lambda raw: [],"
        f" root=Path(__file__).parent, nested=False, order=999{hooks},\n"
        f"    stages={{s: Stage('a stage', '{name}:FAMILY') for s in {stages!r}}})\n")
    info = site / f"aura_{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: aura-{name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[aura.families]\n{name} = {name}:FAMILY\n")
    return site


@pytest.mark.parametrize("command", sorted(CORE_COMMANDS))
def test_the_registry_refuses_a_family_stage_named_like_any_core_command(tmp_path, monkeypatch, command):
    from importlib.metadata import EntryPoint

    from aura.families import GROUP, FamilyError, _manifest

    name = f"clash_{sorted(CORE_COMMANDS).index(command)}"
    monkeypatch.syspath_prepend(str(install_family(tmp_path / "site", name, [command])))
    with pytest.raises(FamilyError, match=f"its stage or command '{command}' is a command of the core"):
        _manifest(EntryPoint(name=name, value=f"{name}:FAMILY", group=GROUP))


def test_a_family_stage_named_preflight_is_one_line_not_a_traceback(tmp_path):
    site = install_family(tmp_path / "site", "clashfam", ["preflight"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src")]), "AURA_JOB_SERVER": "off"}
    out = subprocess.run([sys.executable, "-m", "aura", "summary", "--configfile", "config/config.yaml"], cwd=REPO,
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2, out.stderr
    assert out.stderr == ("error: family 'clashfam' (clashfam:FAMILY): its stage or command 'preflight' is a command "
                          "of the core (python -m aura preflight); rename it\n")


VIEWER_PART = """
import pandas as pd
from aura.errors import UserError
from aura.web.viewer.part import ViewerPart


class Part(ViewerPart):
    def load(self, data, layout):
        return pd.DataFrame([{"key": "r1", "text": "r1", "model": "m", "label": "safe"}])

    def tables(self, pages):
        raise UserError("viewfam/answers.jsonl: record 3 has no verdict")
"""


def test_a_user_error_of_a_familys_viewer_hook_is_one_line(tmp_path):
    """`aura view --export`: a family's part refuses its files (UserError) while the pages are written."""
    site = install_family(tmp_path / "site", "viewfam", [], code=VIEWER_PART, viewer="viewfam:Part")
    raw = {**base_config("http://127.0.0.1:9/v1", tmp_path / "cache"), "families": ["viewfam"]}
    raw.pop("aura")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src")]), "AURA_JOB_SERVER": "off"}
    out = subprocess.run([sys.executable, "-m", "aura", "view", "--configfile", "c.yaml", "--export", "site_out"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2, out.stderr
    assert out.stderr == "error: viewfam/answers.jsonl: record 3 has no verdict\n"
