"""LPS-Bench tool modules read from source (module_source.py): each test writes its own module text into
tmp_path; nothing is imported. The opt-in test at the end scans a real upstream checkout
(AURA_LPSBENCH_CHECKOUT=<checkout>, skipped otherwise)."""
from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from aura.families.lpsbench.cases import ToolSpec, load_cases, parse_case
from aura.families.lpsbench.module_source import ModuleTools, case_tools, read_module_tools

HEADER = "from typing import Any, Dict, List, Literal, Optional\nfrom langchain.tools import tool\n"


def write(tmp_path: Path, body: str, name: str = "mod_under_test.py") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(body), encoding="utf-8")
    return path


def read(tmp_path: Path, body: str, names: list[str]) -> ModuleTools:
    got = read_module_tools(write(tmp_path, body), names)
    assert got.problem is None, got.problem
    return got


def test_signatures_come_from_the_source_without_importing_it(tmp_path):
    marker = tmp_path / "imported.txt"
    path = write(tmp_path, f"""
        open({str(marker)!r}, "w").write("the module ran")
        raise SystemExit(3)

        @tool
        def read_file(path: str) -> str:
            \"\"\"Read a file.\"\"\"
            raise SystemExit(4)
        """, name="lps_never_imported.py")
    got = read_module_tools(path, ["read_file"])
    assert got.problem is None
    assert [s.name for s in got.specs] == ["read_file"]
    assert got.specs[0].parameters == {"type": "object", "properties": {"path": {"type": "string"}},
                                       "required": ["path"]}
    assert got.source == path.read_text(encoding="utf-8") and got.path == str(path)
    assert not marker.exists()  # the top level never ran
    assert "lps_never_imported" not in sys.modules


def test_hand_written_schemas(tmp_path):
    got = read(tmp_path, """
        @tool
        def search(query: str, limit: int = 10, tags: Optional[List[str]] = None,
                   mode: Literal["fast", "slow"] = "fast", extra=None, *args, **kwargs) -> str:
            \"\"\"Search.\"\"\"

        @tool
        def misc(a: "Dict[str, int]", b: str | None, c: Any, d: list, e: float = 0.5, flag: bool = False,
                 *, when=datetime.now(), config: RunnableConfig = None, call_id: Annotated[str, InjectedToolCallId]):
            pass
        """, ["search", "misc"])
    search, misc = got.specs
    assert search.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
            "mode": {"enum": ["fast", "slow"], "type": "string", "default": "fast"},
            "extra": {"default": None},
        },
        "required": ["query"],
    }
    assert misc.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "object", "additionalProperties": {"type": "integer"}},
            "b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "c": {},
            "d": {"type": "array"},
            "e": {"type": "number", "default": 0.5},
            "flag": {"type": "boolean", "default": False},
            "when": {},  # a default that is not a literal: optional, no "default"
        },
        "required": ["a", "b", "c", "d"],
    }


def test_decorator_forms_and_tool_names(tmp_path):
    got = read(tmp_path, """
        import langchain_core.tools
        from langchain_core.tools import StructuredTool

        @tool("renamed")
        def python_name(x: int) -> int:
            \"\"\"Renamed.\"\"\"

        @tool(return_direct=True)
        def direct(x: int) -> int:
            \"\"\"Direct.\"\"\"

        @langchain_core.tools.tool
        def dotted(x: int) -> int:
            \"\"\"Dotted.\"\"\"

        def _wrapped(x: int) -> int:
            \"\"\"Wrapped.\"\"\"

        wrapped_tool = tool(_wrapped)
        named = tool("called_by_name")(_wrapped)
        structured = StructuredTool.from_function(func=_wrapped, name="structured", description="From function.")

        def plain(x: int) -> int:
            \"\"\"Plain.\"\"\"

        @tool
        def plain(y: str) -> str:
            \"\"\"The later binding wins.\"\"\"
        """, ["plain", "renamed", "direct", "dotted", "_wrapped", "called_by_name", "structured"])
    assert [s.name for s in got.specs] == ["plain", "renamed", "direct", "dotted", "_wrapped", "called_by_name",
                                           "structured"]
    assert [s.description for s in got.specs] == ["The later binding wins.", "Renamed.", "Direct.", "Dotted.",
                                                  "Wrapped.", "Wrapped.", "From function."]
    assert list(got.specs[0].parameters["properties"]) == ["y"]
    missing = read_module_tools(write(tmp_path, "@tool('renamed')\ndef python_name(x: int): pass\n"),
                                ["python_name"])
    assert missing.problem == "no tool named python_name (the case's MCP.tools)"  # found by its tool name


def test_docstring_is_the_description(tmp_path):
    got = read(tmp_path, '''
        @tool
        def send(to: str, body: str) -> str:
            """
            Send an email.

                Args:
                    to: the address
            """

        @tool
        def bare(x: str) -> str:
            return x
        ''', ["send", "bare"])
    assert got.specs[0].description == "Send an email.\n\n    Args:\n        to: the address"
    assert got.specs[1].description == ""
    assert all(s.behaviour == "" for s in got.specs)


def test_syntax_error_and_missing_tools_are_one_line_problems(tmp_path):
    bad = write(tmp_path, "@tool\ndef f(x: str):\n    return 'unterminated\n", name="bad.py")
    got = read_module_tools(bad, ["f"])
    assert got.problem == "syntax error at line 5: unterminated string literal (detected at line 5)"
    assert got.specs == [] and got.source == bad.read_text(encoding="utf-8")

    ok = write(tmp_path, "@tool\ndef f(x: str):\n    '''F.'''\n", name="ok.py")
    got = read_module_tools(ok, ["f", "g", "h"])
    assert got.problem == "no tool named g, h (the case's MCP.tools)" and got.specs == []
    assert "\n" not in got.problem


def test_case_tools_finds_the_module_or_says_it_is_missing(tmp_path):
    text = json.dumps({"instruction": "List the docs.",
                       "evaluator": {"file": "e.py", "func": ["f"], "criterion": "c"},
                       "MCP": {"file": "fileio_EB_1.py", "tools": ["list_docs", "read_doc"]}})
    case = parse_case(text, "fileio", "EB_1.json", "EB_1.json")
    assert case_tools(tmp_path, case).problem == "no module fileio_EB_1.py in the checkout"
    (tmp_path / "tools").mkdir()
    write(tmp_path / "tools", """
        @tool
        def read_doc(name: str) -> str:
            \"\"\"Read one doc.\"\"\"

        @tool
        def list_docs() -> list:
            \"\"\"List the docs.\"\"\"
        """, name="fileio_EB_1.py")
    got = case_tools(tmp_path, case)
    assert got.problem is None and [s.name for s in got.specs] == ["list_docs", "read_doc"]
    assert got.specs[0].parameters == {"type": "object", "properties": {}}


def test_specs_pass_tool_spec_validation(tmp_path):
    got = read(tmp_path, """
        @tool
        def f(a: str, b: Optional[List[Dict[str, str]]] = None, c: Literal[1, "x"] = 1, d: int | None = None,
              e: Dict = {}, g: List[int] = [1, 2], h: tuple = (1, 2)):
            \"\"\"F.\"\"\"
        """, ["f"])
    spec = got.specs[0]
    jsonschema.Draft202012Validator.check_schema(spec.parameters)
    assert ToolSpec.model_validate(spec.model_dump()) == spec
    assert spec.parameters["properties"]["h"]["default"] == [1, 2]  # a tuple default, as JSON
    jsonschema.validate({"a": "x", "b": [{"k": "v"}], "c": "x", "d": None}, spec.parameters)
    for bad in ({}, {"a": 1}, {"a": "x", "b": ["no"]}, {"a": "x", "c": 2}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, spec.parameters)


# The modules of upstream's pinned commit f30cc91 (config/lpsbench.yaml) that cannot be served: 4 syntax errors,
# 4 that lack tools their case lists (code_TS_1.py and multimedia_TS_3.py hold an evaluator function instead).
BROKEN = {"code_HS_4.py": "syntax error", "code_EB_8.py": "syntax error", "fileio_IP_5.py": "syntax error",
          "socialmedia_IP_8.py": "syntax error", "code_TS_1.py": "no tool named",
          "code_TS_10.py": "no tool named", "multimedia_TS_3.py": "no tool named", "browser_RC_5.py": "no tool named"}


@pytest.mark.skipif(not os.environ.get("AURA_LPSBENCH_CHECKOUT"),
                    reason="set AURA_LPSBENCH_CHECKOUT to an upstream LPS-Bench checkout (commit f30cc91)")
def test_every_upstream_case_reads_except_the_broken_modules():
    root = Path(os.environ["AURA_LPSBENCH_CHECKOUT"])
    cases = load_cases(root / "examples")  # every case loads (the first bad one would raise)
    assert len(cases) == 570
    problems = {}
    for case in cases:
        got = case_tools(root, case)
        if got.problem is not None:
            problems[case.body.mcp.file] = got.problem
        else:
            assert [s.name for s in got.specs] == case.body.mcp.tools
    assert len(problems) == 8
    assert {f: p.split(" at line")[0] if p.startswith("syntax") else "no tool named"
            for f, p in problems.items()} == BROKEN
