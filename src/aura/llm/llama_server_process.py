"""The Python engine's server process: llama-cpp-python's OpenAI app, plus two things it lacks.

    python -m aura.llm.llama_server_process --lease-dir DIR [--die-with-parent PID] <llama_cpp.server args>

* Lifetime: a watchdog thread exits the process once no lease in DIR has a live holder (see
  `local_server`); `--die-with-parent` also sets PR_SET_PDEATHSIG so the kernel kills it with
  its parent (per-job servers).
* Usage report: each chat completion's answer gains the OpenAI field
  ``usage.prompt_tokens_details.cached_tokens`` (prompt tokens whose KV state was reused, not
  evaluated) and llama.cpp-style ``timings`` {prompt_n, prompt_ms, predicted_n, predicted_ms,
  total_ms}: prompt_n tokens were evaluated for the prompt, predicted_n generated tokens were fed
  back; total_ms includes sampling (grammars), templating and the prompt-cache copy. Measured
  inside the server's model lock, so concurrent requests cannot mix their figures.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import json
import threading
import time
from pathlib import Path

from .local_server import die_with_parent, watch_leases


class UsageReport:
    """Per-completion prompt/decode token counts and times, keyed by completion id."""

    def __init__(self, llama, keep: int = 1000):
        self.done: collections.OrderedDict[str, dict] = collections.OrderedDict()
        self.keep = keep
        self._current: dict | None = None
        self._eval, self._chat = llama.eval, llama.create_chat_completion
        llama.eval, llama.create_chat_completion = self.eval, self.chat

    def eval(self, tokens):
        t0 = time.perf_counter()
        out = self._eval(tokens)
        ms, cur = (time.perf_counter() - t0) * 1e3, self._current
        if cur is not None:
            if cur["prompt_n"] is None:  # the first eval of a completion is the prompt's unreused suffix
                cur["prompt_n"], cur["prompt_ms"] = len(tokens), ms
            else:
                cur["predicted_n"] += len(tokens)
                cur["predicted_ms"] += ms
        return out

    def chat(self, *args, **kwargs):
        cur = self._current = {"prompt_n": None, "prompt_ms": 0.0, "predicted_n": 0, "predicted_ms": 0.0}
        t0 = time.perf_counter()
        try:
            result = self._chat(*args, **kwargs)
        finally:
            self._current = None
        cur["total_ms"] = (time.perf_counter() - t0) * 1e3
        cur["prompt_n"] = cur["prompt_n"] or 0
        if isinstance(result, dict) and "id" in result:
            self.done[result["id"]] = cur
            while len(self.done) > self.keep:
                self.done.popitem(last=False)
        return result

    def annotate(self, data: dict) -> dict:
        timings = self.done.pop(data.get("id"), None)
        usage = data.get("usage")
        if timings is not None and isinstance(usage, dict):
            usage["prompt_tokens_details"] = {"cached_tokens": max(0, usage["prompt_tokens"] - timings["prompt_n"])}
            data["timings"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in timings.items()}
        return data


def lean_states(llama) -> None:
    """Make the prompt cache hold KV states only. llama-cpp-python 0.3's save_state also copies its
    logits buffer (n_batch x n_vocab floats: ~100 MB for SmolLM2, not counted against --cache_size),
    which with logits_all=False is never read (sampling happens in llama.cpp's sampler, and a restored
    state is re-evaluated from its last token). Here a state keeps one row of it."""
    import llama_cpp
    from llama_cpp.llama import LlamaState

    def save_state() -> LlamaState:
        ctx = llama._ctx.ctx
        size = llama_cpp.llama_state_get_size(ctx)
        buf = (ctypes.c_uint8 * int(size))()
        n = int(llama_cpp.llama_state_get_data(ctx, buf, size))
        return LlamaState(input_ids=llama.input_ids.copy(), scores=llama.scores[:1].copy(),
                          n_tokens=llama.n_tokens, llama_state=ctypes.string_at(buf, n), llama_state_size=n,
                          seed=llama._seed)

    llama.save_state = save_state


def build_app(llama_args: list[str]):
    from llama_cpp.server import app as app_module
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from starlette.responses import Response

    parser = argparse.ArgumentParser(prog="llama_server_process")
    add_args_from_model(parser, Settings)
    args = parser.parse_args(llama_args)
    server_settings = parse_model_from_args(ServerSettings, args)
    app = app_module.create_app(server_settings=server_settings,
                                model_settings=[parse_model_from_args(ModelSettings, args)])
    llama = app_module._llama_proxy()  # the loaded default model
    report = UsageReport(llama)
    if llama.cache is not None:
        lean_states(llama)

    @app.middleware("http")
    async def add_usage(request, call_next):
        response = await call_next(request)
        if (request.url.path != "/v1/chat/completions" or response.status_code != 200
                or not response.headers.get("content-type", "").startswith("application/json")):
            return response
        body = b"".join([chunk async for chunk in response.body_iterator])
        try:
            body = json.dumps(report.annotate(json.loads(body))).encode()
        except (ValueError, TypeError, KeyError):
            pass
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        return Response(body, status_code=response.status_code, headers=headers)

    return app, server_settings


def main(argv: list[str] | None = None) -> None:
    ours = argparse.ArgumentParser(prog="llama_server_process", add_help=False)
    ours.add_argument("--lease-dir", required=True, type=Path)
    ours.add_argument("--die-with-parent", type=int)
    args, llama_args = ours.parse_known_args(argv)
    if args.die_with_parent:
        die_with_parent(args.die_with_parent)
    threading.Thread(target=watch_leases, args=(args.lease_dir,), daemon=True, name="leases").start()
    import uvicorn

    app, settings = build_app(llama_args)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")


if __name__ == "__main__":
    main()
