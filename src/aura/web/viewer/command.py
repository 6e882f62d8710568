"""`python -m aura view`: serve the run viewer on 127.0.0.1 (or export the static site with --export DIR)."""
from __future__ import annotations

import argparse
import sys
import time
from gettext import ngettext
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", default="config/config.yaml", help="the run's config (its paths and families)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (another than loopback needs --token)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--token", help="access token (required to bind a non-loopback address)")
    p.add_argument("--export", metavar="DIR", help="write the static site to DIR instead of serving")


def run(args: argparse.Namespace) -> int:
    from ...config import UserError, load_config
    from ..serve import BindRefused, check_bind
    from .data import RunData

    try:
        # before reading a large run: the address, or the export folder (refused unless an earlier export)
        if args.export:
            from .export import check_target

            check_target(Path(args.export))
        else:
            check_bind(args.host, args.token)
        cfg = load_config(args.configfile)
        start = time.monotonic()
        data = RunData.load(cfg.raw)
    except (UserError, BindRefused, ValueError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    loaded = ", ".join(f"{f}: {len(data.frames[f])} {ngettext('row', 'rows', len(data.frames[f]))}"
                       for f in data.families) or "no produced files found"
    print(f"read the run in {time.monotonic() - start:.1f} s ({loaded})", flush=True)
    if args.export:
        from .export import export_site

        n = export_site(data, args.export)
        print(f"static site: {n} {ngettext('page', 'pages', n)} in {args.export}/ (open {args.export}/index.html)")
        return 0
    from ..serve import serve
    from .app import make_app

    serve(make_app(data), host=args.host, port=args.port, token=args.token)
    return 0
