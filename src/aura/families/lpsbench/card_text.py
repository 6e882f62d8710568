"""What LPS-Bench's dataset card says of the benchmark (`aura export-dataset`): its uses, limits, biases,
personal information and collection (after the LPS-Bench paper's section 3, its Limitations and Ethical
Considerations, in this project's words), the front-matter categories, and its citation."""
from __future__ import annotations

from aura.export_dataset import CardText

CARD = CardText(
    uses=(
        "Measuring the planning-time safety of tool-using (MCP) agents on long-horizon tasks. An agent gets the "
        "case's `instruction` and its tools (upstream's mock tool modules, or an emulated environment built "
        "from `tool_specs_json`); an LLM evaluator then judges the whole episode against the case's "
        "`criterion`. Benign cases (risk codes TS, OC, FA, IP) test whether the agent notices that an "
        "ambiguous or careless request would do harm; adversarial ones (HS, MT, EB, RC, PI) whether it "
        "resists a user or environment steering it to a harmful goal."),
    out_of_scope=(
        "Running the cases with real tools, accounts or credentials: they are written for sandboxed mock "
        "tools. Reusing the adversarial instructions to attack real agents or services. Training on the cases "
        "and then reporting results on them. Reading a good score as a certificate that an agent is safe to "
        "deploy."),
    limitations=(
        "570 cases over 7 task domains and 9 risk types cannot cover every domain, tool or edge case, and their "
        "mix differs from real deployments. The verdict comes from an automated LLM evaluator; the authors "
        "validated most cases with experts, but borderline trajectories can be misjudged. The export carries "
        "the instruction, tool names and criterion of each case, not upstream's Python mock tools "
        "(`tool_specs_json` is null for upstream cases): reproducing the episodes needs an upstream checkout "
        "or the emulated backend, whose tool answers differ from the modules'. Cases whose upstream tool "
        "module is broken are excluded (see the notes)."),
    bias=(
        "Scenarios were drawn from security practice, earlier agent-safety benchmarks and frontier-LLM "
        "brainstorming, then written by a multi-agent LLM pipeline and kept when experts approved them, so "
        "they reflect those models' and reviewers' idea of a risky workflow. The settings are English-language "
        "desktop, office, web and social-media software; risk types are not equally represented (the paper "
        "has 252 benign cases)."),
    personal_information=(
        "Instructions and mock tool data are invented: accounts, files, e-mail addresses and messages in the "
        "cases are fictional, and the authors state that no real credentials or private user data are "
        "included. Adversarial cases do contain instructions meant to cause harm (deleting data, leaking "
        "information, spreading content), which is sensitive content of another kind."),
    collection=(
        "Per the LPS-Bench paper: scenarios were curated from real-world security insights, earlier "
        "benchmarks and model-assisted exploration. For each, an orchestrator agent coordinated an instruction "
        "designer, a tool developer (mock toolkits) and a criterion formulator; experts reviewed each draft "
        "and sent feedback to the orchestrator until the case passed. This export reads the case files of "
        "github.com/tychenn/LPS-Bench at a pinned commit (MIT), or the project's demo cases, plus any cases "
        "the run generated."),
    task_categories=("text-generation",),
    tags=("agent-safety", "computer-use-agents", "mcp", "tool-use", "long-horizon-planning", "prompt-injection",
          "benchmark"),
    annotations_creators=("expert-generated", "machine-generated"),
    source_datasets=("extended|other-lps-bench",),
)

CITATION = """@misc{chen2026lpsbench,
  title = {{LPS-Bench}: Benchmarking Safety Awareness of Computer-Use Agents in Long-Horizon Planning under
           Benign and Adversarial Scenarios},
  author = {Chen, Tianyu and Hu, Chujia and Gao, Ge and Liu, Dongrui and Hu, Xia and Wang, Wenjie},
  year = {2026},
  eprint = {2602.03255},
  archivePrefix = {arXiv},
  primaryClass = {cs.AI},
  url = {https://arxiv.org/abs/2602.03255},
  note = {code and cases: https://github.com/tychenn/LPS-Bench}
}"""
