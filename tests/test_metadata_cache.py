"""calculator.metadata.load_model: database cache, branch TTL, fallbacks to the cache and the offline
catalog, against the local Hub server (tests/hub_server.py)."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from safetensors.torch import save

from calculator import metadata
from calculator.metadata.catalog import catalog_models
from calculator.metadata.hub import GatedRepoError, HubClient, HubUnavailableError, RepoNotFoundError
from calculator.metadata import load_model
from calculator.models import HubRevision, ModelMetadataCache
from tests.conftest import CONFIGS, load_config
from tests.hub_server import FakeHub
from tests.test_hub import llama_tensors

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean(monkeypatch, settings):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    settings.HUB_BRANCH_TTL_S = 600
    settings.HUB_TIMEOUT_S = 5
    metadata.reset_hub_state()
    yield
    metadata.reset_hub_state()


@pytest.fixture
def hub(monkeypatch):
    with FakeHub(tokens={"hf_other": set()}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def files(config_name: str, **more) -> dict[str, bytes]:
    return {"config.json": (CONFIGS / config_name).read_bytes(), **more}


def age_pointer(repo_id: str, seconds: int) -> None:
    HubRevision.objects.filter(repo_id=repo_id).update(resolved_at=timezone.now() - timedelta(seconds=seconds))


def test_a_cached_branch_is_answered_without_any_request(hub):
    sha = hub.add_repo("org/llama-ft", files("meta-llama__Llama-3.1-8B.json",
                                            **{"model.safetensors": save(llama_tensors())}))
    first = load_model("org/llama-ft")
    assert first.sha == sha and first.weights.params_by_dtype == {"BF16": 106816}
    assert len(hub.requests) == 3
    assert ModelMetadataCache.objects.get(repo_id="org/llama-ft").sha == sha
    assert HubRevision.objects.get(repo_id="org/llama-ft", revision="main").sha == sha

    again = load_model("org/llama-ft")
    assert len(hub.requests) == 3
    assert again.sha == sha and again.config == first.config and again.weights == first.weights
    assert again.notes[0].startswith("From the database cache: 'main' pointed to")


def test_a_branch_moving_to_a_new_sha_is_seen_after_the_ttl_and_a_sha_is_never_refetched(hub, settings):
    settings.HUB_BRANCH_TTL_S = 60
    old = hub.add_repo("org/llama-ft", files("meta-llama__Llama-3.1-8B.json",
                                            **{"model.safetensors": save(llama_tensors())}))
    load_model("org/llama-ft")
    new_config = load_config("meta-llama__Llama-3.1-8B.json") | {"max_position_embeddings": 8192}
    new = hub.commit("org/llama-ft", {"config.json": json.dumps(new_config).encode(),
                                      "model.safetensors": save(llama_tensors(layers=[0]))})
    assert new != old

    within_ttl = load_model("org/llama-ft")
    assert within_ttl.sha == old and len(hub.requests) == 3

    age_pointer("org/llama-ft", 61)
    moved = load_model("org/llama-ft")
    assert moved.sha == new
    assert moved.config["max_position_embeddings"] == 8192
    # one layer fewer: 106816 - 36992
    assert moved.weights.params_by_dtype == {"BF16": 69824}
    assert len(hub.requests) == 6

    # The old commit, asked for by sha, comes from the cache: no request at all.
    pinned = load_model("org/llama-ft", old)
    assert pinned.sha == old and pinned.config["max_position_embeddings"] == 131072
    assert pinned.weights.params_by_dtype == {"BF16": 106816}
    assert len(hub.requests) == 6

    # After the TTL with the branch unchanged, one request (model info) re-resolves it.
    age_pointer("org/llama-ft", 61)
    assert load_model("org/llama-ft").sha == new
    assert len(hub.requests) == 7
    assert ModelMetadataCache.objects.filter(repo_id="org/llama-ft").count() == 2


def test_a_slow_hub_falls_back_to_the_cached_sha_and_is_not_retried_at_once(hub, settings):
    sha = hub.add_repo("org/llama-ft", files("meta-llama__Llama-3.1-8B.json"))
    load_model("org/llama-ft", count_params=False)
    age_pointer("org/llama-ft", 3600)
    hub.repos["org/llama-ft"].delay_s = 1.5
    settings.HUB_TIMEOUT_S = 0.3

    meta = load_model("org/llama-ft")
    assert meta.sha == sha and meta.source.startswith("Hugging Face Hub org/llama-ft")
    assert "did not answer within 0.3 s" in meta.notes[0] and "may have moved" in meta.notes[0]
    count = len(hub.requests)
    again = load_model("org/llama-ft")
    assert again.sha == sha and "not retried" in again.notes[0]
    assert len(hub.requests) == count


def test_a_slow_hub_falls_back_to_the_offline_catalog(hub, settings):
    hub.add_repo("Qwen/Qwen3-8B", files("Qwen__Qwen3-8B.json"), delay_s=1.5)
    settings.HUB_TIMEOUT_S = 0.3
    meta = load_model("Qwen/Qwen3-8B", count_params=False)
    assert meta.origin == "catalog" and meta.sha is None
    assert meta.source == "offline catalog (Qwen__Qwen3-8B.json, SOURCES.md row 9)"
    assert "did not answer within 0.3 s" in meta.notes[0] and "offline catalog" in meta.notes[0]
    assert meta.config == load_config("Qwen__Qwen3-8B.json")


def test_rate_limit_falls_back_to_the_catalog(hub):
    hub.add_repo("Qwen/Qwen3-8B", files("Qwen__Qwen3-8B.json"), status=429)
    meta = load_model("Qwen/Qwen3-8B", count_params=False)
    assert meta.origin == "catalog" and "429" in meta.notes[0]


def test_unreachable_hub_and_unknown_model_is_an_error(monkeypatch):
    with FakeHub() as gone:
        url = gone.url
    monkeypatch.setenv("HF_ENDPOINT", url)  # nothing listens there any more
    with pytest.raises(HubUnavailableError) as err:
        load_model("org/not-in-the-catalog")
    assert "cannot be reached" in err.value.message
    assert "neither in the database cache nor in the offline catalog" in err.value.message


def test_gated_without_token_uses_the_catalog_copy_and_says_why(hub):
    hub.add_repo("meta-llama/Llama-3.1-8B", files("meta-llama__Llama-3.1-8B.json"), gated=True)
    meta = load_model("meta-llama/Llama-3.1-8B", count_params=False)
    assert meta.origin == "catalog"
    assert meta.notes[0].startswith("meta-llama/Llama-3.1-8B is gated")
    assert "offline catalog" in meta.notes[0]


def test_gated_with_a_token_not_granted_access_is_an_error(hub, monkeypatch):
    hub.add_repo("meta-llama/Llama-3.1-8B", files("meta-llama__Llama-3.1-8B.json"), gated=True)
    monkeypatch.setenv("HF_TOKEN", "hf_other")
    with pytest.raises(GatedRepoError):
        load_model("meta-llama/Llama-3.1-8B")


def test_gated_without_token_and_not_in_the_catalog_is_an_error(hub):
    hub.add_repo("org/gated", files("Qwen__Qwen3-8B.json"), gated=True)
    with pytest.raises(GatedRepoError):
        load_model("org/gated")


def test_not_found_is_not_hidden_by_the_catalog(hub):
    with pytest.raises(RepoNotFoundError):
        load_model("Qwen/Qwen3-8B")  # in the catalog, but the Hub says it does not exist


def test_a_mistyped_id_the_hub_does_not_know_names_the_nearest_catalog_ids(hub):
    """The Hub answers 404 for a typo ("Instrct"): the refusal keeps the Hub's sentence and names the catalog id one
    letter away first; an id near no catalog id gets no guess, and the catalog's own id is never offered back."""
    with pytest.raises(RepoNotFoundError) as err:
        load_model("meta-llama/Llama-3.1-8B-Instrct")
    assert "no such model on" in err.value.message
    assert "did you mean 'meta-llama/Llama-3.1-8B-Instruct'?" in err.value.message
    with pytest.raises(RepoNotFoundError) as err:
        load_model("nobody/zzzz-qqqq")
    assert "did you mean" not in err.value.message
    with pytest.raises(RepoNotFoundError) as err:
        load_model("Qwen/Qwen3-8B")
    assert "'Qwen/Qwen3-8B'" not in err.value.message


@pytest.mark.parametrize("repo_id", catalog_models())
def test_every_catalog_model_loads_offline_without_a_request(repo_id, hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    meta = load_model(repo_id, count_params=False)
    assert meta.origin == "catalog" and meta.sha is None
    assert meta.source.startswith("offline catalog (")
    assert meta.notes[0].startswith("HF_HUB_OFFLINE=1")
    assert isinstance(meta.config.get("architectures"), list)
    assert hub.requests == []


def test_catalog_answers_match_the_shared_configs(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("meta-llama__Llama-3.1-8B.json", "nvidia__Nemotron-H-56B-Base-8K.json"):
        repo_id = name.removesuffix(".json").replace("__", "/")
        assert load_model(repo_id, count_params=False).config == load_config(name)


def test_aliases_and_marked_rows_say_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    alias = load_model("deepseek-ai/DeepSeek-V2-Lite-Chat", count_params=False)
    assert alias.config == load_config("deepseek-ai__DeepSeek-V2-Lite.json")
    assert any("has no copy of its own" in n for n in alias.notes)
    # DeepSeek-R1-0528: R1 after more post-training (its model card), answered with R1's config and a note saying so
    r1 = load_model("deepseek-ai/DeepSeek-R1-0528", count_params=False)
    assert r1.config == load_config("deepseek-ai__DeepSeek-R1.json")
    assert any("using deepseek-ai__DeepSeek-R1.json" in n and "post-training" in n for n in r1.notes)
    sibling = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking", count_params=False)
    assert any("SOURCES.md row 14 marks this copy: SIBLING" in n for n in sibling.notes)


def test_offline_and_not_in_the_catalog(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError) as err:
        load_model("org/not-in-the-catalog")
    assert err.value.message.startswith("HF_HUB_OFFLINE=1")


def test_load_catalog_command_counts_parameters_on_the_meta_device(monkeypatch):
    call_command("load_catalog")
    assert ModelMetadataCache.objects.filter(origin="catalog").count() == len(catalog_models())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def params(repo_id):
        return load_model(repo_id).weights.params_by_dtype

    # Independent figures: SOURCES.md rows 1 and 11 (computed from the configs by
    # extra/compute_params_reference.py) and model_aliases.json (safetensors element count of the Chat
    # checkpoint, whose config carries auto_map: transformers' built-in DeepseekV2 class is used).
    assert params("meta-llama/Llama-3.1-8B") == {"BF16": 8_030_261_248}
    assert params("Qwen/Qwen3-30B-A3B") == {"BF16": 30_532_122_624}
    assert params("deepseek-ai/DeepSeek-V2-Lite-Chat") == {"BF16": 15_706_484_224}
    assert params("microsoft/phi-2") == {"F16": 2_779_683_840}  # float16 checkpoint (torch_dtype)
    fp8 = load_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    assert fp8.weights is None and fp8.quant_config["quantization"]["kv_cache_quant_algo"] == "FP8"


def test_bad_ids_are_rejected_with_a_message():
    with pytest.raises(metadata.InvalidModelIdError) as err:
        load_model("llama 3 8b")
    assert "ORG/NAME" in err.value.message and err.value.field == "model"


def test_explicit_client_is_used(hub):
    hub.add_repo("org/llama-ft", files("meta-llama__Llama-3.1-8B.json"))
    meta = load_model("org/llama-ft", count_params=False, client=HubClient(endpoint=hub.url, token="", timeout=2))
    assert meta.origin == "hub" and len(hub.requests) == 2


def test_engine_kwargs_build_an_engine_input(monkeypatch):
    from calculator.engine.schemas import EngineInput

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    meta = load_model("nvidia/Llama-3.1-70B-Instruct-FP8", count_params=False)
    inp = EngineInput(**meta.engine_kwargs(), tensor_parallel_size=2)
    assert inp.model_label == "nvidia/Llama-3.1-70B-Instruct-FP8"
    assert inp.model_source == "offline catalog (nvidia__Llama-3.1-70B-Instruct-FP8.json, SOURCES.md row 32)"
    assert inp.quant_config["quantization"]["quant_algo"] == "FP8"


def test_hub_and_catalog_modules_import_without_django():
    import subprocess
    import sys

    env = {k: v for k, v in __import__("os").environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = ("import sys, calculator.metadata.hub, calculator.metadata.catalog; "
            "assert 'django' not in sys.modules, 'django imported'; "
            "print(len(calculator.metadata.catalog.catalog_models()))")
    root = str(__import__("pathlib").Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == len(catalog_models())


def test_every_catalog_file_has_a_sources_row_and_every_extra_file_a_config():
    """A config enters the catalog only with its public source: each ``*.json`` in model_configs has a numbered
    SOURCES.md row, and each ``extra/<stem>__<quant file>`` belongs to a shipped config."""
    from calculator.metadata.catalog import CATALOG_DIR, _sources
    from calculator.metadata.hub import QUANT_FILES

    rows = _sources()
    missing = sorted(p.name for p in CATALOG_DIR.glob("*.json") if p.name not in rows)
    assert missing == []
    assert len({row for row, _ in rows.values()}) == len(rows)  # row numbers are not reused
    for extra in (CATALOG_DIR / "extra").glob("*.json"):
        stem, _, quant_file = extra.name.rpartition("__")
        assert quant_file in QUANT_FILES and (CATALOG_DIR / f"{stem}.json").is_file(), extra.name


def test_fourth_pass_catalog_counts_match_hand_counts(monkeypatch):
    """Meta-device counts of rows 91, 96, 99 and 121 against figures worked out independently."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def params(repo_id):
        return load_model(repo_id).weights.params_by_dtype

    # facebook/opt-125m by hand from its config (row 91): token embedding 50272 x 768 + learned positions
    # (2048 + 2 offset) x 768 + 12 x (q/k/v/out 4 x (768^2 + 768) + fc1 768 x 3072 + 3072 + fc2 3072 x 768 + 768
    # + two LayerNorms 2 x 2 x 768) + final LayerNorm 2 x 768; lm_head tied. float16 checkpoint.
    layer = 4 * (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768) + 2 * 2 * 768
    assert params("facebook/opt-125m") == {"F16": 50272 * 768 + 2050 * 768 + 12 * layer + 2 * 768}
    # Row 96: the safetensors element total the REPORTS read from the checkpoint's headers.
    assert params("meta-llama/Meta-Llama-3-8B-Instruct") == {"BF16": 8_030_261_248}
    # Row 99: Qwen2.5-32B-Instruct has the shapes of QwQ-32B (row 86), whose checkpoint totals 32,763,876,352.
    assert params("Qwen/Qwen2.5-32B-Instruct") == {"BF16": 32_763_876_352}
    # Row 121: the checkpoint's safetensors element total (vision tower included), from the same reports.
    assert params("Qwen/Qwen3-VL-8B-Instruct") == {"BF16": 8_767_123_696}


def test_training_config_heads_carry_their_mark(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    head = load_model("thoughtworks/GLM-4.7-Flash-Eagle3", count_params=False)
    assert head.config["draft_vocab_size"] == 32000 and head.config["num_hidden_layers"] == 1
    assert any("marks this copy: IDENTITY UNVERIFIED" in n for n in head.notes)
