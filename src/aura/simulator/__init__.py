"""The simulated provider: an OpenAI-compatible server on 127.0.0.1 (real HTTP, zero latency) that answers by
rules or by a responder, speaks each provider's documented behaviours (``profiles``) and their Batch APIs
(``batch_openai``, ``batch_anthropic``). The test suite talks to it as its fake server; ``aura rehearse`` runs a
whole config against it with planted answers (``aura.simulator.rehearse``)."""
