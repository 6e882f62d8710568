"""`python -m aura annotate`: serve the annotation app over a validation sample.

    python -m aura annotate --configfile config/my.yaml [--sample S] [--out F] [--host H --port P --token T]

The sample defaults to the validation-sample stage's output (`results/validation/sample.jsonl` under the
config's paths), the labels file to `paths.human_labels` (the file the human-validation tables read).
Loopback needs no token; another address is refused without one (`aura.web.serve`).

`COMMAND` is what the family's manifest lists under `commands`. Building the CLI's parser imports this
module, so it imports nothing heavy: the app and the config are imported when the command runs.
"""
from __future__ import annotations

import argparse
import sys

from aura.commands import Command


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", required=True)
    p.add_argument("--sample", help="validation sample JSONL (default: the validation-sample stage's output)")
    p.add_argument("--out", help="human-label CSV to write (default: paths.human_labels)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8766)
    p.add_argument("--token", help="access token; required to serve on a non-loopback address")
    p.add_argument("--adjudicators", help="comma-separated names allowed to adjudicate (default: every name)")


def run(args: argparse.Namespace) -> int:
    from aura.config import UserError, load_config
    from aura.pipeline.layout import layout
    from aura.web.serve import BindRefused, check_bind, serve

    try:
        check_bind(args.host, args.token)
        config = load_config(args.configfile)
        sample = args.sample or layout(config.raw)["validation_sample"]
        out = args.out or config.paths.get("human_labels")
        if not out:
            raise UserError(f"{args.configfile}: paths.human_labels is not set; set it or pass --out FILE.csv")
        from .app import create_app

        names = [n.strip() for n in args.adjudicators.split(",") if n.strip()] if args.adjudicators else None
        app = create_app(sample, out, names)
    except (BindRefused, UserError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"annotate: {sample} -> {out}", flush=True)
    serve(app, args.host, args.port, args.token)
    return 0


COMMAND = Command("label a validation sample in a browser (127.0.0.1); writes paths.human_labels",
                  add_arguments, run)
