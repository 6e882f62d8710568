"""The one build step pyproject.toml cannot say: a wheel carries copies of the repository's prompts/ and config/
inside the package (aura/_resources/), where aura.resources finds them when no checkout is around (an installed
`inspect eval aura/...`). The repository's folders stay where they are: the workflow and the docs point there,
and an editable install reads them in place (nothing is copied then)."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
RESOURCES = ("prompts", "config")  # aura.resources.FOLDERS


class BuildWithResources(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for folder in RESOURCES:
            shutil.copytree(HERE / folder, Path(self.build_lib) / "aura" / "_resources" / folder, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": BuildWithResources})
