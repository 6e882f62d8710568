"""The images EDIT endpoint (openai `images.edit`, multipart upload) through LLMClient.generate_images
against the fake server's /v1/images/edits: the uploaded image is recorded, the answer is drawn from it,
and the cache key changes with the uploaded bytes (cache.image_cache_key)."""
from __future__ import annotations

import hashlib
import io

from aura.llm import Cache, LLMClient
from aura.llm.accounting import Accounting
from aura.llm.cache import image_cache_key
from aura.llm.images import ImageRequest
from aura.simulator.server import fake_edit_png, fake_png


def client(cfg) -> LLMClient:
    return LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="test", stream=io.StringIO()))


def edit_req(image: bytes, prompt="frame 2: she walks away") -> ImageRequest:
    return ImageRequest(item_id="k2", prompt=prompt, prompt_name="p.v1", prompt_sha256="0" * 64, n=1, image=image)


def test_edit_uploads_the_image_and_is_drawn_from_it(make_config, server):
    first = fake_png("frame 1")
    with client(make_config()) as llm:
        (res,) = llm.generate_images("m", [edit_req(first)])
    assert res.status == "ok" and res.images == [fake_edit_png("frame 2: she walks away", first, 0)]
    assert res.images != [fake_png("frame 2: she walks away", 0)]  # not a plain generation of the prompt
    (logged,) = server.requests()
    assert logged["path"] == "/v1/images/edits"
    assert {k: logged["body"][k] for k in ("model", "prompt", "n", "size", "response_format")} == {
        "model": "fake-model", "prompt": "frame 2: she walks away", "n": 1, "size": "256x256",
        "response_format": "b64_json"}
    up = logged["uploads"]["image"]
    assert (up["filename"], up["content_type"], up["size"], up["sha256"]) == (
        "k2.png", "image/png", len(first), hashlib.sha256(first).hexdigest())


def test_edit_cache_key_follows_the_uploaded_bytes(make_config, server):
    a, b = fake_png("frame 1"), fake_png("frame 1 again")
    with client(make_config()) as llm:
        (ra,) = llm.generate_images("m", [edit_req(a)])
    with client(make_config()) as llm:  # same prompt, same bytes: a hit, no request
        (again,) = llm.generate_images("m", [edit_req(a)])
        assert llm.acc.calls == 0 and llm.acc.cache_hits == 1
    assert again.images == ra.images and server.request_count() == 1
    with client(make_config()) as llm:  # same prompt, other bytes: another key, another request
        (rb,) = llm.generate_images("m", [edit_req(b)])
    assert server.request_count() == 2 and rb.images == [fake_edit_png("frame 2: she walks away", b, 0)]
    assert len({ra.calls[0].key, rb.calls[0].key}) == 2
    # the edit key is the generation key's payload with api images.edit and the image hash; no hash: unchanged
    common = dict(endpoint="e", model="m", prompt="p", params={"n": 1}, sample_index=0)
    plain = image_cache_key(**common)
    assert plain == image_cache_key(**common, image_sha256=None)
    assert len({plain, image_cache_key(**common, image_sha256=hashlib.sha256(a).hexdigest()),
                image_cache_key(**common, image_sha256=hashlib.sha256(b).hexdigest())}) == 3


def test_edit_without_an_image_is_refused_by_the_fake(server):
    import json
    import urllib.error
    import urllib.request

    req = urllib.request.Request(server.base_url.rstrip("/") + "/images/edits", data=b"x=1", method="POST",
                                 headers={"Content-Type": "multipart/form-data; boundary=zz"})
    try:
        urllib.request.urlopen(req, timeout=5)
        raise AssertionError("expected 400")
    except urllib.error.HTTPError as exc:
        assert exc.code == 400 and "needs an uploaded image" in json.loads(exc.read())["error"]["message"]
