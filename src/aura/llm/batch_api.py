"""What a provider's batch API is to the batch runner (aura.llm.batch): the adapter interface, the view of one
batch, and a pending request. The adapters (batch.OpenAIBatchAPI, batch_anthropic.AnthropicBatchAPI) and the
runner import it; it imports neither."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Protocol

if TYPE_CHECKING:
    from ..config import Model
    from .types import LLMRequest


@dataclass
class _Pending:
    req: "LLMRequest"
    messages: list[dict]
    params: dict
    rf: dict | None

    def body(self, model_id: str) -> dict:
        params = dict(self.params)
        body = {"model": model_id, "messages": self.messages, **params}
        body.update(body.pop("extra_body", None) or {})  # a batch line is the raw HTTP body
        if self.rf is not None:
            body["response_format"] = self.rf
        if self.req.tools:
            body["tools"] = self.req.tools
        return body


@dataclass
class BatchView:
    """One retrieve of a batch, in the runner's words."""
    id: str
    status: str  # the provider's own word (in the line of a batch still running)
    done: bool  # processing has ended: its results can be read
    final: str | None = None  # when done: completed | failed | expired | cancelled
    error: str | None = None  # final failed: why the whole batch was refused
    raw: Any = None  # the provider's batch object (its results are read from it)


class BatchAPI(Protocol):
    """A provider's batch API as BatchRunner uses it. State files, lock, resume and cache entries are the
    runner's; the adapter only talks to the provider. Its state fields (the dicts returned) go into the state
    file; ``batch_id`` names the batch."""
    kind: str  # openai | anthropic: kept in each state file, only that API resumes it
    label: str  # its name in one-line errors
    errors: tuple[type[BaseException], ...]  # the SDK's exceptions (classified by retryable / describe)

    def request(self, key: str, p: "_Pending", model: "Model") -> dict:
        """One request of a batch (custom_id = key); raises ConfigError for a call the API cannot take."""

    def upload(self, name: str, requests: list[dict]) -> dict:
        """Whatever precedes the create (OpenAI: the JSONL file); its state fields."""

    def create(self, state: dict, requests: list[dict]) -> dict:
        """Create the batch, one try (no SDK retries: a lost answer may have made it); its state fields."""

    def find(self, state: dict) -> dict | None:
        """The state fields of the batch a job made for this state before its answer or state write was lost."""

    def retrieve(self, batch_id: str) -> BatchView: ...

    def listing(self) -> None:
        """List one batch (creates nothing, bills nothing): `aura preflight`'s check that the API answers."""

    def results(self, batch: BatchView) -> Iterator[tuple[str, Any]]:
        """(custom_id, outcome) per result: a ChatCompletion (an answer), a str (why it failed), or None
        (not run: expired or cancelled, left to resubmit)."""

    def retryable(self, exc: BaseException) -> bool: ...

    def describe(self, exc: BaseException) -> str: ...

    def close(self) -> None: ...
