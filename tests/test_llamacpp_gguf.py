"""GGUF headers read with calculator.runtimes.llamacpp.gguf_meta: local files written with gguf.GGUFWriter,
split files, and the Hub through ranged requests to the local server in tests/hub_server.py.

Expected bytes by hand: F16 = 2 B per value, F32 = 4, Q8_0 = 34 B per block of 32 values (ggml block_q8_0:
an f16 scale + 32 int8)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from calculator.runtimes.llamacpp.crosscheck import write_tiny_gguf
from calculator.runtimes.llamacpp.gguf_meta import (
    GGUFError,
    read_gguf,
    read_gguf_from_hub,
    split_siblings,
)
from tests.hub_server import FakeHub


def test_tiny_llama_header_and_tensor_bytes(tmp_path):
    path = write_tiny_gguf(tmp_path / "m.gguf", "llama", n_layer=2, n_embd=64, n_head=4, n_head_kv=2,
                           head_dim=16, n_ff=128, n_vocab=256, weight_type="Q8_0")
    meta = read_gguf(path)
    assert meta.architecture == "llama"
    assert meta.n_layer_all == 2 and meta.n_embd == 64 and meta.n_ctx_train == 4096
    assert meta.n_head == [4, 4] and meta.n_head_kv == [2, 2]
    assert meta.head_dim_k == 16 and meta.head_dim_v == 16
    assert meta.n_vocab == 256
    k = meta.tensor("blk.0.attn_k.weight")
    # ggml order: ne0 = 64 (input features), ne1 = 2 heads x 16 = 32 rows
    assert k.shape == [64, 32] and k.ggml_type == "Q8_0"
    assert k.n_bytes == 32 * (64 // 32) * 34  # 32 rows x 2 blocks x 34 B = 2176
    norm = meta.tensor("blk.0.attn_norm.weight")
    assert norm.ggml_type == "F32" and norm.n_bytes == 64 * 4
    # every tensor lies inside the file, after the header
    size = path.stat().st_size
    assert all(meta.data_offsets[0] <= t.offset and t.offset + t.n_bytes <= size for t in meta.tensors)


def test_split_names():
    assert split_siblings("m-00002-of-00003.gguf") == [
        "m-00001-of-00003.gguf", "m-00002-of-00003.gguf", "m-00003-of-00003.gguf"]
    assert split_siblings("m.gguf") is None
    with pytest.raises(GGUFError):
        split_siblings("m-00004-of-00003.gguf")


def _write_split(folder: Path) -> list[Path]:
    """Two-way split as gguf-split lays it out: metadata + split.* keys in the first file, tensors in both."""
    paths = []
    for no, names in ((0, ["token_embd.weight"]), (1, ["output.weight"])):
        p = folder / f"s-{no + 1:05d}-of-00002.gguf"
        w = gguf.GGUFWriter(str(p), "llama")
        w.add_uint16("split.no", no)
        w.add_uint16("split.count", 2)
        w.add_int32("split.tensors.count", 2)
        if no == 0:
            w.add_context_length(512)
            w.add_embedding_length(32)
            w.add_block_count(1)
            w.add_head_count(2)
        for n in names:
            w.add_tensor(n, np.zeros((10, 32), dtype=np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        paths.append(p)
    return paths


def test_split_files_are_read_together(tmp_path):
    paths = _write_split(tmp_path)
    meta = read_gguf(paths[1])  # any split finds its siblings
    assert [t.name for t in meta.tensors] == ["token_embd.weight", "output.weight"]
    assert [t.file_index for t in meta.tensors] == [0, 1]
    assert all(t.n_bytes == 10 * 32 * 2 for t in meta.tensors)
    paths[1].unlink()
    with pytest.raises(GGUFError, match="missing"):
        read_gguf(paths[0])


def test_not_a_gguf(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 100)
    with pytest.raises(GGUFError):
        read_gguf(bad)


def test_hub_ranged_reads_only_the_header(tmp_path):
    path = write_tiny_gguf(tmp_path / "m.gguf", "qwen3", n_layer=2, n_vocab=4000)
    local = read_gguf(path)
    content = path.read_bytes()
    with FakeHub() as hub:
        hub.add_repo("org/tiny-GGUF", {"tiny.gguf": content, "README.md": b"x"})
        # a first range far smaller than the header (4000 token strings) forces more requests
        meta = read_gguf_from_hub("org/tiny-GGUF", "tiny.gguf", endpoint=hub.url, first_bytes=1024)
        gets = hub.count("GET", "/resolve/")
    assert meta.architecture == "qwen3" and meta.n_vocab == 4000
    assert [(t.name, t.n_bytes, t.offset) for t in meta.tensors] == \
           [(t.name, t.n_bytes, t.offset) for t in local.tensors]
    assert meta.file_sizes == [len(content)]
    assert gets >= 2  # 1 KiB was not enough; the header needed at least one more range
    header_end = local.data_offsets[0]
    assert 1024 * 2 ** (gets - 2) < header_end + 64  # it stopped doubling once the header was in


def test_hub_split_and_missing(tmp_path):
    paths = _write_split(tmp_path)
    with FakeHub() as hub:
        hub.add_repo("org/split", {p.name: p.read_bytes() for p in paths})
        meta = read_gguf_from_hub("org/split", paths[0].name, endpoint=hub.url)
        assert len(meta.files) == 2 and len(meta.tensors) == 2
        hub.add_repo("org/half", {paths[0].name: paths[0].read_bytes()})
        with pytest.raises(GGUFError, match="missing"):
            read_gguf_from_hub("org/half", paths[0].name, endpoint=hub.url)
        from calculator.metadata.hub import NoConfigError, RepoNotFoundError
        with pytest.raises(NoConfigError):
            read_gguf_from_hub("org/split", "other.gguf", endpoint=hub.url)
        with pytest.raises(RepoNotFoundError):
            read_gguf_from_hub("org/none", "x.gguf", endpoint=hub.url)
