"""Writing a statistics table: CSV written atomically beside its provenance sidecar."""
from __future__ import annotations

import pandas as pd

from ..io import atomic_write_text
from ..pipeline.context import StageContext
from ..provenance import provenance, write_provenance


def write_csv(ctx: StageContext, name: str, table: pd.DataFrame, **extra) -> None:
    """Write the stage output `name` as CSV atomically, with its provenance sidecar (rows + extra)."""
    out = ctx.outputs[name]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table), **extra}))
    atomic_write_text(out, table.to_csv(index=False))
