"""Shared fixtures: a fake OpenAI-compatible server and configs that point at it."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from aura.config import validate_config
from fake_openai import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def fake():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def server(fake):
    fake.reset()
    yield fake
    fake.reset()


def base_config(url: str, cache_dir: Path, **endpoint) -> dict:
    ep = {"kind": "openai", "base_url": url, "api_key_env": None, "structured_output": "json_schema",
          "max_concurrency": 4, "max_tries": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5}
    ep.update(endpoint)
    return {
        "paths": {"cache": str(cache_dir), "interim": str(cache_dir.parent / "interim"),
                  "processed": str(cache_dir.parent / "processed"), "results": str(cache_dir.parent / "results"),
                  "logs": str(cache_dir.parent / "logs"), "figures": str(cache_dir.parent / "figures")},
        "endpoints": {"fake": ep},
        "models": {"m": {"endpoint": "fake", "model_id": "fake-model",
                         "params": {"temperature": 0.0, "max_tokens": 64, "seed": 1},
                         "price": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}},
        "roles": {"generator": "m", "classifier": "m", "reviewers": ["m", "m", "m"], "judges": ["m", "m", "m"],
                  "evaluated": ["m"]},
    }


@pytest.fixture
def make_config(server, tmp_path):
    def make(raw_overrides=None, **endpoint):
        raw = base_config(server.base_url, tmp_path / "cache", **endpoint)
        for key, value in (raw_overrides or {}).items():
            raw[key] = copy.deepcopy(value)
        return validate_config(raw)

    return make
