"""Running one of the project's Inspect tasks against the fake server in a test: the OpenAI-compatible provider
`openai-api/fake/<model>` pointed at it, the log written under the test's folder, and the metrics compared: the
task's rates (its first score) and its counts (the score of the shared `counts` scorer)."""
from __future__ import annotations

import math

from inspect_ai import eval as inspect_eval


def run_eval(server, monkeypatch, log_dir, task: str, task_args: dict, roles: dict, model: str = "fake-model",
             **options):
    """The task's one log, as it ended (`options`: eval()'s, e.g. retry_on_error, fail_on_error)."""
    monkeypatch.setenv("FAKE_BASE_URL", server.base_url)
    monkeypatch.setenv("FAKE_API_KEY", "not-a-key")
    (log,) = inspect_eval(task, task_args=task_args, model=f"openai-api/fake/{model}", model_roles=roles,
                          log_dir=str(log_dir), display="none", **options)
    return log


def run_task(server, monkeypatch, log_dir, task: str, task_args: dict, roles: dict[str, str], **options):
    """The task's one log, after checking it succeeded."""
    log = run_eval(server, monkeypatch, log_dir, task, task_args, roles, **options)
    assert log.status == "success", log.error
    return log


def metrics_of(log) -> tuple[dict[str, float], dict[str, float]]:
    """(the rates, the counts) the log reports: its two scores, the task's scorer's and `counts`'."""
    rates, counts = log.results.scores
    assert counts.name == "counts" and rates.name != "counts"
    return ({name: m.value for name, m in rates.metrics.items()},
            {name: m.value for name, m in counts.metrics.items()})


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def assert_metrics(log, expected: dict[str, float], counts: dict[str, int] | None = None) -> dict[str, float]:
    """The log's rates are exactly these metrics, each equal to its expected value (NaN to NaN), and its counts
    (when given) these; returns the rates."""
    got, have = metrics_of(log)
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert same(got[name], value), (name, got[name], value)
    if counts is not None:
        assert have == counts, have
    return got
