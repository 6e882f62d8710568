"""`aura rehearse --dry` on the paper configs: every endpoint (live and batch) points at this machine, every output
path lies under the rehearsal's folder, and the derived config is marked as a rehearsal and validates."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["paper", "lpsbench", "pasbench"])
def test_a_rehearsal_never_leaves_the_machine(tmp_path, name):
    folder = tmp_path / "r"
    out = subprocess.run([sys.executable, "-m", "aura", "rehearse", "--configfile", str(ROOT / "config" / f"{name}.yaml"),
                          "--folder", str(folder), "--dry"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    derived = yaml.safe_load((folder / "config.yaml").read_text())
    urls = [ep[k] for ep in derived["endpoints"].values() for k in ("base_url", "batch_base_url") if ep.get(k)]
    assert urls and all(u.startswith("http://127.0.0.1:") for u in urls), urls
    if name == "paper":  # Anthropic's Message Batches go to their own simulated server, not api.anthropic.com
        assert derived["endpoints"]["anthropic"]["batch_base_url"].startswith("http://127.0.0.1:")
    for key in ("interim", "processed", "results", "figures", "cache", "logs"):
        assert Path(derived["paths"][key]).is_relative_to(folder)
    assert derived["rehearsal"]["source"].endswith(f"{name}.yaml")
    assert {ep["api_key_env"] for ep in derived["endpoints"].values()} == {"AURA_REHEARSAL_KEY"}
