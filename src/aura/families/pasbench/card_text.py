"""What PaSBench's dataset card says of the benchmark (`aura export-dataset`): its uses, limits, biases,
personal information and collection (after the PaSBench paper's sections 3.1-3.2 and its Limitations, in
this project's words), the front-matter categories, and its citation."""
from __future__ import annotations

from aura.export_dataset import CardText

CARD = CardText(
    uses=(
        "Measuring proactive risk awareness: a (multimodal) model is shown a time-stamped observation log of "
        "a person's day (`pasbench_text`) or 1-4 images of a scene (`pasbench_image`) that stop just before an "
        "incident, and is expected to warn of the danger without being asked. A judge compares the model's "
        "answer with `risk_reason`; repeated answers per item give the paper's robustness (every try warns) "
        "beside its accuracy. The two sets are scored separately."),
    out_of_scope=(
        "Authoritative safety advice: the items test whether a model notices a risk, not what the right "
        "response is. Building or tuning systems that watch real people without their consent. Training on "
        "the items and then reporting results on them. Judging how severe a risk is or penalising needless "
        "warnings: the benchmark does not score either."),
    limitations=(
        "416 items (288 logs, 128 image sequences) over 288 knowledge points; an image item usually has 2-3 "
        "sub-images and a log 4-8 entries, so longer or more complex observation sequences are untested. "
        "Severity and the fit of the warning are not scored, so a model that warns about everything is not "
        "penalised. Scoring rests on an LLM judge. Upstream's images come as a separate archive; an image "
        "split is present only when the run read them. Items of a `constructed` split were written by "
        "this project's pipeline with model review, without the paper's human annotators."),
    bias=(
        "The safety knowledge comes from Chinese safety-education books and Chinese government websites, "
        "extracted and cross-checked by three Chinese annotators, so the risks and the behaviour counted as "
        "safe follow those sources' norms. Logs were written by DeepSeek-R1 and images drawn by GPT-4o's image "
        "generation, and inherit how those models depict people, homes and places. The five domains (home, "
        "outdoor, sports, food, disasters and emergencies) overlap and are not equally filled."),
    personal_information=(
        "The people in the items are fictional: names, genders and places of residence were drawn at random, "
        "occupations and hobbies written by a model, and the images are generated, not photographs. A log "
        "still reads like close observation of one person's day (where they are, what they do), which is the "
        "kind of monitoring data a deployed system would hold about real people. No real personal data is "
        "known to be included."),
    collection=(
        "Per the PaSBench paper: annotators extracted 288 safety knowledge points from safety-education books "
        "and official websites, each kept only if a second annotator agreed. For images, GPT-4o drafted 1-4 "
        "prompts per knowledge point, annotators revised them, GPT-4o's image model drew the images one after "
        "another, and annotators checked each and cross-checked each item. For logs, DeepSeek-R1 wrote a "
        "person's profile and an observation log ending before the incident; annotators checked and revised "
        "each. This export reads the Hugging Face release Youliang/PaSBench (pinned), or the project's demo "
        "items, plus any items the run constructed."),
    task_categories=("text-generation", "image-text-to-text"),
    tags=("safety", "proactive-safety", "risk-awareness", "multimodal", "everyday-risks", "benchmark"),
    annotations_creators=("expert-generated", "machine-generated"),
    source_datasets=("extended|Youliang/PaSBench",),
)

CITATION = """@inproceedings{yuan2025pasbench,
  title = {Towards Evaluating Proactive Risk Awareness of Multimodal Language Models},
  author = {Yuan, Youliang and Jiao, Wenxiang and Xie, Yuejin and Shen, Chihao and Tian, Menghan and
            Wang, Wenxuan and Huang, Jen-tse and He, Pinjia},
  booktitle = {Advances in Neural Information Processing Systems 38 (NeurIPS 2025), Datasets and Benchmarks Track},
  year = {2025},
  eprint = {2505.17455},
  archivePrefix = {arXiv},
  url = {https://arxiv.org/abs/2505.17455},
  note = {PaSBench; data: https://huggingface.co/datasets/Youliang/PaSBench}
}"""
