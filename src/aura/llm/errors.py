"""Which API failures are retried, which stop the job, and how long to wait.

Retried (transient): transport errors and timeouts, HTTP 408/409/429/5xx, a 200 with no choices,
a 200 whose body is cut off or not a chat completion, and a structured answer the output cap cut
(`CutAnswer`: never cached while tries are left). Stopping the job at once (the key, the
model id or a parameter is wrong, so every other call would fail the same way): any other HTTP
error, e.g. 400/401/403/404/422. The exception: a 400 about one request's own content (context
too long, content filter) fails that item only.
"""
from __future__ import annotations

import contextlib
import email.utils
import json
import math
import random
import re
import signal
import threading
import time

from ..redact import register, redact

RETRYABLE_STATUS = {408, 409, 429}
# 400 errors that concern one request's content, not the endpoint, key, model or parameters: by error
# code (OpenAI, Azure) or, for servers that only say it in words (vLLM, llama.cpp, Anthropic), by message.
ITEM_LEVEL_CODES = {"context_length_exceeded", "content_filter", "content_policy_violation",
                    "exceed_context_size_error"}
ITEM_LEVEL_MESSAGE = re.compile(r"maximum context length|context length|context size|prompt is too long"
                                r"|too many tokens", re.IGNORECASE)
MAX_RETRY_AFTER_S = 300.0  # a longer (or malformed, negative, past) Retry-After falls back to backoff


class EmptyChoices(Exception):
    """A 200 response without any choice: transient, retried."""


class CutAnswer(Exception):
    """A structured answer cut at the output cap (finish_reason "length") that is no whole answer: asked
    again while tries are left, so a cut answer is never cached as the final one."""


class StageFailed(Exception):
    """A job must stop without writing its outputs; the message is the one line to print."""


class FatalEndpointError(StageFailed):
    """A non-retryable API error: bad key, unknown model, bad parameter."""


def endpoint_key(ep) -> str | None:
    """The API key of a remote endpoint, from the environment variable it names (None when it names none); a
    named variable that is not set stops the job: FatalEndpointError, one line."""
    import os

    key = os.environ.get(ep.api_key_env) if ep.api_key_env else None
    if ep.api_key_env and not key:
        raise FatalEndpointError(f"endpoint '{ep.name}': environment variable {ep.api_key_env} is not set")
    register(ep.api_key_env, key)  # whatever a server echoes of it is redacted from every output
    return key


class TooManyFailures(StageFailed):
    """More failed items than the job's ceiling (llm.max_failed_share / llm.max_failed_items)."""


class Terminated(BaseException):
    """SIGTERM (Snakemake stopping a job, a timeout) raised as an exception, so `finally` blocks run:
    the call log and summary are written and local servers stopped (see `terminate_raises`)."""


@contextlib.contextmanager
def terminate_raises():
    """Within the block SIGTERM raises Terminated in the main thread instead of killing the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated("SIGTERM")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def is_retryable(exc: BaseException) -> bool:
    import openai  # here: a job that makes no call never imports it

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, EmptyChoices, CutAnswer)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
    # A 200 whose body is cut off or garbled: the client fails to decode it (JSON) or to read it
    # as a chat completion. Any other ValueError is a bug and is not retried.
    return isinstance(exc, (openai.APIResponseValidationError, json.JSONDecodeError))


def is_item_level(exc: BaseException) -> bool:
    """A non-retryable error that concerns only this request (it fails the item, not the job)."""
    import openai  # here: a job that makes no call never imports it

    if not isinstance(exc, openai.BadRequestError):
        return False
    body = _body(exc)
    return body.get("code") in ITEM_LEVEL_CODES or body.get("type") in ITEM_LEVEL_CODES or bool(
        ITEM_LEVEL_MESSAGE.search(server_message(exc)))


def retry_after_s(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header; None when absent or unusable.

    Unusable (then the caller backs off): not a number or HTTP date, negative, a date in the past,
    or longer than MAX_RETRY_AFTER_S.
    """
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    ms = _number(headers.get("retry-after-ms"))
    if ms is not None:
        return _usable(ms / 1000.0)
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return _usable(seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    delta = when.timestamp() - (time.time() if now is None else now)
    return _usable(delta) if delta > 0 else None


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _usable(seconds: float) -> float | None:
    return seconds if 0 <= seconds <= MAX_RETRY_AFTER_S else None


def backoff_s(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff for attempt 1, 2, ..."""
    return (rng or random).uniform(0, min(cap, base * (2 ** (attempt - 1))))


def _body(exc: BaseException) -> dict:
    body = getattr(exc, "body", None)
    return body if isinstance(body, dict) else {}


def server_message(exc: BaseException) -> str:
    """The server's own error message (the `error.message` of an OpenAI-style body), one line, any key it
    echoes redacted (a 401 may quote the Authorization header)."""
    msg = _body(exc).get("message") or getattr(exc, "message", None) or str(exc)
    return redact(" ".join(str(msg).split()))[:300]


def describe(exc: BaseException) -> str:
    """One line about a failed call, any key in it redacted."""
    import openai  # here: a job that makes no call never imports it

    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {type(exc).__name__}: {server_message(exc)}"
    if isinstance(exc, json.JSONDecodeError):
        return f"truncated or non-JSON response body ({exc.msg})"
    if isinstance(exc, CutAnswer):
        return str(exc)
    return f"{type(exc).__name__}: {redact(' '.join(str(exc).split()))[:200]}"
