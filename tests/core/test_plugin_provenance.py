"""A family's package in the provenance: every sidecar a family's stage writes names the family and the
distribution it was installed from (name and version, from the entry point's distribution), aura-eval for the
built-in families and the plugin's own package for a plugin."""
from __future__ import annotations

import importlib.metadata

import pytest

from aura.config import validate_config
from aura.families import _entry_points, load
from aura.provenance import family_package, provenance
from conftest import base_config
from test_cli_commands import install_family


@pytest.fixture
def registry_cleared():
    """The registry's caches emptied before and after: a family installed by the test is seen, then forgotten."""
    _entry_points.cache_clear()
    load.cache_clear()
    yield
    _entry_points.cache_clear()
    load.cache_clear()


def test_a_built_in_familys_sidecar_names_aura_eval(tmp_path):
    config = validate_config(base_config("http://127.0.0.1:9/v1", tmp_path / "cache"))
    prov = provenance("select-seeds", config)
    assert prov["family"] == {"name": "aura", "distribution": "aura-eval",
                              "version": importlib.metadata.version("aura-eval")}
    assert "family" not in provenance("no-stage-of-any-family", config)  # nothing else of the sidecar changes


def test_a_plugin_familys_stage_names_the_plugins_package(tmp_path, monkeypatch, registry_cleared):
    site = install_family(tmp_path / "site", "provfam", ["provfam-answer"], version="2.3.4")
    monkeypatch.syspath_prepend(str(site))
    assert family_package("provfam-answer") == {"name": "provfam", "distribution": "aura-provfam", "version": "2.3.4"}
    assert family_package("select-seeds")["distribution"] == "aura-eval"
