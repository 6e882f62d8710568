"""The paper's roster (`pasbench.roster`): which of the paper's models run, which cannot, which our copy
of the paper does not name. A model cannot run when its entry under `models:` carries `unavailable`
(the reason: an id retired, or an id that now serves another model); it stays out of `evaluated`.
"""
from __future__ import annotations

from .settings import evaluated, section


def problems(raw: dict) -> list[str]:
    """One line per roster entry the config contradicts (unknown, unavailable yet evaluated, neither)."""
    models, run, out = raw.get("models", {}), set(evaluated(raw)), []
    for m in (section(raw).get("roster") or {}).get("models") or []:
        why = (models.get(m) or {}).get("unavailable")
        if m not in models:
            out.append(f"pasbench.roster.models: unknown model '{m}' (not under models:)")
        elif why and m in run:
            out.append(f"pasbench.evaluated: '{m}' is marked unavailable ({why})")
        elif not why and m not in run:
            out.append(f"pasbench.roster.models: '{m}' is neither in pasbench.evaluated nor marked unavailable")
    return out


def summary(raw: dict) -> str:
    """'roster: R run, U unavailable (names), K not named in our copy of the paper (of T)'; '' without a roster."""
    roster = section(raw).get("roster") or {}
    names, total = roster.get("models") or [], roster.get("paper_total")
    if not names:
        return ""
    models = raw.get("models", {})
    gone = [m for m in names if (models.get(m) or {}).get("unavailable")]
    text = f"roster: {len(names) - len(gone)} run, {len(gone)} unavailable ({', '.join(gone) or 'none'})"
    if total is not None:
        text += f", {max(0, total - len(names))} not named in our copy of the paper (paper: {total})"
    return text
