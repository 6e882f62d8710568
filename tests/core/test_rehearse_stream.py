"""The rehearsal's estimate from the request stream: distinct requests per (model, role) beside the projection,
output tokens as projected, a line named when it differs by more than 10%, unprojected calls named as such."""
from __future__ import annotations

import pytest

from aura.config import validate_config
from aura.estimate import Line
from aura.io import write_jsonl
from aura.simulator import stream
from conftest import base_config


def _rec(key, role, prompt, tokens_in, cache_hit=False, model="m"):
    return {"key": key, "model": model, "role": role, "prompt_name": prompt, "purpose": "answer", "status": "ok",
            "cache_hit": cache_hit, "tokens_in": tokens_in}


def test_stream_beside_projection(tmp_path):
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["models"]["m"]["price"] = {"input_per_mtok": 10.0, "output_per_mtok": 30.0}
    config = validate_config(raw)
    logs = tmp_path / "logs"
    # judge: 3 distinct requests (one answered again from the cache by a resumed job, counted once), 100 tokens each
    write_jsonl(logs / "judge" / "m.calls.jsonl", [_rec("a", "judge", "judge.v2", 100), _rec("b", "judge", "judge.v2", 100)])
    write_jsonl(logs / "judge" / "m.again.calls.jsonl", [_rec("b", "judge", "judge.v2", 100, cache_hit=True),
                                                          _rec("c", "judge", "upstream:judge", 100)])
    write_jsonl(logs / "probe" / "m.calls.jsonl", [_rec("d", "prober", "probe.v1", 50),
                                                    {**_rec("e", "prober", "probe.v1", 50), "status": "error"}])
    lines = [Line("judge (a)", "m", "projected", role="judge", prompts=("judge.v2",), calls=2, tokens_in=200,
                  tokens_out=20, cost_usd=2e-3 + 6e-4),
             Line("judge (b)", "m", "projected", role="judge", prompts=("judge.v2",), calls=1, tokens_in=100,
                  tokens_out=10, cost_usd=1e-3 + 3e-4),
             Line("rollout", "m", "projected", role="evaluated", prompts=("agent.v1",), calls=10, tokens_in=1000,
                  tokens_out=100, cost_usd=0.013)]
    rows = {(r["model"], r["role"]): r for r in stream.compare(config, lines, stream.stream_calls(logs))}
    judge = rows[("m", "judge")]
    assert (judge["projected_calls"], judge["stream_calls"], judge["stream_tokens_in"]) == (3, 3, 300)
    assert judge["group"] == "judge" and judge["differs"] == ""
    assert judge["stream_usd"] == pytest.approx(300 * 10e-6 + 30 * 30e-6, abs=0.006)
    assert rows[("m", "evaluated")]["stream_calls"] == 0 and rows[("m", "evaluated")]["differs"] == "calls tokens_in usd"
    probe = rows[("m", "prober")]
    assert probe["group"] == "not projected" and probe["stream_calls"] == 1 and "calls" in probe["differs"]
    text = "\n".join(stream.report_lines(list(rows.values())))
    assert "2 of 3 lines differ by more than 10%" in text
    assert "rollout / m (evaluated): calls 10 -> 0, prompt tokens per call 100 -> -" in text
    assert "judge / m" not in text
    stream.write(list(rows.values()), tmp_path / "s.csv")
    assert (tmp_path / "s.csv").read_text().splitlines()[0].startswith("group,model,role")
