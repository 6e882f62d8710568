"""Images in the LLM layer, against the real HTTP fake server: image content parts as data URLs,
cache keys over image bytes, no image ever sent to a model without vision, one-line errors for bad
image files, extra sampling params by endpoint, and the images endpoint (PNG bytes, cached)."""
from __future__ import annotations

import base64
import hashlib
import io
import json

import pytest
from PIL import Image

from aura.config import ConfigError
from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from aura.llm.errors import FatalEndpointError
from aura.llm.images import (MAX_IMAGES, ImageError, ImageRequest, NoVision, has_images, image_part,
                             max_image_bytes, user_content)
from aura.simulator.server import fake_png


def client(cfg) -> LLMClient:
    return LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="test", stream=io.StringIO()))


def with_models(make_config, endpoint_extra=None, **m_fields):
    """The test config with model 'm' changed (e.g. vision=True, price=...) and endpoint fields added."""
    models = json.loads(json.dumps(make_config().raw["models"]))
    models["m"].update(m_fields)
    return make_config({"models": models}, **(endpoint_extra or {}))


def png_file(tmp_path, name: str, seed: str = "a"):
    path = tmp_path / name
    path.write_bytes(fake_png(seed))
    return path


def image_req(paths, item="img-1", text="What could go wrong here?") -> LLMRequest:
    return LLMRequest(item_id=item, messages=[{"role": "user", "content": user_content(text, paths)}],
                      prompt_name="test.v1", prompt_sha256="0" * 64)


def key_of(cfg, request) -> str:
    return LLMClient(cfg).prepare("m", request)[3]


# content parts -------------------------------------------------------------------------------
def test_fake_server_sees_image_parts_with_data_urls(make_config, server, tmp_path):
    cfg = with_models(make_config, vision=True)
    png = png_file(tmp_path, "scene.png")
    jpg = tmp_path / "photo.png"  # a JPEG under a .png name: the type comes from the bytes
    Image.new("RGB", (4, 4), (200, 10, 10)).save(jpg, "JPEG")
    with client(cfg) as llm:
        (res,) = llm.run("respond", "m", [image_req([png, jpg])])
    assert res.status == "ok"
    (logged,) = server.requests()
    content = logged["body"]["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "What could go wrong here?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(jpg.read_bytes()).decode()}},
    ]
    # The decoded data URL is the file, byte for byte.
    assert base64.b64decode(content[1]["image_url"]["url"].split(",", 1)[1]) == png.read_bytes()


def test_text_rules_match_the_text_part_of_an_image_message(make_config, server, tmp_path):
    cfg = with_models(make_config, vision=True)
    server.set_rules([{"match": {"contains": "go wrong"}, "content": "a wet floor"}])
    with client(cfg) as llm:
        (res,) = llm.run("respond", "m", [image_req([png_file(tmp_path, "a.png")])])
    assert res.text == "a wet floor"


# cache key -----------------------------------------------------------------------------------
def test_cache_key_follows_image_bytes_not_file_name(make_config, tmp_path):
    cfg = with_models(make_config, vision=True)
    a = png_file(tmp_path, "a.png", seed="one")
    same_bytes_other_name = png_file(tmp_path, "renamed.png", seed="one")
    other_bytes = png_file(tmp_path, "b.png", seed="two")
    assert fake_png("one") != fake_png("two")
    assert key_of(cfg, image_req([a])) == key_of(cfg, image_req([same_bytes_other_name]))
    assert key_of(cfg, image_req([a])) != key_of(cfg, image_req([other_bytes]))
    assert key_of(cfg, image_req([a, other_bytes])) != key_of(cfg, image_req([other_bytes, a]))  # order counts


def test_cache_entry_and_call_log_hold_image_hashes_not_base64(make_config, server, tmp_path):
    cfg = with_models(make_config, vision=True)
    png = png_file(tmp_path, "a.png", seed="big")
    b64 = base64.b64encode(png.read_bytes()).decode()
    digest = "sha256:" + hashlib.sha256(png.read_bytes()).hexdigest()
    with client(cfg) as llm:
        (res,) = llm.run("respond", "m", [image_req([png])])
        llm.acc.write_records(tmp_path / "calls.jsonl")
    entry_text = Cache(cfg.paths["cache"]).path(res.calls[0].key).read_text()
    assert b64 not in entry_text and digest in entry_text
    assert b64 not in (tmp_path / "calls.jsonl").read_text()
    with client(cfg) as llm:  # and the entry answers the same request: no second HTTP request
        (again,) = llm.run("respond", "m", [image_req([png])])
    assert again.calls[0].cache_hit and server.request_count() == 1


def test_text_only_keys_are_unchanged_by_the_image_support(make_config):
    """A message without parts keys exactly as before: sha256 of the canonical payload (no redaction)."""
    from aura.io import canonical_json, sha256_text
    cfg = make_config()
    request = LLMRequest(item_id="t", messages=[{"role": "user", "content": "hi"}], prompt_name="p.v1",
                         prompt_sha256="0" * 64)
    expected = sha256_text(canonical_json({
        "endpoint": cfg.endpoints["fake"].cache_identity, "model": "fake-model",
        "messages": [{"role": "user", "content": "hi"}], "params": {"temperature": 0.0, "max_tokens": 64, "seed": 1},
        "response_format": None, "tools": None, "sample_index": 0}))
    assert key_of(cfg, request) == expected


# vision --------------------------------------------------------------------------------------
def test_model_without_vision_is_never_sent_an_image(make_config, server, tmp_path):
    cfg = make_config()  # model m: vision defaults to false
    assert cfg.model("m").vision is False
    text_only = LLMRequest(item_id="text-1", messages=[{"role": "user", "content": "hi"}], prompt_name="t.v1",
                           prompt_sha256="0" * 64)
    with client(cfg) as llm, pytest.raises(NoVision) as err:
        llm.run("respond", "m", [text_only, image_req([png_file(tmp_path, "a.png")], item="image-0042")])
    assert server.request_count() == 0  # not even the text-only request of the same batch
    msg = str(err.value)
    assert "\n" not in msg and "'m' has no vision" in msg and "image-0042" in msg
    assert has_images(image_req([png_file(tmp_path, "b.png")]).messages) and not has_images(text_only.messages)


# bad image files -----------------------------------------------------------------------------
def test_not_an_image_is_a_one_line_error_naming_the_file(tmp_path):
    fake = tmp_path / "notes.png"
    fake.write_text("this is text, not a picture")
    with pytest.raises(ImageError) as err:
        image_part(fake)
    assert str(fake) in str(err.value) and "\n" not in str(err.value)


def test_truncated_png_is_refused(tmp_path):
    cut = tmp_path / "cut.png"
    cut.write_bytes(fake_png("x")[:40])  # signature and IHDR, the pixel data cut off
    with pytest.raises(ImageError, match="cut.png"):
        image_part(cut)


def test_bmp_is_not_accepted(tmp_path):
    bmp = tmp_path / "pic.bmp"
    Image.new("RGB", (2, 2)).save(bmp, "BMP")
    with pytest.raises(ImageError, match=r"pic\.bmp: image format BMP is not accepted"):
        image_part(bmp)


def test_image_over_the_cap_is_refused(make_config, tmp_path):
    png = png_file(tmp_path, "large.png")
    size = png.stat().st_size
    assert image_part(png, max_bytes=size)["type"] == "image_url"  # at the cap: accepted
    with pytest.raises(ImageError) as err:
        image_part(png, max_bytes=size - 1)
    assert str(err.value) == f"{png}: image is {size} bytes, over the cap of {size - 1} (llm.max_image_bytes)"
    # The cap comes from config llm.max_image_bytes; default 5 MiB = 5 * 1024 * 1024 = 5242880 bytes.
    assert max_image_bytes(make_config().raw) == 5242880
    assert max_image_bytes(make_config({"llm": {"max_image_bytes": 100}}).raw) == 100


def test_five_images_is_an_error_naming_the_fifth(tmp_path):
    paths = [png_file(tmp_path, f"{i}.png", seed=str(i)) for i in range(MAX_IMAGES + 1)]
    assert len(user_content("t", paths[:MAX_IMAGES])) == 1 + 4  # text part + four image parts
    with pytest.raises(ImageError) as err:
        user_content("t", paths)
    msg = str(err.value)
    assert msg.startswith(f"{paths[4]}: 5 images in one message, at most 4") and "\n" not in msg
    with pytest.raises(ImageError, match="at least one image"):
        user_content("t", [])


def test_missing_image_file_names_it(tmp_path):
    with pytest.raises(ImageError, match=r"gone\.png: cannot read image"):
        image_part(tmp_path / "gone.png")


# sampling params by endpoint -----------------------------------------------------------------
def test_top_k_goes_in_the_body_only_where_the_endpoint_takes_it(make_config, server):
    req = LLMRequest(item_id="s", messages=[{"role": "user", "content": "hi"}], prompt_name="t.v1",
                     prompt_sha256="0" * 64, params={"top_p": 0.9, "top_k": 40})
    with client(make_config(extra_sampling=["top_k"])) as llm:  # e.g. a llama.cpp server
        llm.run("respond", "m", [req])
    body = server.requests()[0]["body"]
    assert (body["top_p"], body["top_k"]) == (0.9, 40)
    server.reset()
    with client(make_config()) as llm, pytest.raises(FatalEndpointError, match="top_k is not taken by endpoint 'fake'"):
        llm.run("respond", "m", [req])  # an OpenAI endpoint: refused, not sent, not dropped
    assert server.request_count() == 0
    with pytest.raises(ConfigError, match="model 'm': params top_k not taken by endpoint 'fake'"):
        with_models(make_config, params={"top_k": 20})


def test_local_endpoints_take_top_k_by_default(make_config):
    cfg = make_config(kind="local")
    assert cfg.endpoints["fake"].sampling_extras == ("top_k", "min_p")
    assert make_config().endpoints["fake"].sampling_extras == ()


# images endpoint -----------------------------------------------------------------------------
def img_req(prompt="a wet kitchen floor, no sign", n=2) -> ImageRequest:
    return ImageRequest(item_id="k1", prompt=prompt, prompt_name="draft_image.v1", prompt_sha256="0" * 64, n=n)


def test_images_endpoint_returns_pngs_and_caches_them(make_config, server):
    cfg = with_models(make_config, price={"per_image": 0.04})
    with client(cfg) as llm:
        (res,) = llm.generate_images("m", [img_req()])
        # 2 images x 0.04 USD = 0.08 USD; one HTTP call, one item done
        assert llm.acc.calls == 1 and llm.acc.cost_usd == pytest.approx(0.08) and llm.acc.outcomes["ok"] == 1
    assert res.status == "ok"
    assert res.images == [fake_png("a wet kitchen floor, no sign", 0), fake_png("a wet kitchen floor, no sign", 1)]
    assert all(b.startswith(b"\x89PNG\r\n\x1a\n") for b in res.images)
    (logged,) = server.requests()
    assert logged["path"] == "/v1/images/generations"
    assert {k: logged["body"][k] for k in ("model", "prompt", "n", "size", "response_format")} == {
        "model": "fake-model", "prompt": "a wet kitchen floor, no sign", "n": 2, "size": "256x256",
        "response_format": "b64_json"}
    with client(cfg) as llm:
        (again,) = llm.generate_images("m", [img_req()])
        assert llm.acc.calls == 0 and llm.acc.cache_hits == 1 and llm.acc.cost_usd == 0
    assert server.request_count() == 1  # the second run made no HTTP request
    assert again.images == res.images and again.calls[0].cache_hit
    with client(cfg) as llm:  # another prompt is another key
        llm.generate_images("m", [img_req(prompt="a ladder on a table")])
    assert server.request_count() == 2


def test_images_endpoint_retries_then_fails_the_item(make_config, server):
    server.set_rules([{"match": {"contains": "ladder"}, "status": 503}])
    with client(make_config(max_tries=2)) as llm:
        bad, good = llm.generate_images("m", [img_req(prompt="a ladder", n=1), img_req(prompt="a stove", n=1)])
    assert (bad.status, good.status) == ("failed", "ok")
    assert "gave up after 2 tries" in bad.error and bad.images == []
    assert server.request_count() == 3  # 2 tries for the ladder + 1 for the stove
    assert Cache(make_config().paths["cache"]).get(bad.calls[0].key) is None  # failures are never cached


def test_images_endpoint_fatal_error_stops_the_job(make_config, server):
    server.set_rules([{"status": 400, "message": "unknown parameter: size"}])
    with client(make_config()) as llm, pytest.raises(FatalEndpointError, match="unknown parameter: size"):
        llm.generate_images("m", [img_req(n=1)])


@pytest.mark.llama
def test_top_k_reaches_the_embedded_llama_cpp_sampler(tmp_path):
    """top_k travels through extra_body to the real llama.cpp server and changes its sampling: with
    top_k=1 one candidate token survives at each step, so at temperature 1.5 three seeds give one and
    the same answer; the control, the same three requests without the cut (top_k 0 = off), does not.
    Kept to 6 tokens: further on, this prompt reaches a near-tie (newline vs end of text) that the
    server's prompt-cache reuse can tip either way (seen at token 10), whatever top_k."""
    from aura.config import load_config
    from conftest import REPO

    cfg = load_config(REPO / "config/config.yaml", {"paths": {"cache": str(tmp_path / "cache")}})
    assert "top_k" in cfg.endpoints["local"].sampling_extras

    def ask(top_k, seed):
        return LLMRequest(item_id=f"k{top_k}-{seed}", messages=[{"role": "user", "content": "Name three fruits."}],
                          prompt_name="t.v1", prompt_sha256="0" * 64,
                          params={"max_tokens": 6, "temperature": 1.5, "top_k": top_k, "seed": seed})

    with client(cfg) as llm:
        results = llm.run("respond", "smollm2", [ask(k, s) for k in (1, 0) for s in (1, 2, 3)])
    assert all(r.status == "ok" for r in results)
    cut, free = [r.text for r in results[:3]], [r.text for r in results[3:]]
    assert len(set(cut)) == 1, cut
    assert len(set(free)) > 1, free
