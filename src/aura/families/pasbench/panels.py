"""How many panels a composite image holds, read from its layout, and only where the layout leaves no doubt.

Upstream PaSBench ships each image item as one file that puts its 1-4 sub-images together. A script that
does that either leaves a plain gutter between the panels or butts same-sized panels edge to edge. Both
leave a mark that a photograph seldom has:

* a **gutter**: a strip of columns (or rows) of one plain colour running the whole height (or width),
  inside the image, not at its border;
* a **seam**: one column (or row) boundary where the picture changes abruptly along most of its length, at
  an equal division of the image (k/n of the way across, n = 2-4), since equal panels put them there.

:func:`detect` cuts the image at its gutters, or failing those at its seams, per axis; the panels are the
grid's cells, and a cell of one plain colour (the empty fourth place of a 2 x 2 grid holding 3) does not
count. It answers a number only when the evidence is unambiguous: a sharp full-length boundary that is
neither a gutter nor at an equal division, seams for two different divisions, a cut that does not run
through every band across it (no grid: a tall panel beside two stacked ones), or more than 4 panels make it
``None`` with the reason, and the count is then a person's to write (the count file). A single photograph
whose own straight edge falls exactly at the middle would read as two panels: the detector is for
composites, and the count file overrides it.

It answers "in doubt" unless the layout leaves none. Photograph-like panels are textured: their noise raises
the step between any two lines, so a seam between two butted textured panels is no sharp step in ratio to its
neighbours -- but it is still far above the other steps measured against their spread (the step is averaged
over a whole line, the noise is not). So each boundary's step is also scored as a robust z-score against all
steps of the axis (median, 1.4826 x MAD), and a step with z >= DOUBT_Z that is no sharp seam, or that no cut
explains, leaves the layout in doubt: only sharp seams and gutters make cuts. And a picture with no gutter
and no seam on either axis is in doubt too (one picture, or panels butted without a visible seam: the layout
cannot tell), never "1".

Pixel values are compared on a 0-255 scale; the thresholds are in the constants below.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Layout", "detect", "MAX_PANELS"]

MAX_PANELS = 4
PLAIN_STD = 3.0       # a line of one plain colour: its pixels' standard deviation below this (per channel)
MIN_GUTTER = 0.004    # a gutter is at least this share of the side wide (and at least 2 pixels)
SEAM_MIN = 12.0       # a seam's mean absolute step across the boundary, at least
SEAM_RATIO = 4.0      # ... and at least this many times the steps just beside it
SEAM_COVER = 0.5      # ... and a step over COVER_STEP along at least this share of the boundary
COVER_STEP = 10.0
EDGE_MARGIN = 0.05    # boundaries this close to the border are not looked at
DIVISION_TOL = 0.01   # a seam within this share of the side of k/n counts as at the division
DOUBT_Z = 8.0         # a step this many robust SDs above the axis's steps that no cut explains: in doubt


@dataclass(frozen=True)
class Layout:
    """``count``: the panels (1-4), or None when the layout does not settle it; ``how``: one line saying
    what was seen (the cuts along each axis, or why there is no count)."""
    count: int | None
    how: str


def _plain(lines: np.ndarray) -> np.ndarray:
    """Per line (axis 0 of ``lines``: line, pixel, channel), whether it is of one plain colour."""
    return (lines.std(axis=1) < PLAIN_STD).all(axis=-1)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of each run of True in ``mask``."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _gutter_cuts(lines: np.ndarray) -> tuple[int, int, list[int]]:
    """The content span (start, stop) inside any plain border, and the centres of the gutters inside it."""
    plain = _plain(lines)
    n = len(plain)
    runs = _runs(plain)
    start = runs[0][1] if runs and runs[0][0] == 0 else 0
    stop = runs[-1][0] if runs and runs[-1][1] == n else n
    if stop <= start:
        return 0, n, []
    width = max(2, int(MIN_GUTTER * n))
    cuts = [(a + b) // 2 for a, b in runs if a > start and b < stop and b - a >= width]
    return start, stop, cuts


def _steps(lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per boundary between line i-1 and i (i = 1..n-1): the mean absolute step and the share of pixels
    whose step exceeds COVER_STEP (channel-wise maximum)."""
    diff = np.abs(np.diff(lines.astype(np.int16), axis=0)).max(axis=-1)
    return diff.mean(axis=1), (diff > COVER_STEP).mean(axis=1)


def _zscores(step: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Each boundary's step as a robust z-score against the steps of boundaries lo..hi-1 (median, MAD)."""
    inner = step[max(0, lo - 1):max(lo, hi - 1)]
    if not inner.size:
        return np.zeros_like(step)
    med = float(np.median(inner))
    spread = max(1.4826 * float(np.median(np.abs(inner - med))), 0.5)
    return (step - med) / spread


def _peaks(lines: np.ndarray, start: int, stop: int) -> list[tuple[int, float, bool]]:
    """(boundary i, its z-score, whether it is a sharp seam) for every boundary inside [start, stop) that is the
    largest step within 3 lines and a sharp seam or at least DOUBT_Z robust SDs above the axis's steps."""
    step, cover = _steps(lines)
    n = stop - start
    lo, hi = start + max(3, int(EDGE_MARGIN * n)), stop - max(3, int(EDGE_MARGIN * n))
    z = _zscores(step, lo, hi)
    found = []
    for i in range(lo, hi):
        s = step[i - 1]
        if s != step[max(0, i - 3):i + 2].max():
            continue
        beside = np.concatenate([step[max(0, i - 11):max(0, i - 3)], step[i + 2:i + 10]])
        sharp = (s >= SEAM_MIN and cover[i - 1] >= SEAM_COVER and beside.size > 0
                 and s >= SEAM_RATIO * max(float(np.median(beside)), 1.0))
        if sharp or z[i - 1] >= DOUBT_Z:
            found.append((i, float(z[i - 1]), sharp))
    return found


def _seams(lines: np.ndarray, start: int, stop: int) -> list[int]:
    """Boundaries (index i: between line i-1 and i) inside [start, stop) that are seams."""
    return [i for i, _, seam in _peaks(lines, start, stop) if seam]


@dataclass(frozen=True)
class _Cuts:
    """One axis: the panels' spans, the cut positions between them, and whether they are gutters or seams."""
    spans: list[tuple[int, int]]
    cuts: list[int]
    gutters: bool
    start: int
    stop: int

    def holds(self, lines: np.ndarray, cut: int) -> bool:
        """Whether the cut runs through ``lines`` (the same axis, the pixels of one band across it)."""
        if self.gutters:
            return bool(_plain(lines[cut:cut + 1]).all())
        tol = max(2, int(DIVISION_TOL * (self.stop - self.start)))
        return any(abs(s - cut) <= tol for s in _seams(lines, self.start, self.stop))


def _axis(lines: np.ndarray, name: str) -> tuple[_Cuts | None, str]:
    """The panels' spans along one axis, and what was seen; (None, why) when it is not settled."""
    start, stop, cuts = _gutter_cuts(lines)
    if cuts:
        bounds = [start, *cuts, stop]
        return (_Cuts(list(zip(bounds[:-1], bounds[1:])), cuts, True, start, stop),
                f"{len(cuts)} gutter(s) along {name} at {cuts}")
    peaks = _peaks(lines, start, stop)
    seams = [i for i, _, seam in peaks if seam]
    n = stop - start
    tol = max(2, int(DIVISION_TOL * n))
    if not seams:
        if peaks:
            return None, _doubt(peaks, name)
        return _Cuts([(start, stop)], [], False, start, stop), f"no cut along {name}"
    fits = [k for k in range(2, MAX_PANELS + 1)
            if all(any(abs(s - (start + j * n / k)) <= tol for s in seams) for j in range(1, k))]
    fits = [k for k in fits if not any(k2 % k == 0 and k2 != k for k2 in fits)]  # 4 explains 2's seam too
    explained = {s for k in fits for s in seams for j in range(1, k) if abs(s - (start + j * n / k)) <= tol}
    stray = [s for s in seams if s not in explained]
    if len(fits) != 1 or stray:
        what = f"seams along {name} at {seams}"
        return None, (f"{what}: not at one equal division of the side" if stray or not fits else
                      f"{what}: fit divisions into {fits} panels alike")
    k = fits[0]
    bounds = [start, *(int(round(start + j * n / k)) for j in range(1, k)), stop]
    loose = [p for p in peaks if not any(abs(p[0] - b) <= tol for b in bounds[1:-1])]
    if loose:
        return None, f"{k} equal panels along {name} (seams at {bounds[1:-1]}), but " + _doubt(loose, name)
    return (_Cuts(list(zip(bounds[:-1], bounds[1:])), bounds[1:-1], False, start, stop),
            f"{k} equal panels along {name} (seams at {bounds[1:-1]})")


def _doubt(peaks: list[tuple[int, float, bool]], name: str) -> str:
    where = ", ".join(f"{i} (z {z:.0f})" for i, z, _ in peaks)
    return (f"a step along {name} at {where} stands out (robust z >= {DOUBT_Z:.0f}) but is no sharp seam or "
            "gutter the layout settles: in doubt")


def _plain_cell(cell: np.ndarray) -> bool:
    return bool((cell.reshape(-1, 3).std(axis=0) < PLAIN_STD).all())


def _not_a_grid(pixels: np.ndarray, cols: _Cuts, rows: _Cuts) -> str | None:
    """Why the cuts do not make a grid, or None: every cut must run through every band across it (a seam that
    crosses only some panels, as in a tall panel beside two stacked ones, is not a grid's). Between two plain
    cells there is nothing to see: not checked."""
    for axis, cuts, bands, lines_of in (
            ("x", cols, rows, lambda r0, r1: np.transpose(pixels[r0:r1], (1, 0, 2))),
            ("y", rows, cols, lambda c0, c1: pixels[:, c0:c1])):
        for cut in cuts.cuts:
            before = next(a for a, b in cuts.spans if b == cut)
            after = next(b for a, b in cuts.spans if a == cut)
            for b0, b1 in bands.spans:
                band = lines_of(b0, b1)
                if _plain_cell(band[before:cut]) and _plain_cell(band[cut:after]):
                    continue
                if not cuts.holds(band, cut):
                    return f"the cut at {axis}={cut} does not run through the band {b0}-{b1} across it: not a grid"
    return None


def detect(path: str | Path) -> Layout:
    """The number of panels of the composite image at ``path`` (see the module's docstring)."""
    from PIL import Image

    with Image.open(path) as img:
        pixels = np.asarray(img.convert("RGB"))
    cols, how_x = _axis(np.transpose(pixels, (1, 0, 2)), "the width")
    rows, how_y = _axis(pixels, "the height")
    if cols is None or rows is None:
        return Layout(None, how_x if cols is None else how_y)
    if not cols.cuts and not rows.cuts:
        return Layout(None, f"{how_x}; {how_y}: one picture, or panels butted without a visible seam: in doubt")
    why = _not_a_grid(pixels, cols, rows)
    if why:
        return Layout(None, f"{how_x}; {how_y}; {why}")
    cells = [pixels[r0:r1, c0:c1] for r0, r1 in rows.spans for c0, c1 in cols.spans]
    count = sum(not _plain_cell(cell) for cell in cells)
    if not 1 <= count <= MAX_PANELS:
        return Layout(None, f"{count} panels ({how_x}; {how_y}): expected 1-{MAX_PANELS}")
    blank = len(cells) - count
    return Layout(count, f"{how_x}; {how_y}" + (f"; {blank} plain cell(s) not counted" if blank else ""))
