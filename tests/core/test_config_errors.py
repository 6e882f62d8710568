"""Config and command-line mistakes stop with one clear line (file and field path), never silently:
schema rules (distinct panels, model lists naming evaluated models, known sampling parameters),
YAML that is not a mapping, pydantic errors, and the stage arguments --shard / --option / --model."""
from __future__ import annotations

import inspect

import pytest
import yaml
from openai.resources.chat.completions import Completions

from aura.cli import main
from aura.config import ConfigError, command_line_overrides, load_config, read_raw, validate_config, workflow_config
from conftest import REPO, base_config


def raw_config(tmp_path) -> dict:
    return base_config("http://127.0.0.1:9/v1", tmp_path / "cache")


def error_of(raw: dict, **kw) -> str:
    with pytest.raises(ConfigError) as err:
        validate_config(raw, **kw)
    text = str(err.value)
    assert "\n" not in text, "one line"
    return text


@pytest.mark.parametrize("role", ["judges", "reviewers"])
def test_panel_members_must_be_distinct(tmp_path, role):
    raw = raw_config(tmp_path)
    raw["aura"]["roles"][role] = ["m", "m", "jb"]  # m would vote twice
    assert f"aura/roles/{role}: ['m', 'm', 'jb'] has non-unique elements" in error_of(raw)


@pytest.mark.parametrize("key, value", [
    ("format_models", ["jb"]), ("consistency_models", ["jb"]), ("vendor_overlap_models", ["jb"]),
])
def test_model_lists_must_name_evaluated_models(tmp_path, key, value):
    raw = raw_config(tmp_path)
    raw["aura"]["evaluate"] = {key: value}
    assert f"<config>: aura.evaluate.{key}: 'jb' is not an evaluated model" in error_of(raw)


def test_model_lists_have_no_repeats(tmp_path):
    raw = raw_config(tmp_path)
    raw["aura"]["evaluate"] = {"format_models": ["m", "m"]}
    assert "aura/evaluate/format_models: ['m', 'm'] has non-unique elements" in error_of(raw)


def test_a_sampling_parameter_typo_is_rejected(tmp_path):
    raw = raw_config(tmp_path)
    raw["models"]["m"]["params"]["temprature"] = 0.2
    assert "models/m/params: Additional properties are not allowed ('temprature' was unexpected)" in error_of(raw)


# params the client moves into extra_body for one provider's endpoints (and refuses, unsent, elsewhere)
EXTRA_BODY = {"chat_template_kwargs": "vllm"}


def test_every_accepted_parameter_is_one_the_client_passes_on(tmp_path):
    """The LLM layer sends model params as keyword arguments of chat.completions.create: the schema
    accepts exactly names that call knows (a name it does not know would fail every request), plus the
    endpoint's extra_sampling names, which the client moves into extra_body (llama.cpp's top_k, min_p), and
    the provider-only names of EXTRA_BODY, which it moves into extra_body for that provider's endpoints
    (vLLM's chat_template_kwargs): passed on too, as the client's own prepare shows."""
    from aura.llm import Cache, LLMClient, LLMRequest

    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    params = schema["$defs"]["model"]["properties"]["params"]
    assert params["additionalProperties"] is False
    create = set(inspect.signature(Completions.create).parameters)
    extras = set(schema["$defs"]["endpoint"]["properties"]["extra_sampling"]["items"]["enum"])
    assert extras == {"top_k", "min_p"} and not extras & create
    assert "extra_body" in create and set(EXTRA_BODY) <= set(params["properties"]) and not set(EXTRA_BODY) & create
    assert set(params["properties"]) - extras - set(EXTRA_BODY) <= create
    for name, provider in EXTRA_BODY.items():  # the client does pass each one on, in extra_body
        raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache", provider=provider)
        raw["models"]["m"]["params"][name] = {"enable_thinking": False}
        req = LLMRequest(item_id="x", messages=[{"role": "user", "content": "hi"}], prompt_name="t",
                         prompt_sha256="0")
        sent = LLMClient(validate_config(raw), Cache(tmp_path / "cache")).prepare("m", req)[1]
        assert sent["extra_body"] == {name: {"enable_thinking": False}} and name not in sent, name


def test_top_level_must_be_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- endpoints\n- models\n")
    with pytest.raises(ConfigError, match=r"list.yaml: the top level must be a mapping of config keys, got a list$"):
        read_raw(path)


def test_broken_yaml_is_one_line_with_its_position(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("aura:\n  roles:\n    judges: [a, b\nmodels: {}\n")
    with pytest.raises(ConfigError) as err:
        read_raw(path)
    assert str(err.value).startswith(f"{path}: not valid YAML at line 4") and "\n" not in str(err.value)


def test_pydantic_errors_read_like_schema_errors(tmp_path):
    """With a schema that lets anything through, the typed layer still names the file and field path."""
    permissive = tmp_path / "schema.yaml"
    permissive.write_text("type: object\n")
    raw = raw_config(tmp_path)
    raw["endpoints"]["fake"]["max_concurrency"] = "many"
    text = error_of(raw, schema_path=permissive, source="my.yaml")
    assert text.startswith("my.yaml: invalid config: endpoints/fake/max_concurrency: Input should be a valid integer")


def test_schema_errors_are_one_line_naming_the_file(tmp_path):
    raw = raw_config(tmp_path)
    raw["endpoints"]["fake"]["max_concurrency"] = 0
    raw["aura"]["roles"]["evaluated"] = []
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert text.startswith(f"{path}: invalid config: ") and "\n" not in text
    assert "endpoints/fake/max_concurrency: 0 is less than the minimum of 1" in text
    assert "aura/roles/evaluated: [] should be non-empty" in text


@pytest.mark.parametrize("key", ["roles", "construct", "evaluate", "stats", "seed_download", "seed_counts"])
def test_a_top_level_aura_key_is_refused_naming_its_new_place(tmp_path, key):
    """AURA's settings moved under `aura:`; a config that still has one at the top level gets one line
    saying where it went (not a schema error about an unexpected property)."""
    raw = raw_config(tmp_path)
    raw[key] = raw["aura"].pop("roles") if key == "roles" else {}
    text = error_of(raw)
    assert f"config keys moved under their family's section" in text and f"{key} -> aura.{key}" in text, text
    assert "Additional properties" not in text


@pytest.mark.parametrize("old, new", [("seeds", "aura.estimate.seeds"), ("items_per_seed", "aura.estimate.items_per_seed"),
                                      ("pasbench_miss_share", "pasbench.estimate.miss_share"),
                                      ("lpsbench_steps", "lpsbench.estimate.steps")])
def test_a_family_assumption_of_the_estimate_section_is_refused_naming_its_new_place(tmp_path, old, new):
    raw = raw_config(tmp_path)
    raw["estimate"] = {old: 1}
    text = error_of(raw)
    assert f"estimate.{old} -> {new}" in text and "Additional properties" not in text, text


def test_old_top_level_roles_in_a_file_is_one_line_naming_aura(tmp_path, capsys):
    raw = raw_config(tmp_path)
    raw["roles"] = raw.pop("aura")["roles"]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{path}: ") and "roles -> aura.roles" in line, line
    assert main(["panel", "--configfile", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and "roles -> aura.roles" in line, line


def test_an_old_top_level_override_is_refused_naming_aura(tmp_path):
    """--config 'construct={max_seeds: 3}' (the old spelling) stops with the same one line."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw_config(tmp_path)))
    with pytest.raises(ConfigError, match=r"with --config construct: config keys moved .*: construct -> aura\.construct"):
        workflow_config(path, {"construct": {"max_seeds": "3"}}, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


# --- Snakemake --config: merged into the file the jobs read ---------------------------------------
def test_config_overrides_are_merged_and_written_for_the_jobs(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw_config(tmp_path)))
    # what Snakemake hands over for --config seed=7 'aura={construct: {max_seeds: 2, max_dimensions_per_prefix: null}}':
    # a typed top-level value, nested scalars as text
    over = {"seed": 7, "aura": {"construct": {"max_seeds": "2", "max_dimensions_per_prefix": "null"}}}
    assert command_line_overrides(over) == {"seed": 7, "aura": {"construct": {"max_seeds": 2,
                                                                              "max_dimensions_per_prefix": None}}}
    raw, jobs_read = workflow_config(path, over, tmp_path / "merged")
    assert raw["seed"] == 7 and raw["aura"]["construct"]["max_seeds"] == 2
    assert raw["aura"]["roles"] == raw_config(tmp_path)["aura"]["roles"], "a section override merges into the section"
    merged = load_config(jobs_read)
    assert jobs_read.startswith(str(tmp_path / "merged" / "config.")) and merged.raw["aura"]["construct"]["max_seeds"] == 2
    assert merged.raw["seed"] == 7 and merged.raw["models"] == load_config(path).raw["models"]
    # the same overrides again: the same file; none: the config file itself
    assert workflow_config(path, over, tmp_path / "merged")[1] == jobs_read
    assert workflow_config(path, {}, tmp_path / "merged")[1] == str(path)


def test_a_bad_override_stops_before_any_file_is_written(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw_config(tmp_path)))
    with pytest.raises(ConfigError, match=r"with --config bogus: invalid config: <root>: Additional properties"):
        workflow_config(path, {"bogus": 1}, tmp_path / "merged")
    with pytest.raises(ConfigError, match="aura/evaluate/shards: 0 is less than the minimum of 1"):
        workflow_config(path, {"aura": {"evaluate": {"shards": "0"}}}, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


# --- stage arguments -------------------------------------------------------------------------------
@pytest.fixture
def cfg_path(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw_config(tmp_path)))
    return str(path)


@pytest.mark.parametrize("args, message", [
    (["--shard", "1"], "--shard expects i/n (e.g. 0/4), got '1'"),
    (["--shard", "a/b"], "--shard expects i/n (e.g. 0/4), got 'a/b'"),
    (["--shard", "2/2"], "--shard 2/2: the shard index must satisfy 0 <= i < n"),
    (["--shard", "0/0"], "--shard 0/0: the shard index must satisfy 0 <= i < n"),
    (["--option", "fromat=action_only"], "rollout: unknown --option fromat=action_only (known: ['format'])"),
    (["--option", "format=json"], "rollout: --option format=json: expected one of ['react', 'action_only']"),
    (["--option", "format"], "--option expects NAME=VALUE, got 'format'"),
    (["--in", "dataset=a.jsonl", "--in", "dataset=b.jsonl"], "--in dataset is given twice ('a.jsonl' and 'b.jsonl')"),
    (["--model", "ghost"], "--model ghost: not a model of the config"),
])
def test_bad_stage_arguments_are_one_line(tmp_path, capsys, cfg_path, args, message):
    out = tmp_path / "rollouts.jsonl"
    argv = ["rollout", "--configfile", cfg_path, "--out", f"rollouts={out}", *args]
    if "--model" not in args:
        argv += ["--model", "m"]
    if "--in" not in args:
        argv += ["--in", f"dataset={tmp_path / 'dataset.jsonl'}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: rollout: ") and message in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("stage, option, message", [
    ("judge", "axes=safety,tone", "expected distinct axes from ['detection', 'action_type', 'safety']"),
    ("judge", "run=-1", "expected a run index 0, 1, 2, ..."),
    ("judge", "only=everything", "expected one of ['dataset_items', 'human_labels']"),
    ("format-sample", "size_key=shards", "expected one of ['format_sample_size'"),
    ("panel", "axes=safety", "panel: unknown --option axes=safety (it takes no --option)"),
])
def test_option_values_are_checked_per_stage(capsys, cfg_path, stage, option, message):
    assert main([stage, "--configfile", cfg_path, "--model", "m", "--option", option]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line, line


def test_a_config_that_is_not_a_mapping_stops_the_cli(tmp_path, capsys):
    path = tmp_path / "list.yaml"
    path.write_text("[1, 2]\n")
    assert main(["panel", "--configfile", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"error: {path}: the top level must be a mapping of config keys, got a list"


def test_a_stage_missing_an_input_names_the_flag(capsys, cfg_path, tmp_path):
    """select-seeds reads `--in seeds_dir=`; without it: one line, exit 2, nothing written."""
    out = tmp_path / "seeds.jsonl"
    assert main(["select-seeds", "--configfile", cfg_path, "--out", f"seeds={out}"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == "error: select-seeds: this stage needs --in seeds_dir=PATH (given: none)"
    assert not out.exists()
