"""Small report notebooks for the render and job-server tests: a tagged `parameters` cell, then code cells."""
from __future__ import annotations

import nbformat


def report_notebook(parameters: str, *cells: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(source) for source in cells)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb
