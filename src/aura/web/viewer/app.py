"""The served viewer: a Starlette app over one `RunData`, pages rendered by `pages.Pages`.

The files pages show (images) are served from the run's media folders only (`RunData.media`), one
Starlette `StaticFiles` each at `/media/<n>/`: it refuses a path that leaves its folder (`..`, a symbolic
link pointing out) with a 404, as it does a missing file. The Host / token check of `aura.web.serve`
wraps the whole app, these files included."""
from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .data import RunData
from .pages import Links, Pages

STATIC = Path(__file__).parent / "static"


def make_app(data: RunData) -> Starlette:
    pages = Pages(data, Links.of(data, static=False))

    def _html(body: str | None, what: str):
        return HTMLResponse(body) if body is not None else PlainTextResponse(f"not found: {what}", status_code=404)

    async def index(request):
        return HTMLResponse(pages.index())

    async def rows(request):
        params = dict(request.query_params)
        family = params.get("family") or (data.families[0] if data.families else "")
        return _html(pages.rows(family, params), f"family '{family}'")

    async def item(request):
        family, key = request.path_params["family"], request.path_params["key"]
        return _html(pages.item(family, key), f"{family} item '{key}'")

    async def tables(request):
        return HTMLResponse(pages.tables())

    return Starlette(routes=[
        Route("/", index),
        Route("/rows", rows),
        Route("/tables", tables),
        Route("/{family}/item/{key:path}", item),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        *(Mount(f"/media/{n}", StaticFiles(directory=folder)) for n, folder in enumerate(data.media)),
    ])
