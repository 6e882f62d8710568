"""`python -m aura view`: a browsable view of a run's produced files (every enabled family), served on
127.0.0.1 or exported as a static site from the same templates.

- `part.ViewerPart` is what a family brings (its rows, item pages, tables section, templates), named
  by its manifest's `viewer`;
- `data.RunData` reads the produced files once (found through the merged layout) into pandas frames;
- `query.query` filters, searches and paginates one family's rows (server-side);
- `app.make_app` is the Starlette app, `export.export_site` the static site, `command` the CLI entry.
"""
