"""The one path for every LLM call: registry, client, cache, retries, local server, accounting."""
from .client import LLMClient, LLMRequest, LLMResult
from .cache import Cache, cache_key

__all__ = ["LLMClient", "LLMRequest", "LLMResult", "Cache", "cache_key"]
