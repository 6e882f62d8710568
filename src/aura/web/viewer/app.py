"""The served viewer: a Starlette app over one `RunData`, pages rendered by `pages.Pages`."""
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
    pages = Pages(data, Links(data.filters, static=False))

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
    ])
