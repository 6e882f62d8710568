"""Render one report notebook with papermill, in an IPython kernel inside this process.

`python -m aura render NOTEBOOK EXECUTED -p name value ...` is what every `render_<name>` rule runs.

The kernel: ipykernel's in-process kernel (`ipykernel.inprocess`), the IPython kernel a separate kernel process
runs, without the process: no interpreter to start, no ZMQ ports, no kernel_info handshake, and the modules the
notebooks import (pandas, matplotlib, aura.notebook_helpers) are those already loaded here (in a job the job
server forks, loaded once per run: `aura.pipeline.jobserver`). The executed notebook holds the same outputs,
execution counts and kernel `language_info` as one run by a kernel process; the figures and tables are the same
bytes (tests/core/test_render.py runs one notebook both ways). The adapters to ipykernel's in-process classes:
the streams of a cell carry that cell's request as their parent (ipykernel sets it on `sys.stdout` before the
kernel swaps in its own streams, so nbclient dropped every printed line); the client's / manager's methods take
the arguments nbclient passes; and pandas sees a kernel, as in a kernel process (kernel_pandas_options, the
shell's class name). `kernel="process"` runs the notebook in a kernel process as before; a kernel process that
dies while starting is retried:

Why not `python -m papermill` directly: jupyter_client picks the kernel's five TCP ports by
binding to port 0 and releasing the socket, and only then starts the kernel. Two notebooks that
start at the same moment (`snakemake --cores N`) can therefore be handed the same port; the
second kernel dies with "Address already in use" before it answers `kernel_info`, and papermill
raises RuntimeError("Kernel died before replying to kernel_info"). No cell has run at that point,
so starting the notebook again is safe: a new kernel draws new ports.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from ..errors import UserError

# What nbclient/jupyter_client raise when the kernel never became ready. A failing cell raises
# papermill's PapermillExecutionError instead, which is never retried.
_STARTUP_MESSAGES = ("Kernel died before replying to kernel_info", "Kernel didn't respond in")


def is_kernel_startup_failure(exc: BaseException) -> bool:
    return isinstance(exc, (RuntimeError, TimeoutError)) and any(m in str(exc) for m in _STARTUP_MESSAGES)


KERNELS = ("in-process", "process")


@lru_cache(maxsize=None)
def in_process_kernel_manager() -> type:
    """A KernelManager class (nbclient's `kernel_manager_class`) whose kernel is ipykernel's in-process kernel,
    adapted to nbclient (see the module's docstring). Built on first use: importing ipykernel costs a second."""
    from ipykernel.inprocess.blocking import BlockingInProcessKernelClient
    from ipykernel.inprocess.ipkernel import InProcessInteractiveShell, InProcessKernel
    from ipykernel.inprocess.manager import InProcessKernelManager
    from traitlets import default

    class ZMQInProcessShell(InProcessInteractiveShell):
        """The kernel's shell. Its name says "zmq" as a kernel process's shell's (ZMQInteractiveShell) does: pandas
        tells a notebook from a terminal by that word in the shell's type (pandas.io.formats.console), and in a
        terminal shortens a wide frame's text to the console's width."""

    class Kernel(InProcessKernel):
        @default("shell_class")
        def _default_shell_class(self):
            return ZMQInProcessShell

        def __init__(self, **traits):
            super().__init__(**traits)
            if "pandas" in sys.modules:  # imported before this kernel (in the job server): see below
                kernel_pandas_options()

        async def execute_request(self, stream, ident, parent):
            with self._redirected_io():  # the cell's output streams, told which request they answer
                for out in (self.stdout, self.stderr):
                    out.set_parent(parent)
                await super(InProcessKernel, self).execute_request(stream, ident, parent)

    class Client(BlockingInProcessKernelClient):
        def wait_for_ready(self, timeout=None):
            """An in-process kernel is ready once made (ipykernel's own wait polls for seconds and prints)."""

    class Manager(InProcessKernelManager):
        def start_kernel(self, **kwargs):
            self.kernel = Kernel(parent=self, session=self.session)

        def client(self, **kwargs):
            kwargs["kernel"] = self.kernel
            kwargs.setdefault("parent", self)
            kwargs.setdefault("session", self.session)
            return Client(**kwargs)

        def shutdown_kernel(self, now=False, restart=False):
            if self.kernel is not None:
                import atexit

                shell = self.kernel.shell
                self.kernel.iopub_thread.stop()
                # what IPython does for a shell when the interpreter exits (its namespace cleared, its history
                # session closed and the history's thread stopped), done when the kernel ends: a process that
                # renders several notebooks no longer keeps every shell, with its namespace and thread, until exit
                atexit.unregister(shell.atexit_operations)
                shell.atexit_operations()
                # the shell is a process-wide singleton: gone with its kernel, so that after a render this
                # process is no longer "inside IPython" (get_ipython() is None again; inspect_ai, for one, asks)
                type(shell).clear_instance()
                self.kernel = None

    return Manager


def kernel_pandas_options() -> None:
    """The display option pandas fixes when imported (pandas.core.config_init), as an import inside this kernel
    would have fixed it: in a kernel a frame's text shows up to 20 columns, in a terminal as many as fit the
    console. A notebook run in a kernel process imports pandas there; a job server imported it before any kernel."""
    import pandas

    # pandas.core.config_init: max_columns = 0 if is_terminal() else 20, where is_terminal() is False when
    # get_ipython() has a `kernel` (it does in this kernel's cells; tests/core/test_jobserver.py compares the text)
    pandas.set_option("display.max_columns", 20)


RENDER_NICE = 19  # a render's CPU priority: the lowest, below the rest of the run (os.nice increment)


def yield_the_cpu(increment: int = RENDER_NICE) -> None:
    """Lower this process's CPU priority. A render runs at nice 19: on a small machine the run's renders come
    while the embedded model's server is still answering other jobs' calls, which are the run's critical path
    (in a 2-core default run, a judge job beside 13 renders got 13 tokens/s; the judge job before them, 39).
    At nice 19 a render beside one of the server's threads gets about 1.5% of that core (the kernel's weights:
    15 against 1024), at nice 10 about 10%, and the server's threads wait for each other at every step. The figures
    are the same; a render only waits for a free core."""
    import os

    try:
        os.nice(increment)
    except OSError:
        pass


def render(notebook: Path, executed: Path, parameters: dict[str, str], *, attempts: int = 3,
           execute: Callable[..., object] | None = None, wait_s: float = 1.0, kernel: str = "in-process") -> int:
    """Execute `notebook` into `executed` with `parameters`; return the attempt that succeeded.

    `execute` defaults to `papermill.execute_notebook`; `kernel` is "in-process" (this process) or "process"
    (a kernel process per notebook). A kernel-startup failure is retried up to `attempts` times in all, any
    other error propagates at once.
    """
    if kernel not in KERNELS:
        raise ValueError(f"render: kernel {kernel!r} is not one of {KERNELS}")
    if execute is None:
        import papermill

        execute = papermill.execute_notebook
    options = {"kernel_manager_class": in_process_kernel_manager()} if kernel == "in-process" else {}
    for attempt in range(1, attempts + 1):
        try:
            source = notebook if isinstance(notebook, dict) else str(notebook)  # a built notebook (draw_notebook)
            execute(source, str(executed), parameters=parameters, progress_bar=False, **options)
            return attempt
        except Exception as exc:  # noqa: BLE001 - filtered right below
            if not is_kernel_startup_failure(exc) or attempt == attempts:
                raise
            print(f"render {notebook}: kernel failed to start (attempt {attempt}/{attempts}: {exc}); "
                  f"starting a new kernel", file=sys.stderr, flush=True)
            time.sleep(wait_s * attempt)
    raise AssertionError("unreachable")


OUTPUT_PARAMETERS = ("out_pdf", "out_png", "tables_dir")


def draw_notebook(draw: str, parameters: dict[str, str]):
    """The notebook a ``draw`` report renders (a family's function instead of a notebook of its own): a parameters
    cell with every parameter, then one cell calling aura.notebook_helpers.draw_report with the inputs (the
    parameters that are not output paths) by name. Executed, it is kept in the logs as any report's."""
    import nbformat

    names = list(parameters)
    inputs = ", ".join(f"{n!r}: {n}" for n in names if n not in OUTPUT_PARAMETERS)
    outs = ", ".join(f"{n}={n}" for n in OUTPUT_PARAMETERS if n in parameters)
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("\n".join(f"{n} = {parameters[n]!r}" for n in names),
                                          metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(f"from aura.notebook_helpers import draw_report\n\n"
                                          f"draw_report({draw!r}, {{{inputs}}}, {outs})")]
    return nb


def write_sidecars(notebook: Path, parameters: dict[str, str], outputs: list[str], config_hash: str | None) -> None:
    """A provenance sidecar beside each output of a render (aura.provenance.render_provenance): the notebook, the
    input files among its parameters (a parameter naming an existing file that is not an output), git, the config
    hash (the Snakefile computes it once: reading and validating the config in every render cost 0.46 s)."""
    from ..provenance import render_provenance, write_provenance

    if not outputs:
        return
    from ..notebook_helpers import files_of

    made = {str(Path(o)) for o in outputs}
    named = {f"{k}[{i}]" if v.startswith("[") else k: str(f) for k, v in parameters.items()
             for i, f in enumerate(files_of(v))}  # a per-model input: each model's file
    inputs = {k: v for k, v in named.items() if Path(v).is_file() and str(Path(v)) not in made}
    prov = render_provenance(notebook, inputs, config_hash)
    for out in outputs:
        write_provenance(out, prov)


def parse_parameters(pairs: list[list[str]] | None) -> dict[str, str]:
    """`-p name value` pairs as raw strings (paths stay paths; papermill's CLI would guess types)."""
    out: dict[str, str] = {}
    for name, value in pairs or []:
        if name in out:
            raise UserError(f"render: parameter {name!r} given twice")
        out[name] = value
    return out
