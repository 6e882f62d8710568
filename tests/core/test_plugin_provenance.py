"""A family's package in the provenance: every sidecar a family's stage writes names the family and the
distribution it was installed from (name and version, from the entry point's distribution), aura-eval for the
built-in families and the plugin's own package for a plugin."""
from __future__ import annotations

import importlib.metadata

import pytest

from aura.config import validate_config
from aura.families import _entry_points, code_sha256, load
from aura.provenance import family_package, provenance
from conftest import base_config
from test_cli_commands import install_family


@pytest.fixture
def registry_cleared():
    """The registry's caches emptied before and after: a family installed by the test is seen, then forgotten."""
    for cached in (_entry_points, load, code_sha256):
        cached.cache_clear()
    yield
    for cached in (_entry_points, load, code_sha256):
        cached.cache_clear()


def test_a_built_in_familys_sidecar_names_aura_eval(tmp_path):
    config = validate_config(base_config("http://127.0.0.1:9/v1", tmp_path / "cache"))
    prov = provenance("select-seeds", config)
    code = prov["family"].pop("code_sha256")
    assert prov["family"] == {"name": "aura", "distribution": "aura-eval",
                              "version": importlib.metadata.version("aura-eval")}
    assert len(code) == 64  # the family package's Python files, hashed
    assert "family" not in provenance("no-stage-of-any-family", config)  # nothing else of the sidecar changes


def test_a_plugin_familys_stage_names_the_plugins_package(tmp_path, monkeypatch, registry_cleared):
    site = install_family(tmp_path / "site", "provfam", ["provfam-answer"], version="2.3.4")
    monkeypatch.syspath_prepend(str(site))
    got = family_package("provfam-answer")
    code = got.pop("code_sha256")
    assert got == {"name": "provfam", "distribution": "aura-provfam", "version": "2.3.4"}
    # the plugin's code edited in place, its version kept: the hash tells the two apart
    module = next(site.rglob("provfam/*.py"))
    module.write_text(module.read_text() + "\n# edited\n")
    code_sha256.cache_clear()
    assert family_package("provfam-answer")["code_sha256"] not in (None, code)
    assert family_package("select-seeds")["distribution"] == "aura-eval"
