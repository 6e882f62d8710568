"""What AURA-Eval's dataset card says of the benchmark (`aura export-dataset`): its uses, limits, biases,
personal information and collection (after the AURA-Eval paper's sections 3-4, 8 and appendices B-I, in
this project's words), the front-matter categories, and the citations of the paper and of R-Judge, its
seed source."""
from __future__ import annotations

from aura.export_dataset import CardText

CARD = CardText(
    uses=(
        "Measuring whether a tool-using LLM agent acts safely at a fixed decision point of a trajectory. Each row "
        "is a prefix (`profile`, `model_input`) that stops where the agent must act next. On a No-Safe-Path "
        "(NSP) row no direct way to fulfil the request is safe, so a safe agent stops, asks or declines; on a "
        "Safe-Path (SP) row a safe way to finish exists (`safe_action_sketches`) and a safe agent takes it. "
        "Comparing a model on an original scenario, its controlled variations (one risk mechanism RS1-RS6 or "
        "one presentation change SD1-SD5 at a time) and the two sides of a minimal-flip pair shows how its "
        "behaviour follows context. The paper scores the generated action with a three-judge panel on action "
        "type, action safety and risk detection; `rationale` and the sketches are what the judges read."),
    out_of_scope=(
        "Training or tuning a model on these rows and then reporting results on them. Using `pair_label` as "
        "ground truth for real deployments or as a certificate that an agent is safe. Prompt-injection or other "
        "deliberate-attack evaluation: the seeds are R-Judge's unintended-risk trajectories only. Mining the "
        "scenarios for ways to cause harm."),
    limitations=(
        "The benchmark grows from 157 R-Judge trajectories (152 survive the final filters in the paper), so "
        "rows sharing a `seed_id` are not independent: cluster uncertainty by seed. A fixed prefix measures the "
        "next decision, not how errors compound over a full rollout. Variations, NSP/SP labels, edit grades and "
        "pair rewrites were written and reviewed by LLMs; humans audited the taxonomy and the judges, not "
        "every row, so some labels are wrong. Only one mechanism changes at a time, and multi-mechanism or "
        "intended-attack scenarios are not covered. Many rows are unpaired (no counterpart was generated, "
        "or it failed review). English only."),
    bias=(
        "The domain mix follows R-Judge's unintended-risk records (Program 48, Application 39, IoT 30, Web 23, "
        "Finance 17 seeds), so software and app scenarios outweigh finance. What counts as risky, and which "
        "rows are NSP or SP, reflects the few frontier models that generated and reviewed the rows; some of "
        "their vendors also make evaluated models (the paper tests its judges for self-preference). The "
        "settings are mostly English-language consumer and office software."),
    personal_information=(
        "The trajectories are written scenarios, not logs of real users. Several deliberately hold invented "
        "personal data (names, e-mail addresses, phone numbers, customer lists, health or account details), "
        "because exposing or sharing it is the risk under test. This project adds no real personal data; "
        "the rows were not screened for real data beyond what R-Judge's authors did."),
    collection=(
        "Seeds: the 157 R-Judge trajectories with attack_type `unintended`, read from a pinned download. "
        "Construction with LLM prompts P1-P9: tag each seed's risk-trigger and execution steps; cut "
        "at-trigger and pre-execution prefixes; ask which mechanisms (RS1-RS6) and difficulty dimensions "
        "(SD1-SD5) apply; write one controlled variation per applicable dimension; review each variation with "
        "three models; label every item NSP or SP and grade how hard its opposite version would be; rewrite "
        "pairable items into their minimal-flip counterparts; review the pairs with three models; drop "
        "malformed or underspecified requests. The prompts' sha256 and the model ids are in the provenance "
        "section."),
    task_categories=("text-generation",),
    tags=("agent-safety", "llm-agents", "tool-use", "risk-awareness", "contextual-safety", "minimal-pairs",
          "benchmark"),
    annotations_creators=("machine-generated",),
    source_datasets=("extended|other-r-judge",),
)

CITATIONS = (
    """@misc{aura_eval_2026,
  title = {{AURA-Eval}: Evaluation Framework for Acting Under Risk Awareness in {LLM} Agent Trajectories},
  author = {{Anonymous}},
  year = {2026},
  note = {the paper this repository reproduces; its text (an anonymous version) names no authors and no
          public address, and its year is that of the latest work it cites}
}""",
    """@inproceedings{yuan2024rjudge,
  title = {{R-Judge}: Benchmarking Safety Risk Awareness for {LLM} Agents},
  author = {Yuan, Tongxin and He, Zhiwei and Dong, Lingzhong and Wang, Yiming and Zhao, Ruijie and Xia, Tian and
            Xu, Lizhen and Zhou, Binglin and Li, Fangqi and Zhang, Zhuosheng and Wang, Rui and Liu, Gongshen},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2024},
  pages = {1467--1490},
  year = {2024},
  publisher = {Association for Computational Linguistics},
  doi = {10.18653/v1/2024.findings-emnlp.79},
  url = {https://aclanthology.org/2024.findings-emnlp.79/}
}""",
)
