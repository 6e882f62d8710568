"""Small report notebooks for the render and job-server tests (a tagged `parameters` cell, then code cells), and a
repository report notebook executed in this process with given parameters."""
from __future__ import annotations

from pathlib import Path

import nbformat


def report_notebook(parameters: str, *cells: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(source) for source in cells)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def execute_report(name: str, parameters: dict) -> nbformat.NotebookNode:
    """The report notebook `name` of its family, parameterised as papermill does and executed from the repository
    root (the renders' working folder)."""
    from nbclient import NotebookClient
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    from aura.families import family_of_report

    nb = parameterize_notebook(load_notebook_node(str(family_of_report(name).notebook(name))), parameters)
    root = Path(__file__).resolve().parents[1]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(root)}}).execute()
    return nb
