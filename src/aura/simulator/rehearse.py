"""`aura rehearse`: a config's whole run, at its full size, against the simulated provider, before a dollar is spent.

What it does, in order:

1. Reads the config (``extends`` merged, ``--overlay`` files merged over it: a local copy of the data, for
   instance) and derives the rehearsal's own config: every output folder (``paths``: interim, processed,
   results, figures, logs and the response cache) moves under the rehearsal's folder (default
   ``rehearsal/<name>/``), every endpoint points at a simulated server on 127.0.0.1 (one per endpoint, speaking
   its ``provider``'s documented behaviours, Batch APIs included) with a key that is no key, and a
   ``rehearsal:`` section marks it (every provenance sidecar and reproduction line then says REHEARSAL). The
   families, models, stages, shards, judges and batch settings are the config's own.
2. Starts the servers on the ports the folder's ``servers.json`` keeps (so the endpoints' identities, and with
   them the cache keys, are the same when a killed rehearsal is run again), each answering through the
   families' planters (aura.simulator.plant): the paper's numbers are the expected values of the statistics.
3. Runs ``snakemake --cores N <targets> --configfile <derived> --rerun-incomplete`` and measures it: wall, CPU
   and peak RSS of the workflow's processes (the largest one, and all of them summed while they run), the
   simulator's own CPU and memory, requests, disk and file count.
4. Counts the requests answered more than once across every run of the folder (``answered.txt``, one sha256 of
   the request body per answer: a resumed rehearsal that pays twice shows here), and prints each family's
   planted-truth table: the rows it planted, each verdict's count among them, the count of "not reproduced"
   expected by chance, and the rows it could not plant with the reason.
5. Sets `aura estimate`'s projection beside the request stream the run sent (aura.simulator.stream;
   ``estimate_stream.csv``) and names every line that differs by more than 10%.

Everything is written under the folder; ``rehearsal.json`` holds the last run's figures.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import importlib
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import yaml

from ..errors import UserError
from . import stream
from .answers import BATCH_LINE

KEY_ENV = "AURA_REHEARSAL_KEY"  # the simulated endpoints' key variable: set to a placeholder, never a real key
OUTPUT_PATHS = ("interim", "processed", "results", "figures", "cache", "logs")



def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", required=True, help="the config to rehearse (e.g. config/paper.yaml)")
    p.add_argument("--overlay", action="append", default=[],
                   help="a YAML file merged over the config first (e.g. local copies of the data); repeatable")
    p.add_argument("--folder", default=None, help="where the rehearsal writes (default rehearsal/<config name>)")
    p.add_argument("--cores", type=int, default=8, help="snakemake --cores (default 8)")
    p.add_argument("--seed", type=int, default=None, help="the simulated models' draws (default: the config's seed)")
    p.add_argument("--deviate", action="append", default=[],
                   help="plant a deviation, family:model:column=+points (e.g. mybench:gpt-5:TS=+15); repeatable")
    p.add_argument("--target", action="append", default=[], help="snakemake targets (default: all)")
    p.add_argument("--dry", action="store_true", help="write the derived config and stop")


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, _deep_merge, read_raw
    from .plant import Deviation, Plan

    try:
        raw = read_raw(args.configfile)
        for overlay in args.overlay:
            raw = _deep_merge(raw, read_raw(overlay))
        plan = Plan(seed=int(raw.get("seed", 42) if args.seed is None else args.seed),
                    deviations=tuple(Deviation.parse(d) for d in args.deviate))
    except (ConfigError, ValueError) as exc:
        print(f"aura rehearse: {exc}", file=sys.stderr)
        return 2
    folder = Path(args.folder or Path("rehearsal") / str(raw.get("name") or Path(args.configfile).stem))
    folder.mkdir(parents=True, exist_ok=True)
    ports = _ports(folder / "servers.json", raw)
    from ..config import validate_config

    try:
        derived = derive(raw, folder, ports, plan, source=str(args.configfile))
        config = validate_config(derived, source=f"rehearsal of {args.configfile}")
    except (ConfigError, ValueError) as exc:
        print(f"aura rehearse: {exc}", file=sys.stderr)
        return 2
    path = folder / "config.yaml"
    path.write_text("# written by `aura rehearse`: a dress rehearsal, simulated models\n"
                    + yaml.safe_dump(derived, sort_keys=False, allow_unicode=True), encoding="utf-8")
    if args.dry:
        print(f"aura rehearse: {path}")
        return 0
    ledger = Ledger(folder / "answered.txt")
    with Servers(config, plan, ports, ledger) as servers:
        figures = _run_workflow(path, args.cores, args.target or ["all"])
        figures["simulator_cpu_s"] = round(servers.cpu_s(), 1)
        figures["simulator_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        figures["requests"] = ledger.answered
        figures["unplanted_requests"] = servers.unplanted()
    figures["answered_twice"] = ledger.twice()
    figures.update(_disk(folder))
    figures.update(job_cpu(Path(config.paths["logs"])))
    figures["families"] = planted_tables(config)
    rows = stream.compare(config, stream.projected_lines(derived, str(args.configfile), OUTPUT_PATHS),
                          stream.stream_calls(Path(config.paths["logs"])))
    stream.write(rows, folder / "estimate_stream.csv")
    figures["estimate"] = stream.summary(rows)
    (folder / "rehearsal.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    for line in report_lines(figures) + stream.report_lines(rows):
        print(line)
    return int(figures["returncode"] != 0)


# --- the derived config ------------------------------------------------------------------------------------------
def derive(raw: dict, folder: Path, ports: dict, plan, source: str) -> dict:
    """The rehearsal's config: outputs under ``folder``, endpoints at the simulated servers, marked."""
    out = copy.deepcopy(raw)
    out["name"] = f"{raw.get('name') or 'aura'}-rehearsal"
    paths = dict(out.get("paths") or {})
    defaults = {"interim": "data/interim", "processed": "data/processed", "results": "results",
                "figures": "figures", "cache": "cache/llm", "logs": "logs"}
    for key in OUTPUT_PATHS:
        paths[key] = str(folder / (paths.get(key) or defaults[key]))
    out["paths"] = paths
    for name, ep in out["endpoints"].items():
        if ep.get("kind") == "local":  # an embedded model's endpoint: simulated as a plain OpenAI-compatible one,
            ep.update(structured_output="json_schema", grammar="none")  # each model under its own name
            ep.pop("local", None)
            for model in out["models"].values():
                if model.get("endpoint") == name:
                    model["model_id"] = None
        ep.update(kind="openai", base_url=f"http://127.0.0.1:{ports[name]}/v1", api_key_env=KEY_ENV)
        if ep.get("batch") == "anthropic":
            ep["batch_base_url"] = f"http://127.0.0.1:{ports['anthropic-batch:' + name]}"
    for model_name, model in out["models"].items():
        if "model_id" in model and model["model_id"] is None:
            model["model_id"] = model_name
    remote = sorted(f"{name}.{k}" for name, ep in out["endpoints"].items() for k in ("base_url", "batch_base_url")
                    if ep.get(k) and not str(ep[k]).startswith("http://127.0.0.1:"))
    if remote:  # by construction none; checked, since a rehearsal must never reach a provider
        raise ValueError(f"the rehearsal's endpoints would leave this machine: {', '.join(remote)}")
    llm = out.setdefault("llm", {})
    llm["require_preflight"] = False
    batch = llm.setdefault("batch", {})
    batch.update(poll_s=0.05, poll_max_s=0.2)  # the simulated batches end at once: poll at once
    out["rehearsal"] = {"source": source, "seed": plan.seed,
                        "deviate": [f"{d.family}:{d.model}:{d.column}={d.points:+g}" for d in plan.deviations]}
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports(path: Path, raw: dict) -> dict:
    """One port per endpoint (and per Anthropic batch endpoint), kept in ``path`` so a rerun uses the same."""
    ports = json.loads(path.read_text()) if path.is_file() else {}
    for name, ep in (raw.get("endpoints") or {}).items():
        ports.setdefault(name, _free_port())
        if ep.get("batch") == "anthropic":
            ports.setdefault("anthropic-batch:" + name, _free_port())
    path.write_text(json.dumps(ports, indent=1) + "\n")
    return ports


# --- the simulated servers -----------------------------------------------------------------------------------------
class Ledger:
    """Every answer's request hash, appended to a file kept across runs: what was answered twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.before = Counter(path.read_text().split()) if path.is_file() else Counter()
        self.now: Counter = Counter()
        self._lock = threading.Lock()
        self._file = path.open("a", encoding="utf-8", buffering=1)  # line by line: a killed run keeps its lines

    @property
    def answered(self) -> int:
        return sum(self.now.values())

    def record(self, body: dict) -> None:
        """One answer: a batch line by its custom_id (the request's cache key: a repeated sample of one prompt
        is another), a live call by its body (a repeated sample differs there, by its seed or its history)."""
        line = BATCH_LINE.get()
        digest = hashlib.sha256(("batch:" + line if line else json.dumps(body, sort_keys=True)).encode()).hexdigest()[:32]
        with self._lock:
            self.now[digest] += 1
            self._file.write(digest + "\n")

    def twice(self) -> int:
        """Answers beyond the first of the same request, over this run and every earlier run of the folder."""
        self._file.close()
        total = self.before + self.now
        return sum(n - 1 for n in total.values() if n > 1)


class Servers:
    """One simulated server per endpoint (its provider's profile), plus Anthropic's batch API where used."""

    def __init__(self, config, plan, ports: dict, ledger: Ledger) -> None:
        from .plant import Responder

        self.config, self.ports, self.ledger = config, ports, ledger
        planters = family_planters(config, plan)
        self.responders = {}
        for name in config.endpoints:
            names = {m.model_id: m.name for m in config.models.values() if m.endpoint == name}
            self.responders[name] = Responder(planters, names)
        self.servers: list = []

    def _answer(self, name: str):
        responder = self.responders[name]

        def answer(body: dict, text: str | None = None):
            self.ledger.record(body)
            return responder(body, text)
        return answer

    def __enter__(self) -> "Servers":
        from .batch_anthropic import FakeAnthropicBatchServer
        from .profiles import PROFILES
        from .server import FakeOpenAIServer

        for name, ep in self.config.endpoints.items():
            profile = ep.provider if ep.provider in PROFILES else "ideal"
            try:
                srv = FakeOpenAIServer(port=self.ports[name], profile=profile, responder=self._answer(name),
                                       keep=64, lean=True).start()
            except OSError as exc:
                raise UserError(f"aura rehearse: port {self.ports[name]} of endpoint {name} is taken ({exc}): "
                                 "stop what holds it, or remove servers.json to draw new ports") from None
            self.servers.append(srv)
            if ep.batch_api == "anthropic":
                batch = FakeAnthropicBatchServer(port=self.ports["anthropic-batch:" + name],
                                                 responder=self._answer(name), lean=True)
                batch.set_plan(in_progress_polls=0)
                self.servers.append(batch.start())
        return self

    def cpu_s(self) -> float:
        """The simulator's CPU: this process's (the servers' threads; the main thread only waits on Snakemake)."""
        use = resource.getrusage(resource.RUSAGE_SELF)
        return use.ru_utime + use.ru_stime

    def unplanted(self) -> int:
        return sum(r.unplanted for r in self.responders.values())

    def __exit__(self, *exc) -> None:
        for srv in self.servers:
            srv.stop()


def family_planters(config, plan) -> list:
    """The enabled families' planters (their manifests' ``rehearsal`` factories)."""
    from ..families import enabled
    from ..pipeline.stage import load_target

    return [load_target(f.rehearsal)(config, plan) for f in enabled(config.raw) if f.rehearsal]


# --- the run and its figures ---------------------------------------------------------------------------------------
def _run_workflow(configfile: Path, cores: int, targets: list[str]) -> dict:
    """Snakemake as a child, this process the subreaper of everything it starts (Linux): a process whose parent
    exits without waiting for it (a notebook kernel, a job's tool server) is reaped here, so the children's
    CPU and peak RSS count every process of the run."""
    env = {**os.environ, KEY_ENV: "rehearsal-no-key"}
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), *targets, "--configfile", str(configfile),
           "--rerun-incomplete"]
    _subreaper()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env)
    tree = TreeMemory().start()
    rc = None
    while True:  # reap Snakemake and every orphan handed to us, until none is left
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == proc.pid:
            rc = os.waitstatus_to_exitcode(status)
            proc.returncode = rc
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"command": " ".join(cmd), "returncode": rc, "wall_s": round(time.monotonic() - start, 1),
            "workflow_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_mb": round(after.ru_maxrss / 1024, 1),  # the largest single process of the workflow
            "peak_tree_rss_mb": tree.stop()}  # this process and all it started, summed, at its peak


class TreeMemory:
    """The resident memory of this process and every descendant, summed, sampled every ``every`` seconds in a
    thread: the memory the run needs at once (simulator, Snakemake, jobs, their servers and kernels)."""

    def __init__(self, every: float = 1.0) -> None:
        self.every, self.peak = every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "TreeMemory":
        self._thread.start()
        return self

    def _loop(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass  # ended between the listing and the reading
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(self.peak / 2 ** 20, 1)


def _subreaper() -> None:
    """prctl(PR_SET_CHILD_SUBREAPER, 1) where the C library offers it; elsewhere orphans go uncounted."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def job_cpu(logs: Path) -> dict:
    """The CPU of the jobs that asked models, from their summary files (aura.pipeline.summary; each job's own CPU
    and its waited-for children's, aura.llm.accounting): per request answered by a server, the pipeline's own cost
    of a request (client, cache, accounting, the stage's work on the item), the simulator's answers costing nothing."""
    from ..pipeline.summary import collect

    stages = collect(logs).values()
    jobs, calls = sum(t["llm_jobs"] for t in stages), sum(t["calls"] for t in stages)
    cpu = sum(t["cpu_s"] for t in stages)
    return {"llm_jobs": jobs, "llm_job_calls": calls, "llm_job_cpu_s": round(cpu, 1),
            "cpu_ms_per_request": round(1000 * cpu / calls, 2) if calls else None}


def _disk(folder: Path) -> dict:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"files": len(files), "disk_mb": round(sum(p.stat().st_size for p in files) / 2 ** 20, 1)}


def planted_tables(config) -> dict:
    """Per family with a verdict table: the planted rows' outcome counts, the count of "not reproduced" expected
    by chance, and the rows not planted with their reasons."""
    import pandas as pd

    from ..families import enabled
    from ..pipeline.layout import layout
    from ..pipeline.stage import load_target
    from ..stats.reproduction import load_folder

    keys = layout(config.raw)
    out = {}
    for family in enabled(config.raw):
        if not (family.rehearsal and family.reproduction):
            continue
        path = Path(keys[family.reproduction])
        if not path.is_file():
            out[family.name] = {"missing": str(path)}
            continue
        module = importlib.import_module(family.rehearsal.split(":")[0])
        reference = getattr(module, "REFERENCE", Path(module.__file__).parent / "reference")
        ref, margins, _ = load_folder(reference)
        why = load_target(f"{module.__name__}:plantable")(ref, config)
        verdicts = pd.read_csv(path)
        planted = [i for i, w in enumerate(why) if w is None]
        outcomes = Counter(verdicts.loc[planted, "verdict"]) if planted else Counter()
        out[family.name] = {"rows": len(verdicts), "planted": len(planted),
                            "outcomes": dict(outcomes), "expected_not_reproduced": margins.alpha,
                            "not_planted": dict(Counter(w for w in why if w is not None)),
                            "not_reproduced_rows": [" / ".join(map(str, r)) for r in verdicts.loc[planted].query(
                                "verdict == 'not reproduced'")[["table", "row", "column"]].itertuples(index=False)]}
    return out


def report_lines(fig: dict) -> list[str]:
    lines = [f"aura rehearse: {fig['command']}: rc {fig['returncode']}, {fig['wall_s']} s wall, "
             f"{fig['workflow_cpu_s']} CPU-s workflow + {fig['simulator_cpu_s']} CPU-s simulator, peak RSS "
             f"{fig['peak_tree_rss_mb']} MB all processes together ({fig['peak_rss_mb']} MB the largest job, "
             f"{fig['simulator_rss_mb']} MB the simulator), {fig['requests']} requests answered ({fig['unplanted_requests']} by no "
             f"planter), {fig['answered_twice']} answered twice, {fig['files']} files, {fig['disk_mb']} MB"]
    if fig.get("cpu_ms_per_request") is not None:
        lines.append(f"aura rehearse: the jobs that asked models: {fig['llm_jobs']} jobs, {fig['llm_job_calls']} "
                     f"calls, {fig['llm_job_cpu_s']} CPU-s, {fig['cpu_ms_per_request']} ms of CPU per request")
    for name, t in fig["families"].items():
        if "missing" in t:
            lines.append(f"aura rehearse: {name}: no verdict table ({t['missing']})")
            continue
        counts = ", ".join(f"{v} {k}" for k, v in sorted(t["outcomes"].items()))
        lines.append(f"aura rehearse: {name}: {t['planted']} of {t['rows']} reported numbers planted: {counts}; "
                     f"not reproduced expected by chance: at most {t['expected_not_reproduced']:g} of a run "
                     f"(family-wise)" + (f"; not reproduced: {'; '.join(t['not_reproduced_rows'])}"
                                         if t["not_reproduced_rows"] else ""))
        for reason, n in t["not_planted"].items():
            lines.append(f"aura rehearse: {name}: not planted ({n}): {reason}")
    return lines
