"""Which API failures are retried, and how long to wait."""
from __future__ import annotations

import email.utils
import random
import time

import openai

RETRYABLE_STATUS = {408, 409, 429}


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
    # A 200 whose body is not a chat completion (truncated/garbled JSON) is transient too.
    return isinstance(exc, (openai.APIResponseValidationError, ValueError))


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header, if the server sent one."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def backoff_s(attempt: int, base: float, cap: float) -> float:
    """Full-jitter exponential backoff for attempt 1, 2, ..."""
    return random.uniform(0, min(cap, base * (2 ** (attempt - 1))))


def describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {type(exc).__name__}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"
