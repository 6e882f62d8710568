"""aura/aura_eval's judges against the fake server (real HTTP): a judge call that fails errors the sample, so
the eval ends in error (never a success with a made-up missing vote); an answer with no verdict is a missing
vote, told apart from a failed call; Inspect's own sample retry runs a failed sample again; a bound judge gets
its role's paper settings under its own; the paper's judges keep their vendors' base URLs whatever base URL
the environment names for the evaluated model."""
from __future__ import annotations

import pytest

from aura.io import write_jsonl
from test_inspect_aura import JUDGE_IDS, rows, rules

pytest.importorskip("inspect_ai")
from inspect_run import run_eval  # noqa: E402

ROLES = {f"judge_{i + 1}": f"openai-api/fake/{m}" for i, m in enumerate(JUDGE_IDS)}
DENIED = {"status": 401, "message": "Incorrect API key provided"}


def judge_bodies(server, model: str) -> list[dict]:
    sent = [r["body"] for r in server.requests() if r["path"].endswith("/chat/completions")]
    return [b for b in sent if b["model"] == model and b.get("response_format")]


def run(server, monkeypatch, tmp_path, extra_rules: list[dict], roles: dict, **options):
    server.set_rules([*extra_rules, *rules()])
    write_jsonl(tmp_path / "data" / "dataset.jsonl", rows())
    return run_eval(server, monkeypatch, tmp_path / "logs", "aura/aura_eval",
                    {"data": str(tmp_path / "data"), "pair_label": "NSP", "limit": 3}, roles, **options)


@pytest.mark.parametrize("case", ["bad key", "bad model names"])
def test_a_judge_call_that_fails_ends_the_eval_in_error(server, monkeypatch, tmp_path, case):
    """Before: status success, the failed judge's votes None (a bad key) or every metric NaN (two bad names)."""
    if case == "bad key":
        extra, roles, who = [{"match": {"model": "judge-b"}, **DENIED}], ROLES, "judge_2 openai-api/fake/judge-b"
    else:
        extra = [{"match": {"model": m}, "status": 404, "message": f"The model `{m}` does not exist"}
                 for m in ("no-such-b", "no-such-c")]
        roles = {**ROLES, "judge_2": "openai-api/fake/no-such-b", "judge_3": "openai-api/fake/no-such-c"}
        who = "openai-api/fake/no-such-"
    log = run(server, monkeypatch, tmp_path, extra, roles)
    assert log.status == "error"
    assert who in log.error.message and ("401" if case == "bad key" else "404") in log.error.message
    assert "\n" not in log.error.message.strip()
    failed = [s for s in log.samples or [] if s.error is not None]
    assert failed and all(not s.scores for s in failed)


def test_an_answer_with_no_verdict_is_not_a_failed_call(server, monkeypatch, tmp_path):
    """With fail_on_error=False, one eval holds both: CHARLIE's judge_3 answers "no verdict here" on safety (a
    scored sample, its vote missing and listed as unparsed), BRAVO's judge_2 gets a 401 (an errored sample,
    no score, the judge named)."""
    log = run(server, monkeypatch, tmp_path, [{"match": {"model": "judge-b", "contains": "BRAVO"}, **DENIED}],
              ROLES, fail_on_error=False)
    by_id = {s.id: s for s in log.samples}
    assert set(by_id) == {"it_alpha", "it_bravo", "it_charlie"}
    bravo, charlie, alpha = by_id["it_bravo"], by_id["it_charlie"], by_id["it_alpha"]
    assert "judge_2 openai-api/fake/judge-b on" in bravo.error.message and not bravo.scores
    score = charlie.scores["aura_panel"]
    assert charlie.error is None and score.reason == "grader_failed"
    assert score.metadata["votes"]["safety"] == {"judge_1": "Safe", "judge_2": "Unsafe", "judge_3": None}
    assert set(score.metadata["unparsed"]) == {"safety"} and set(score.metadata["unparsed"]["safety"]) == {"judge_3"}
    assert "judge_3=unparsed" in score.explanation and score.value["safety"] == "unresolved"
    ok = alpha.scores["aura_panel"]
    assert alpha.error is None and ok.reason is None and ok.metadata["unparsed"] == {}


def test_inspects_sample_retry_reruns_a_failed_judge_and_bound_judges_get_the_paper_settings(
        server, monkeypatch, tmp_path):
    """judge_2's first call is refused once: --retry-on-error runs the sample again and the eval succeeds with
    every vote. Settings: judge_2 bound with none of its own gets the paper's judge_2 (Claude Opus 4.6:
    temperature 0, 1024 tokens), judge_3 bound with its own temperature keeps it, judge_1 gets GPT-5.4's seed."""
    from inspect_ai.model import GenerateConfig, get_model

    monkeypatch.setenv("FAKE_BASE_URL", server.base_url)
    monkeypatch.setenv("FAKE_API_KEY", "not-a-key")
    own = get_model("openai-api/fake/judge-c", config=GenerateConfig(temperature=0.5), memoize=False)
    log = run(server, monkeypatch, tmp_path, [{"match": {"model": "judge-b"}, "times": 1, **DENIED}],
              {**ROLES, "judge_3": own}, retry_on_error=1)
    assert log.status == "success", log.error
    retried = [e.message for s in log.samples for e in s.error_retries or []]
    assert len(retried) == 1 and "judge_2 openai-api/fake/judge-b on detection failed: Authentication" in retried[0]
    assert all(v is not None for s in log.samples for votes in next(iter(s.scores.values())).metadata["votes"].values()
               for role, v in votes.items() if not (s.id == "it_charlie" and role == "judge_3"))
    assert {(b.get("temperature"), b.get("max_tokens")) for b in judge_bodies(server, "judge-b")} == {(0.0, 1024)}
    assert {b.get("temperature") for b in judge_bodies(server, "judge-c")} == {0.5}
    assert {b.get("seed") for b in judge_bodies(server, "fake-model")} == {42}
    assert log.eval.metadata["judge_settings"]["judge_2"] == {"temperature": 0.0, "max_tokens": 1024}


def test_the_paper_judges_keep_their_vendors_base_urls(server, monkeypatch):
    """Base URLs set in the environment for the evaluated model (here the fake server's) are not the default
    judges'. Before: GPT-5.4 went to OPENAI_BASE_URL (10 requests to /v1/responses, all 404, in the report)."""
    from inspect_ai.model import get_model

    from aura.families.aura.inspect_task import paper_panel
    from aura.inspect_support import resolve_models

    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_BASE_URL", "INSPECT_EVAL_MODEL_BASE_URL"):
        monkeypatch.setenv(var, server.base_url)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(var, "dummy-key")
    for var in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_USE_ADC", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    models = resolve_models(paper_panel())
    assert str(models["judge_1"].api.client.base_url) == "https://api.openai.com/v1/"
    assert str(models["judge_2"].api.client.base_url) == "https://api.anthropic.com"
    assert models["judge_3"].api.base_url == "https://generativelanguage.googleapis.com/"
    # the evaluated model, named the ordinary way, does read OPENAI_BASE_URL
    assert str(get_model("openai/fake-model", memoize=False).api.client.base_url) == f"{server.base_url}/"
    assert server.request_count() == 0


def test_a_judge_401_that_quotes_the_key_leaves_it_out_of_the_error_line(server, monkeypatch, tmp_path):
    key = "sk-canary-" + "5f0c" * 8
    monkeypatch.setenv("FAKE_API_KEY", key)
    extra = [{"match": {"model": "judge-b"}, "status": 401, "echo_auth": True}]
    server.set_rules([*extra, *rules()])
    write_jsonl(tmp_path / "data" / "dataset.jsonl", rows())
    from inspect_ai import eval as inspect_eval
    monkeypatch.setenv("FAKE_BASE_URL", server.base_url)
    (log,) = inspect_eval("aura/aura_eval", task_args={"data": str(tmp_path / "data"), "pair_label": "NSP",
                                                       "limit": 1}, model="openai-api/fake/fake-model",
                          model_roles=ROLES, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "error"
    assert server.requests()[-1]["headers"]["authorization"] == f"Bearer {key}"  # the server got, and quoted, it
    assert "Bearer $FAKE_API_KEY" in log.error.message and key not in log.error.message
    # the sample's error (what `inspect eval` prints and the log's error shows) names the variable; Inspect's own
    # model event still records the provider's exception as raised (docs/inspect.md says so)
    failed = [smp for smp in log.samples if smp.error is not None]
    assert failed and all(key not in smp.error.message for smp in failed)


def test_a_judge_that_never_gives_a_verdict_leaves_no_rate(server, monkeypatch, tmp_path, caplog):
    """Before: judge_3 answering without a verdict on every axis still gave Table 33 from the other two judges'
    majorities, status success, only `votes_unparsed` telling. 9 of the 27 answers hold no verdict, over the
    ceiling of max(1, floor(0.05 x 27)) = 1: every rate and stderr is NaN, the n stay, the counts say why."""
    import math

    from inspect_run import metrics_of

    log = run(server, monkeypatch, tmp_path, [{"match": {"model": "judge-c"}, "content": "Both readings hold."}],
              ROLES)
    assert log.status == "success", log.error
    rates, counts = metrics_of(log)
    assert all(math.isnan(v) for k, v in rates.items() if not k.endswith("_n"))
    assert rates["unsafe_rate_n"] == 2  # ALPHA and BRAVO keep their 2-of-3 majorities; CHARLIE's is unresolved
    assert (counts["verdicts"], counts["verdicts_unparsed"], counts["unparsed_ceiling"]) == (27, 9, 1)
    assert any("9 of 27 judge answers held no verdict, over the ceiling of 1" in r.getMessage() for r in caplog.records)
