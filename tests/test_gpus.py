"""The GPU catalog: names as the drivers print them, aliases, ambiguous names, custom GPUs, the Apple
Metal working set, and the sanity of every row."""
from __future__ import annotations

import json
import re

import pytest

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import (
    DATA_FILE, GIB, KINDS, MIB, VENDORS, all_gpus, ambiguous_names, closest_gpu_names, custom_gpu, get_gpu,
    gpus_by_kind, metal_working_set_bytes, parse_custom_gpu,
)

ROWS = json.loads(DATA_FILE.read_text())["gpus"]


# ---- names as the drivers print them ---------------------------------------------------------------------
@pytest.mark.parametrize("printed,memory_gib", [
    # vLLM 0.19.0 log (../shared/cases llmd-001): total_gpu_memory 79.19 GiB on "NVIDIA H100 80GB HBM3"
    ("NVIDIA H100 80GB HBM3", 79.19),
    # vllm-project/vllm#17269 collect_env: "GPU 0: NVIDIA A100-SXM4-80GB"
    ("NVIDIA A100-SXM4-80GB", 79.15),
    # vllm-project/vllm#7768 collect_env: "GPU 0: NVIDIA GeForce RTX 4090"
    ("NVIDIA GeForce RTX 4090", 23.64),
    # noonghunna/club-3090#747 nvidia-smi: "NVIDIA GeForce RTX 3090 ... 24576MiB"; vLLM: total_gpu_memory (23.58GiB)
    ("NVIDIA GeForce RTX 3090", 23.58),
    # vllm-project/vllm#14452: "GPU 0 has a total capacity of 15.48 GiB" on 8x RTX 5080
    ("NVIDIA GeForce RTX 5080", 15.48),
    # Kunhao-Liu/StyleGaussian#12 (RTX3060, Linux): "(GPU 0; 11.75 GiB total capacity; ...)"
    ("NVIDIA GeForce RTX 3060", 11.75),
    # zai-org/CogVideo#34 (RTX3080): "(GPU 0; 9.78 GiB total capacity; ...)"
    ("NVIDIA GeForce RTX 3080", 9.78),
    # meta-llama/codellama#82 ("my 3070"): "GPU 0 has a total capacty of 7.78 GiB"
    ("NVIDIA GeForce RTX 3070", 7.78),
    # vllm-project/vllm#14452: "the current vLLM instance can use total_gpu_memory (31.37GiB)" on an RTX 5090
    ("NVIDIA GeForce RTX 5090", 31.37),
    # pytorch/ao#4002 device query: "=== Device 0: NVIDIA B200 === ... Total Global Memory: 178.35 GB"
    ("NVIDIA B200", 178.35),
    # ROCm/vllm#527 collect_env "Radeon RX 7900 XTX (gfx1100)"; ComfyUI log "GPU 0 has a total capacity of 23.98 GiB"
    ("Radeon RX 7900 XTX", 23.98),
    ("AMD Radeon RX 7900 XTX", 23.98),  # vllm-project/vllm#34154 (ROCm 7.2) prints the "AMD " prefix
    # MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47: "caps at 101.3-102.2 GiB of 121.69"; ds4#585: "NVIDIA GB10 (sm_121)"
    ("NVIDIA GB10", 121.69),
])
def test_a_name_as_printed_resolves_to_its_logged_memory(printed, memory_gib):
    assert get_gpu(printed).memory_gib == memory_gib


@pytest.mark.parametrize("printed,expected_cc", [
    ("NVIDIA B300 SXM6 AC", "10.3"),          # torch.cuda.get_device_name(), NVIDIA/cosmos-framework#114
    ("NVIDIA GH200 144G HBM3e", "9.0"),       # collect_env "GPU 0: NVIDIA GH200 144G HBM3e", vllm#18390
    ("NVIDIA GH200 480GB", "9.0"),            # collect_env "GPU 0: NVIDIA GH200 480GB", vllm#9630
    ("NVIDIA GB10", "12.1"),                  # "CUDA backend initialized on NVIDIA GB10 (sm_121)", ds4#585
    ("NVIDIA RTX 6000 Ada Generation", "8.9"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("AMD Instinct MI300X", "gfx942"),
    ("AMD Radeon RX 7900 XTX", "gfx1100"),
    ("Intel(R) Arc(TM) A770 Graphics", None),
    ("Tesla T4", "7.5"),
])
def test_printed_names_carry_their_capability(printed, expected_cc):
    assert get_gpu(printed).compute_capability == expected_cc


@pytest.mark.parametrize("alias,name", [
    ("H100", "NVIDIA H100 80GB HBM3"), ("H100 SXM", "NVIDIA H100 80GB HBM3"), ("HGX H100", "NVIDIA H100 80GB HBM3"),
    ("A100 SXM 80GB", "NVIDIA A100-SXM4-80GB"), ("A100 PCIe 80GB", "NVIDIA A100 80GB PCIe"),
    ("a100-40gb", "NVIDIA A100-SXM4-40GB"), ("NVIDIA A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"),
    ("HGX B200", "NVIDIA B200"), ("B300", "NVIDIA B300 SXM6 AC"), ("DGX Spark", "NVIDIA GB10"),
    ("RTX 4090", "NVIDIA GeForce RTX 4090"), ("4090", "NVIDIA GeForce RTX 4090"),
    ("rtx 5070 ti", "NVIDIA GeForce RTX 5070 Ti"), ("RTX 4060 Ti 16GB", "NVIDIA GeForce RTX 4060 Ti 16GB"),
    ("RTX 3060 8GB", "NVIDIA GeForce RTX 3060 8GB"), ("A4000", "NVIDIA RTX A4000"),
    ("RTX 5000 Ada", "NVIDIA RTX 5000 Ada Generation"), ("MI250X", "AMD Instinct MI250X"),
    ("MI210", "AMD Instinct MI210"), ("7900 XTX", "AMD Radeon RX 7900 XTX"), ("Arc B580", "Intel(R) Arc(TM) B580 Graphics"),
    ("M2 Max 96GB", "Apple M2 Max 96GB"), ("Apple M4 Pro 48GB", "Apple M4 Pro 48GB"), ("cpu", "CPU"),
    # the B200's 192 GB of HBM3e as marketed (180 GB per GPU in HGX / DGX B200 systems: the row's board size)
    ("NVIDIA B200 192GB", "NVIDIA B200"),
    # without an edition: as "RTX PRO 6000", the Server Edition (the Workstation Edition has the same memory and rates)
    ("NVIDIA RTX PRO 6000 Blackwell", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
])
def test_aliases_resolve(alias, name):
    assert get_gpu(alias).name == name


def test_every_name_and_alias_names_one_row_only():
    seen: dict[str, str] = {}
    for row in ROWS:
        for key in {re.sub(r"[^a-z0-9]", "", k.lower()) for k in (row["name"], *row["aliases"])}:
            assert key not in seen, (key, seen.get(key), row["name"])
            seen[key] = row["name"]


# ---- ambiguous names ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name,choice", [
    ("A100", "NVIDIA A100-SXM4-80GB"), ("H100", "NVIDIA H100 80GB HBM3"), ("V100", "Tesla V100-SXM2-32GB"),
    ("RTX PRO 6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
    ("NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060"),
])
def test_an_ambiguous_name_with_a_documented_choice_resolves_to_it(name, choice):
    entry = next(a for a in ambiguous_names() if a.key == name)
    assert entry.choice == choice and len(entry.candidates) >= 2
    assert get_gpu(name).name == choice


@pytest.mark.parametrize("name,candidates", [
    ("NVIDIA GeForce RTX 4060 Ti", ["NVIDIA GeForce RTX 4060 Ti 8GB", "NVIDIA GeForce RTX 4060 Ti 16GB"]),
    ("5060 Ti", ["NVIDIA GeForce RTX 5060 Ti 8GB", "NVIDIA GeForce RTX 5060 Ti 16GB"]),
    ("GH200", ["NVIDIA GH200 480GB", "NVIDIA GH200 144G HBM3e"]),
    ("AMD Instinct MI250X / MI250", ["AMD Instinct MI250X", "AMD Instinct MI250"]),
    ("Apple M2 Max", ["Apple M2 Max 32GB", "Apple M2 Max 64GB", "Apple M2 Max 96GB"]),
    ("M3 Max", ["Apple M3 Max 36GB", "Apple M3 Max 48GB", "Apple M3 Max 64GB", "Apple M3 Max 96GB",
                "Apple M3 Max 128GB"]),
])
def test_an_ambiguous_name_without_a_choice_is_refused_with_the_candidates(name, candidates):
    with pytest.raises(EngineInputError) as e:
        get_gpu(name)
    assert e.value.field == "gpu" and "ambiguous" in e.value.message
    for c in candidates:
        assert c in e.value.message


# ---- unknown names --------------------------------------------------------------------------------------
def test_an_unknown_name_lists_the_five_closest():
    with pytest.raises(EngineInputError) as e:
        get_gpu("RTX 4O90")  # letter O for a zero
    assert e.value.field == "gpu"
    listed = e.value.message.split("closest known: ")[1].split("; ")[0].split(", ")
    assert len(listed) == 5 and listed[0] == "NVIDIA GeForce RTX 4090"
    assert "custom:" in e.value.message


def test_closest_names_are_distinct_rows():
    names = closest_gpu_names("H100 PCI")
    assert names[0] == "NVIDIA H100 PCIe" and len(set(names)) == 5


# ---- custom GPUs ----------------------------------------------------------------------------------------
def test_a_custom_string_parses_into_a_custom_gpu():
    gpu = get_gpu("custom:22.5GiB:sm89:bw1008:bf16165:fp8330")
    assert (gpu.kind, gpu.vendor, gpu.compute_capability, gpu.capability_tuple) == ("custom", "nvidia", "8.9", (8, 9))
    assert gpu.memory_gib == 22.5 and gpu.memory_bytes == int(22.5 * 2**30)
    assert (gpu.bandwidth_gbps, gpu.tflops_bf16, gpu.tflops_fp8) == (1008, 165, 330)
    assert gpu.name == "custom:22.5GiB:sm89:bw1008:bf16165:fp8330"
    assert get_gpu(gpu.name) == gpu  # the name round-trips (permalinks)


@pytest.mark.parametrize("text,memory_gib,cc,vendor", [
    ("custom:24GiB", 24.0, None, "unknown"),
    ("CUSTOM:24gib:SM120", 24.0, "12.0", "nvidia"),
    ("custom:24564MiB:sm75", 24564 / 1024, "7.5", "nvidia"),
    ("custom:64GiB:gfx90a", 64.0, "gfx90a", "amd"),
    ("custom:16GiB:intel:bw560", 16.0, None, "intel"),
])
def test_custom_strings(text, memory_gib, cc, vendor):
    gpu = parse_custom_gpu(text)
    assert (gpu.memory_gib, gpu.compute_capability, gpu.vendor) == (memory_gib, cc, vendor)


@pytest.mark.parametrize("text,says", [
    ("custom:24GB", "GiB or MiB"),
    ("custom:", "memory comes first"),
    ("custom:sm89", "memory comes first"),
    ("custom:0GiB", "(0, 16384]"),
    ("custom:-5GiB", "the memory must be a positive number of GiB or MiB"),
    ("custom:24GiB:sm89:sm90", "given twice"),
    ("custom:24GiB:turbo", "cannot read 'turbo'"),
    ("custom:24GiB:sm89:amd", "is nvidia, not amd"),
    ("custom:24GiB:bw0", "must be positive"),
])
def test_bad_custom_strings_are_refused_with_a_message(text, says):
    with pytest.raises(EngineInputError) as e:
        get_gpu(text)
    assert e.value.field == "gpu" and says in e.value.message


def test_custom_gpu_function_builds_the_canonical_name():
    assert custom_gpu(80, "9.0", bandwidth_gbps=3350).name == "custom:80GiB:sm90:bw3350"
    with pytest.raises(EngineInputError):
        custom_gpu(24, compute_capability="ampere")


def test_the_speed_model_refuses_a_gpu_without_bandwidth():
    from calculator.engine import perf

    with pytest.raises(EngineInputError) as e:
        perf.hardware(get_gpu("custom:24GiB:sm89"), None)
    assert e.value.field == "gpu" and "not modelled" in e.value.message
    hw = perf.hardware(get_gpu("custom:24GiB:sm89:bw1000:bf16100"), None)
    assert hw.bandwidth == 1000e9 and hw.peak_flops == 100e12


# ---- Apple Silicon / Metal ------------------------------------------------------------------------------
def test_metal_working_set_matches_public_logs():
    # Ollama 0.21.0, Apple M2 8 GB: "recommendedMaxWorkingSetSize  =  5726.63 MB" (10**6 B units),
    # ../shared/cases lcpp-027. By hand: 8 * 2**30 * 2/3 = 5_726_623_061 B (Metal rounds up to a 16 KiB page).
    assert abs(metal_working_set_bytes("Apple M2 8GB") - 5726.63e6) < 16384
    # 96 GB M2 Max, llama.cpp#3213 (2023 build, MiB units): "recommendedMaxWorkingSetSize  = 73728,00 MB"
    assert metal_working_set_bytes("M2 Max 96GB") == 73728 * MIB
    # 32 GB M2 Max, ollama#434 (MiB units): 21845.34 MB
    assert abs(metal_working_set_bytes("M2 Max 32GB") / MIB - 21845.34) < 0.01
    # 64 GB M2 Max, whisper.cpp log (10**6 B units): 51539.61 MB = 48 GiB
    assert metal_working_set_bytes("Apple M2 Max 64GB") == 48 * GIB


def test_metal_working_set_follows_iogpu_wired_limit_mb():
    # ds4#893: iogpu.wired_limit_mb = 114688 -> recommendedMaxWorkingSetSize 112.00 GiB on a 128 GiB Mac
    assert metal_working_set_bytes("Apple M3 Max 128GB", wired_limit_mb=114688) == 112 * GIB
    # llmfit#754: 12000 MiB on a 16 GB M3 made Metal report 12000 MiB
    assert metal_working_set_bytes("Apple M3 16GB", wired_limit_mb=12000) == 12000 * 2**20
    assert metal_working_set_bytes("Apple M3 16GB", wired_limit_mb=0) == 16 * GIB * 2 // 3 + 1  # default again


@pytest.mark.parametrize("gpu,limit,field", [
    ("Apple M3 16GB", 20000, "wired_limit_mb"), ("Apple M3 16GB", -1, "wired_limit_mb"), ("H100", None, "gpu"),
])
def test_metal_working_set_refuses(gpu, limit, field):
    with pytest.raises(EngineInputError) as e:
        metal_working_set_bytes(gpu, wired_limit_mb=limit)
    assert e.value.field == field


def test_every_apple_row_has_memory_configs_and_working_set_rule():
    apple = [g for g in all_gpus() if g.vendor == "apple"]
    assert len(apple) >= 40
    for g in apple:
        assert g.kind == "apple" and g.metal_working_set_source
        assert g.name.endswith(f" {g.memory_gib:g}GB")
        share = 2 / 3 if g.memory_gib <= 32 else 3 / 4
        assert g.metal_working_set_gib == pytest.approx(g.memory_gib * share)


# ---- every row --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_every_row_has_sources_and_plausible_units(row):
    gpu = get_gpu(row["name"])
    assert gpu.kind in KINDS and gpu.kind != "custom" and gpu.vendor in VENDORS
    assert len(gpu.memory_source) > 15 and len(gpu.spec_source) > 15
    assert 1 <= gpu.memory_gib <= 512
    assert 10 <= gpu.bandwidth_gbps <= 10_000
    if gpu.tflops_bf16 is not None:
        assert 0.5 <= gpu.tflops_bf16 <= 5_000
    if gpu.tflops_fp8 is not None:
        assert gpu.tflops_fp8 == pytest.approx(2 * gpu.tflops_bf16, rel=0.02)  # dense FP8 is twice BF16 everywhere listed
    if gpu.vendor == "nvidia" and gpu.kind != "cpu":
        assert re.fullmatch(r"\d+\.\d", gpu.compute_capability)
        assert gpu.memory_gib < gpu.board_memory_gb, "the driver reports less than the board carries"
    if gpu.kind != "cpu":
        assert gpu.memory_gib <= gpu.board_memory_gb
    if gpu.vendor == "amd":
        assert gpu.compute_capability.startswith("gfx")
    if gpu.kind != "apple":
        assert gpu.metal_working_set_gib is None


def test_picker_groups_cover_every_row_once():
    groups = gpus_by_kind()
    assert list(groups) == ["datacenter", "workstation", "consumer", "apple", "cpu"]
    assert sum(len(v) for v in groups.values()) == len(all_gpus())
    assert {g.vendor for g in groups["consumer"]} == {"nvidia", "amd", "intel"}


@pytest.mark.parametrize("name", [
    "NVIDIA GeForce RTX 5070 Ti", "NVIDIA GeForce RTX 5080", "NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 4060 Ti 16GB",
    "NVIDIA GB10", "NVIDIA GH200 480GB", "NVIDIA B300 SXM6 AC", "AMD Instinct MI250", "AMD Instinct MI210",
    "AMD Radeon RX 7900 XTX", "NVIDIA A10", "NVIDIA A10G", "NVIDIA L4", "NVIDIA L40", "NVIDIA L40S", "NVIDIA H20",
    "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA GB200", "NVIDIA RTX A5000", "NVIDIA RTX 4000 Ada Generation",
    "AMD Instinct MI355X", "AMD Instinct MI325X", "AMD Radeon RX 9070 XT", "Intel(R) Arc(TM) B580 Graphics",
])
def test_the_devices_issue_18_asks_for_are_there(name):
    assert get_gpu(name).name == name


@pytest.mark.parametrize("mutate,says", [
    (lambda d: d["gpus"][1]["aliases"].append("H100"), "names both"),
    (lambda d: d["ambiguous"].append({"key": "4090", "choice": None, "why": "x",
                                      "candidates": ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"]}), "refused"),
    (lambda d: d["ambiguous"].append({"key": "A10", "choice": "NVIDIA A10G", "why": "x",
                                      "candidates": ["NVIDIA A10", "NVIDIA A10G"]}), "resolves to"),
])
def test_an_inconsistent_catalog_is_refused_at_load(tmp_path, monkeypatch, mutate, says):
    from calculator.engine import gpus

    data = json.loads(DATA_FILE.read_text())
    mutate(data)
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(gpus, "DATA_FILE", path)
    gpus._catalog.cache_clear(), gpus._index.cache_clear()
    try:
        with pytest.raises(ValueError, match=says):
            gpus.get_gpu("H100")
    finally:
        monkeypatch.undo()
        gpus._catalog.cache_clear(), gpus._index.cache_clear()


# every name and alias of the catalog before issue 18, with the row it resolves to now (two PCIe names
# that used to fall on the SXM rows now have rows of their own)
FIRST_CATALOG = [
    ('NVIDIA H100 80GB HBM3', 'NVIDIA H100 80GB HBM3'),
    ('H100', 'NVIDIA H100 80GB HBM3'),
    ('H100-80GB', 'NVIDIA H100 80GB HBM3'),
    ('H100-SXM', 'NVIDIA H100 80GB HBM3'),
    ('H100 SXM5 80GB', 'NVIDIA H100 80GB HBM3'),
    ('NVIDIA H100 80GB', 'NVIDIA H100 80GB HBM3'),
    ('NVIDIA H100 PCIe', 'NVIDIA H100 PCIe'),
    ('H100-PCIE', 'NVIDIA H100 PCIe'),
    ('H100 PCIe 80GB', 'NVIDIA H100 PCIe'),
    ('NVIDIA H100 NVL', 'NVIDIA H100 NVL'),
    ('H100-NVL', 'NVIDIA H100 NVL'),
    ('H100-94GB', 'NVIDIA H100 NVL'),
    ('NVIDIA H200', 'NVIDIA H200'),
    ('H200', 'NVIDIA H200'),
    ('H200-141GB', 'NVIDIA H200'),
    ('H200 SXM', 'NVIDIA H200'),
    ('NVIDIA B200', 'NVIDIA B200'),
    ('B200', 'NVIDIA B200'),
    ('B200-180GB', 'NVIDIA B200'),
    ('NVIDIA GB200', 'NVIDIA GB200'),
    ('GB200', 'NVIDIA GB200'),
    ('NVIDIA A100-SXM4-80GB', 'NVIDIA A100-SXM4-80GB'),
    ('A100', 'NVIDIA A100-SXM4-80GB'),
    ('A100-80GB', 'NVIDIA A100-SXM4-80GB'),
    ('NVIDIA A100 80GB', 'NVIDIA A100-SXM4-80GB'),
    ('NVIDIA A100 80GB PCIe', 'NVIDIA A100 80GB PCIe'),
    ('A100 80GB', 'NVIDIA A100-SXM4-80GB'),
    ('NVIDIA A100-SXM4-40GB', 'NVIDIA A100-SXM4-40GB'),
    ('A100-40GB', 'NVIDIA A100-SXM4-40GB'),
    ('NVIDIA A100 40GB', 'NVIDIA A100-SXM4-40GB'),
    ('A100 40GB', 'NVIDIA A100-SXM4-40GB'),
    ('NVIDIA A100-PCIE-40GB', 'NVIDIA A100-PCIE-40GB'),
    ('NVIDIA A10G', 'NVIDIA A10G'),
    ('A10G', 'NVIDIA A10G'),
    ('NVIDIA A10', 'NVIDIA A10'),
    ('A10', 'NVIDIA A10'),
    ('NVIDIA A40', 'NVIDIA A40'),
    ('A40', 'NVIDIA A40'),
    ('NVIDIA RTX A6000', 'NVIDIA RTX A6000'),
    ('A6000', 'NVIDIA RTX A6000'),
    ('RTX-A6000', 'NVIDIA RTX A6000'),
    ('NVIDIA GeForce RTX 3090', 'NVIDIA GeForce RTX 3090'),
    ('RTX3090', 'NVIDIA GeForce RTX 3090'),
    ('RTX-3090', 'NVIDIA GeForce RTX 3090'),
    ('3090', 'NVIDIA GeForce RTX 3090'),
    ('NVIDIA L4', 'NVIDIA L4'),
    ('L4', 'NVIDIA L4'),
    ('NVIDIA L40S', 'NVIDIA L40S'),
    ('L40S', 'NVIDIA L40S'),
    ('NVIDIA GeForce RTX 4090', 'NVIDIA GeForce RTX 4090'),
    ('RTX4090', 'NVIDIA GeForce RTX 4090'),
    ('RTX-4090', 'NVIDIA GeForce RTX 4090'),
    ('4090', 'NVIDIA GeForce RTX 4090'),
    ('NVIDIA RTX 6000 Ada Generation', 'NVIDIA RTX 6000 Ada Generation'),
    ('RTX6000-ADA', 'NVIDIA RTX 6000 Ada Generation'),
    ('RTX 6000 Ada', 'NVIDIA RTX 6000 Ada Generation'),
    ('NVIDIA GeForce RTX 5090', 'NVIDIA GeForce RTX 5090'),
    ('RTX5090', 'NVIDIA GeForce RTX 5090'),
    ('RTX-5090', 'NVIDIA GeForce RTX 5090'),
    ('5090', 'NVIDIA GeForce RTX 5090'),
    ('NVIDIA RTX PRO 6000 Blackwell Server Edition', 'NVIDIA RTX PRO 6000 Blackwell Server Edition'),
    ('RTX-PRO-6000', 'NVIDIA RTX PRO 6000 Blackwell Server Edition'),
    ('RTX PRO 6000', 'NVIDIA RTX PRO 6000 Blackwell Server Edition'),
    ('Tesla T4', 'Tesla T4'),
    ('T4', 'Tesla T4'),
    ('Tesla V100-SXM2-32GB', 'Tesla V100-SXM2-32GB'),
    ('V100', 'Tesla V100-SXM2-32GB'),
    ('V100-32GB', 'Tesla V100-SXM2-32GB'),
    ('NVIDIA H20', 'NVIDIA H20'),
    ('H20', 'NVIDIA H20'),
    ('H20-96GB', 'NVIDIA H20'),
    ('NVIDIA L40', 'NVIDIA L40'),
    ('L40', 'NVIDIA L40'),
    ('NVIDIA A30', 'NVIDIA A30'),
    ('A30', 'NVIDIA A30'),
    ('A30-24GB', 'NVIDIA A30'),
    ('Intel Data Center GPU Max 1550', 'Intel Data Center GPU Max 1550'),
    ('Max 1550', 'Intel Data Center GPU Max 1550'),
    ('PVC', 'Intel Data Center GPU Max 1550'),
    ('Intel GPU Max 1550', 'Intel Data Center GPU Max 1550'),
    ('XPU', 'Intel Data Center GPU Max 1550'),
    ('AMD Instinct MI300X', 'AMD Instinct MI300X'),
    ('MI300X', 'AMD Instinct MI300X'),
    ('AMD Instinct MI325X', 'AMD Instinct MI325X'),
    ('MI325X', 'AMD Instinct MI325X'),
    ('AMD Instinct MI355X', 'AMD Instinct MI355X'),
    ('MI355X', 'AMD Instinct MI355X'),
    ('CPU', 'CPU'),
    ('cpu', 'CPU'),
    ('x86-64 CPU', 'CPU'),
]


@pytest.mark.parametrize("key,name", FIRST_CATALOG)
def test_names_of_the_first_catalog_keep_working(key, name):
    assert get_gpu(key).name == name


def test_an_unknown_name_far_from_every_gpu_gets_no_random_suggestions():
    """'FooGPU9000' is close to no catalog name (difflib ratio < 0.5 for all): the message says so instead of
    listing five unrelated GPUs; a near miss still gets its neighbours."""
    with pytest.raises(EngineInputError) as err:
        get_gpu("FooGPU9000")
    assert "no catalog name is close" in err.value.message and "closest known" not in err.value.message
    with pytest.raises(EngineInputError) as err:
        get_gpu("RTX 4091")
    assert "closest known: NVIDIA GeForce RTX 4090" in err.value.message


# ---- streaming multiprocessors ---------------------------------------------------------------------------
def test_every_nvidia_sm_count_is_positive_and_sourced_and_a_missing_one_says_why():
    for row in ROWS:
        if row["vendor"] != "nvidia":
            assert row.get("sm_count") is None, row["name"]
            continue
        gpu = get_gpu(row["name"])
        assert isinstance(gpu.sm_source, str) and gpu.sm_source.strip(), row["name"]
        if gpu.sm_count is None:
            assert gpu.sm_source.startswith("no "), row["name"]
        else:
            assert isinstance(gpu.sm_count, int) and gpu.sm_count > 0, row["name"]


@pytest.mark.parametrize("name,cuda_cores,cores_per_sm", [
    ("NVIDIA L4", 7424, 128),                   # NVIDIA L4 datasheet; Ada whitepaper: 128 CUDA cores/SM
    ("NVIDIA L40S", 18176, 128),                # NVIDIA L40S datasheet; Ada
    ("NVIDIA A10", 9216, 128),                  # NVIDIA A10 datasheet; GA102 whitepaper: 128 FP32 cores/SM
    ("NVIDIA A100-SXM4-80GB", 6912, 64),        # A100 whitepaper p.19: 6912 FP32 cores, 64 FP32 cores/SM
    ("NVIDIA H100 80GB HBM3", 16896, 128),      # Hopper whitepaper: SXM5 16896 FP32 cores, 128/SM
    ("NVIDIA H100 PCIe", 14592, 128),           # docs.nvidia.com H100 MIG guide: 14592 cores, 128/SM
    ("Tesla V100-SXM2-32GB", 5120, 64),         # V100 whitepaper: 5120 FP32 cores, 64/SM
    ("Tesla P40", 3840, 128),                   # P40 datasheet; compute capability 6.1: 128 FP32/clock/SM
    ("NVIDIA GeForce RTX 2080 Ti", 4352, 64),   # NVIDIA spec page; Turing whitepaper: 64 FP32 cores/SM
    ("NVIDIA GeForce RTX 4060", 3072, 128),     # NVIDIA spec page; Ada
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 24064, 128),  # datasheet; RTX Blackwell whitepaper
])
def test_sm_count_is_the_datasheet_cuda_cores_over_cores_per_sm(name, cuda_cores, cores_per_sm):
    assert get_gpu(name).sm_count == cuda_cores // cores_per_sm
    assert cuda_cores % cores_per_sm == 0


@pytest.mark.parametrize("name,multiprocessors", [
    ("NVIDIA GeForce RTX 4080", 76),        # bourbonut/lbm-gpu#1 deviceQuery: "(76) Multiprocessors" = 9728 / 128
    ("NVIDIA GeForce RTX 5090", 170),       # aikitoria/open-gpu-kernel-modules#1: "(170) Multiprocessors" = 21760 / 128
    ("NVIDIA B200", 148),                   # pytorch/ao#4002 device query: "Number of SMs: 148"
    ("Tesla T4", 40),                       # NVIDIA/DALI#1813 TF log: "coreCount: 40" = 2560 / 64
    ("NVIDIA A100 80GB PCIe", 108),         # ekondis/mixbench#47: "108 MPs"
    ("NVIDIA H200", 132),                   # ai-bot-pro/achatbot skywork_r1v.py: multi_processor_count=132
    ("NVIDIA H20", 78),                     # inclusionAI/flood flood/ops/seg_la.py: multi_processor_count=78
    ("NVIDIA A10G", 80),                    # torchcodec basic_cuda_example: multi_processor_count=80
])
def test_sm_count_matches_a_public_device_query(name, multiprocessors):
    assert get_gpu(name).sm_count == multiprocessors


def test_h20_memory_is_the_torch_total_quoted_beside_its_sm_count():
    """torch prints total_memory in MiB, floored (total_memory // 1024**2): 97285 MiB is 95.005 GiB, so the catalog's
    95.00 (it was an assumption, 94.97, before this print was found)."""
    g = get_gpu("H20")
    assert "total_memory=97285MB" in g.sm_source
    assert g.memory_gib == pytest.approx(round(97285 / 1024, 2))
