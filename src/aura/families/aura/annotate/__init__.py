"""AURA's human-annotation app (`python -m aura annotate`), a command this family adds to the CLI.

Annotators log in by name and label the units of a validation sample
(`aura.families.aura.stats.validation_sample`) with the judges' rubric in view, never seeing a judge's
or another annotator's label; each label is saved as soon as it is given (`store.LabelStore`, into the
CSV `paths.human_labels` names), and units whose annotators have no majority are adjudicated into a
`reference` row. `app.create_app` builds the Starlette app, `rubric` reads the rubric from the judge
prompts, `command.COMMAND` is the CLI entry (served through the core's `aura.web.serve`).
"""
