"""Running one of the project's Inspect tasks against the fake server in a test: the OpenAI-compatible provider
`openai-api/fake/<model>` pointed at it, the log written under the test's folder, and the metrics compared."""
from __future__ import annotations

import math

from inspect_ai import eval as inspect_eval


def run_eval(server, monkeypatch, log_dir, task: str, task_args: dict, roles: dict, **options):
    """The task's one log, as it ended (`options`: eval()'s, e.g. retry_on_error, fail_on_error)."""
    monkeypatch.setenv("FAKE_BASE_URL", server.base_url)
    monkeypatch.setenv("FAKE_API_KEY", "not-a-key")
    (log,) = inspect_eval(task, task_args=task_args, model="openai-api/fake/fake-model", model_roles=roles,
                          log_dir=str(log_dir), display="none", **options)
    return log


def run_task(server, monkeypatch, log_dir, task: str, task_args: dict, roles: dict[str, str]):
    """The task's one log, after checking it succeeded."""
    log = run_eval(server, monkeypatch, log_dir, task, task_args, roles)
    assert log.status == "success", log.error
    return log


def assert_metrics(log, expected: dict[str, float]) -> dict[str, float]:
    """The log's one score holds exactly these metrics, each equal to its expected value; returns them."""
    (score,) = log.results.scores
    got = {name: m.value for name, m in score.metrics.items()}
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert math.isclose(got[name], value), (name, got[name], value)
    return got
