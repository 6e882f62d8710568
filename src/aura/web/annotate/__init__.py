"""The human-annotation app (`python -m aura annotate`, paper §6, Appendix F.1.2).

Annotators log in by name, label the units of a validation sample (`aura.families.aura.stats.validation_sample`) with the
judges' rubric in view and never a judge's or another annotator's label; every label is saved the moment
it is given (`store.LabelStore`, the CSV `paths.human_labels` names); units without an annotators'
majority are adjudicated into the `reference` row. `app.create_app` builds the Starlette app,
`command` is the CLI entry (served through `aura.web.serve`).
"""
