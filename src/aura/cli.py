"""`python -m aura <stage> --configfile F --in name=path ... --out name=path ...`

Every Snakemake rule calls one of these commands; rules hold no logic.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import commands
from .config import UserError, load_config
from .io import StorageFull
from .llm.errors import StageFailed, Terminated, terminate_raises
from .pipeline.context import StageContext
from .pipeline.stage_args import check_models, parse_options, parse_paths, parse_shard
from .redact import redacting_stderr, register_endpoints


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m aura", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="stage", required=True)
    from .pipeline.registry import STAGES  # every registered family's stages (a broken family: FamilyError)

    for name, stage in STAGES.items():
        sp = sub.add_parser(name, help=stage.help)
        sp.add_argument("--configfile", required=True)
        sp.add_argument("--in", dest="inputs", action="append", metavar="NAME=PATH")
        sp.add_argument("--out", dest="outputs", action="append", metavar="NAME=PATH")
        sp.add_argument("--model", help="the model this job is about")
        sp.add_argument("--judge", help="the judge model of a judge job")
        sp.add_argument("--shard", default="0/1", help="i/n: this job's shard of the items")
        sp.add_argument("--option", dest="options", action="append", metavar="KEY=VALUE",
                        help=f"stage option; this stage reads: {', '.join(sorted(stage.options)) or 'none'}")
        sp.add_argument("--calls-log", help="JSONL of per-call records (tokens, latency, cost, cache hit)")
    commands.add_parsers(sub)  # the core's commands (aura.core_commands) and the families'
    _no_abbreviations(p)
    return p


def _no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """No option is read as an abbreviation of a longer one (`--config` is not `--configfile`), in every parser:
    the stages', the commands' and their own sub-commands'."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _no_abbreviations(child)


def main(argv: list[str] | None = None) -> int:
    """Run one stage or command. A user's mistake (UserError: a config, a command line, an input file, a family's
    hook) is one line on stderr and exit status 2, whichever command raised it."""
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "command", None):
            return commands.run(args.command, args)
        config = load_config(args.configfile)
    except UserError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an install without the extra a command needs: one line naming it
        from .extras import missing_extra_line

        line = missing_extra_line(exc)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    register_endpoints(config.endpoints.values())  # a key a server echoes is redacted from the job's log and files
    with redacting_stderr():
        return _run_stage(args, config)


def _run_stage(args, config) -> int:
    try:  # a command-line mistake: one line, nothing run
        shard, n = parse_shard(args.shard)
        check_models(config, model=args.model, judge=args.judge)
        ctx = StageContext(stage=args.stage, config=config, inputs=parse_paths(args.inputs, "--in"),
                           outputs=parse_paths(args.outputs, "--out"), model=args.model, judge=args.judge,
                           shard=shard, n_shards=n, calls_log=Path(args.calls_log) if args.calls_log else None,
                           options=parse_options(args.stage, args.options))
    except UserError as exc:
        print(f"error: {args.stage}: {_one_line(exc)}", file=sys.stderr)
        return 2
    # The call log, cost and job summary are written however the stage ends (finish), then a stopped
    # job prints one line and exits non-zero with no output written, so Snakemake retries it.
    try:
        with terminate_raises():
            from .pipeline.registry import STAGES

            STAGES[args.stage].run(ctx)
    except StageFailed as exc:
        ctx.finish(str(exc))
        print(f"error: {ctx.label}: {exc}", file=sys.stderr, flush=True)
        return 1
    except StorageFull as exc:  # a full disk: one line naming the path; the call log keeps every answer paid
        ctx.finish(exc.strerror)
        print(f"error: {ctx.label}: {exc.strerror}", file=sys.stderr, flush=True)
        return 1
    except UserError as exc:  # bad config value or input file (names file and record): no output written
        ctx.finish(_one_line(exc))
        print(f"error: {ctx.label}: {_one_line(exc)}", file=sys.stderr, flush=True)
        return 2
    except (KeyboardInterrupt, Terminated) as exc:  # Ctrl-C, or SIGTERM from Snakemake or a timeout
        name = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
        ctx.finish(f"stopped by {name}")
        print(f"error: {ctx.label}: stopped by {name}; call log and summary written, no output", file=sys.stderr)
        return 143 if name == "SIGTERM" else 130
    except BaseException as exc:
        ctx.finish(f"stopped by {type(exc).__name__}: {exc}")
        raise
    ctx.finish()
    return 0
