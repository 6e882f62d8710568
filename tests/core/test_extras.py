"""A command whose extra is not installed says so in one line (aura.extras): the extra is read from the installed
package's metadata, so an Inspect-only install (`pip install aura-eval`) learns which group to add."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO

from aura.extras import extra_of


def test_each_optional_module_is_found_in_its_extra():
    assert (extra_of("jinja2"), extra_of("snakemake.cli"), extra_of("pytest"), extra_of("xllamacpp")) == (
        "workflow", "workflow", "test", "engine")
    assert extra_of("pandas") is None and extra_of("no_such_module") is None  # a base dependency; none at all


def test_a_command_without_its_extra_is_one_line(tmp_path):
    # jinja2 made unimportable as on an install without the workflow extra (None in sys.modules: ModuleNotFoundError)
    code = ("import sys; sys.modules['jinja2'] = None\nfrom aura.cli import main\n"
            f"sys.exit(main(['view', '--configfile', 'config/config.yaml', '--export', {str(tmp_path / 'site')!r}]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: this command needs the module 'jinja2', which the 'workflow' extra installs: "
        "pip install 'aura-eval[workflow]' (or bash scripts/bootstrap.sh for everything)"]
    assert not (tmp_path / "site").exists()
