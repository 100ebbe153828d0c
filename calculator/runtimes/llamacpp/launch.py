"""Launch commands for a plan: ``llama-server`` argv and the Ollama equivalent (server environment + ``ollama run``).

Flag names are llama.cpp's own (common/arg.cpp of the llama.cpp vendored in llama-cpp-python 0.3.36:
``-m`` ``-c`` ``-np`` ``-fa`` ``-ctk`` ``-ctv`` ``-ngl`` ``-kvu`` ``--swa-full`` at lines 1690, 1724,
1754, 2437, 2450, 2544-2558, 2789). The draft model (same file): ``-md FNAME`` (``--spec-draft-model``, :4241: a
file path), ``-hfd <user>/<model>[:quant]`` (``--spec-draft-hf``, :3975), ``-ngld N`` (:4222), ``--spec-draft-n-max
N`` (:4140; ``--draft-max`` is removed there, :4387-4392 ``arg_removed``) and ``--spec-type draft-simple`` (:4249;
the default type is none, common/common.h:373, and a plain GGUF draft is not auto-detected,
common/speculative.cpp:2270-2295: without it the server loads the draft and then drops it,
tools/server/server-context.cpp:1242-1262). Builds before the rename (the other release rule sets) took ``-md`` /
``-hfd`` with ``--draft-max N`` and used the draft whenever one was given. An argv list is returned, never a shell
string.
"""
from __future__ import annotations

from calculator.runtimes.llamacpp.memory import KV_CACHE_TYPES, RELEASE_0_3_36


def launch_argv(
    model_path: str,
    *,
    n_ctx: int | None,
    n_parallel: int = 1,
    flash_attn: str = "auto",
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_gpu_layers: int | None = None,
    kv_unified: bool = False,
    swa_full: bool = False,
    draft_model_path: str | None = None,
    draft_hf_repo: str | None = None,
    draft_hf_file: str | None = None,
    draft_max: int | None = None,
    n_gpu_layers_draft: int | None = None,
    release: str = RELEASE_0_3_36,
    binary: str = "llama-server",
    n_gpus: int = 1,
    split_mode: str | None = None,
    tensor_split: str | None = None,
    main_gpu: int | None = None,
    gpu_backend: str = "CUDA",
    fit: str | None = None,
    fit_target: int | None = None,
    hf_repo: str | None = None,
) -> list[str]:
    """``llama-server -m MODEL [-c N] -np P -fa on|off|auto -ctk T -ctv T [-ngl N] [-kvu] [--swa-full]`` and, with a
    draft model, ``[--spec-type draft-simple] -md FILE | -hfd REPO [--spec-draft-n-max K] [-ngld N]`` (0.3.36;
    ``--draft-max K`` for the older release rule sets, see the module docstring). ``draft_model_path`` is the
    draft's .gguf file, ``draft_hf_repo`` a Hub repo llama-server downloads from (one of them; ``REPO:QUANT`` picks
    the repo's first file whose name matches ``QUANT[.-]``, common/download.cpp:655-697 find_best_model).
    ``draft_hf_file`` (0.3.36 only, with ``draft_hf_repo``): ``-hfd REPO -md FILE``, where -md names the file of
    the repo to download (common/arg.cpp:4241-4246 "will be used if --spec-draft-hf is set", :538-539 "an explicit
    draft file selection (e.g. -md with -hfd)"; common/download.cpp:730-742 looks it up by path in the repo).

    Several GPUs (``n_gpus`` > 1): ``-dev CUDA0,CUDA1,...`` (``gpu_backend`` is the device name's prefix as the
    build names its devices: CUDA, ROCm -- ggml-cuda built for HIP, ggml-cuda.h:10-11 --, Vulkan) pins the ``n_gpus`` devices the plan is for
    (common/arg.cpp:2738 ``--device``; without it llama.cpp takes every visible GPU), then ``-sm`` / ``-ts`` /
    ``-mg`` when given (common/arg.cpp:2807, 2831, 2858; ``tensor_split`` as the user wrote it, e.g. ``3,1``).

    ``hf_repo``: the model comes from that Hub repo instead of a local file: ``-hf REPO`` (llama-server downloads the
    repo's Q4_K_M, else Q8_0, else first file), with ``-hff MODEL`` when ``model_path`` names the file
    (common/arg.cpp:3060 "-hf, -hfr, --hf-repo" and :3070 "-hff, --hf-file ... will override the quant in --hf-repo").

    ``n_ctx=None`` leaves -c out (the server's default: the model's context, which --fit may lower to fit the
    device); ``n_ctx=0`` is an explicit ``-c 0`` (the model's context too, but --fit may not lower it:
    common/arg.cpp:1641-1646). ``n_gpu_layers=None`` leaves -ngl out (the server's default). ``-np`` is always given: the server's own
    default is -1 (auto: 4 slots and a unified cache, tools/server/server.cpp:156-161), which the plan must
    not assume silently. ``fit`` (``--fit on|off``, common/arg.cpp:2867-2879) and ``fit_target`` (``-fitt MiB``,
    :2895-2919) are added when given (None: the server's defaults, on and 1024). Raises ``ValueError`` naming the
    field."""
    if not model_path and not hf_repo:
        raise ValueError("model_path: required")
    if n_ctx is not None and n_ctx < 0:
        raise ValueError("n_ctx (-c) must be >= 0")
    if n_parallel < 1:
        raise ValueError("n_parallel (-np) must be >= 1")
    if flash_attn not in ("on", "off", "auto"):
        raise ValueError(f"flash_attn (-fa): on, off or auto, not {flash_attn!r}")
    for name, t in (("cache_type_k", cache_type_k), ("cache_type_v", cache_type_v)):
        if t not in KV_CACHE_TYPES:
            raise ValueError(f"{name}: one of {', '.join(KV_CACHE_TYPES)}, not {t!r}")
    # n_ctx None: -c left out, llama-server's default (0 = the model's context, which --fit may lower to fit the
    # device); an explicit `-c 0` forbids that (common/arg.cpp:1641-1646), so 0 is written when the request gives it
    source = (["-hf", hf_repo, *(["-hff", model_path] if model_path else [])] if hf_repo else ["-m", model_path])
    argv = [binary, *source, *(["-c", str(n_ctx)] if n_ctx is not None else []), "-np", str(n_parallel), "-fa",
            flash_attn, "-ctk", cache_type_k, "-ctv", cache_type_v]
    if n_gpu_layers is not None:
        argv += ["-ngl", str(n_gpu_layers)]
    if fit is not None:
        if fit not in ("on", "off"):
            raise ValueError(f"fit (--fit): on or off, not {fit!r}")
        argv += ["--fit", fit]
    if fit_target is not None:
        if fit_target < 0:
            raise ValueError("fit_target (-fitt) must be >= 0")
        argv += ["-fitt", str(fit_target)]
    if kv_unified:
        argv.append("-kvu")
    if swa_full:
        argv.append("--swa-full")
    if n_gpus < 1:
        raise ValueError("n_gpus must be >= 1")
    if n_gpus > 1:
        argv += ["-dev", ",".join(f"{gpu_backend}{i}" for i in range(n_gpus))]
    if split_mode is not None:
        if split_mode not in ("none", "layer", "row", "tensor"):
            raise ValueError(f"split_mode (-sm): none, layer, row or tensor, not {split_mode!r}")
        argv += ["-sm", split_mode]
    if tensor_split is not None:
        argv += ["-ts", tensor_split]
    if main_gpu is not None:
        argv += ["-mg", str(main_gpu)]
    if draft_model_path and draft_hf_repo:
        raise ValueError("draft_model_path / draft_hf_repo: give one (-md FILE or -hfd REPO)")
    if draft_hf_file and (not draft_hf_repo or release != RELEASE_0_3_36):
        raise ValueError(f"draft_hf_file (-hfd REPO -md FILE) needs draft_hf_repo and {RELEASE_0_3_36}")
    if draft_max is not None and draft_max < 0:
        raise ValueError("draft_max (--spec-draft-n-max) must be >= 0")
    if draft_model_path or draft_hf_repo:
        new = release == RELEASE_0_3_36
        if new:
            argv += ["--spec-type", "draft-simple"]
        argv += ["-md", draft_model_path] if draft_model_path else ["-hfd", draft_hf_repo]
        if draft_hf_file:
            argv += ["-md", draft_hf_file]
        if draft_max is not None:
            argv += ["--spec-draft-n-max" if new else "--draft-max", str(draft_max)]
        if n_gpu_layers_draft is not None:
            argv += ["-ngld", str(n_gpu_layers_draft)]
    return argv


def _check_ollama_settings(num_ctx: int, num_parallel: int, kv_cache_type: str) -> None:
    """Ollama's per-slot context, slot count and KV type as :func:`ollama_config` and :func:`ollama_serve_argv`
    take them. Raises ``ValueError`` naming the setting."""
    if num_ctx <= 0:
        raise ValueError("num_ctx (OLLAMA_CONTEXT_LENGTH) must be > 0")
    if num_parallel < 1:
        raise ValueError("num_parallel (OLLAMA_NUM_PARALLEL) must be >= 1")
    if kv_cache_type not in KV_CACHE_TYPES:
        raise ValueError(f"kv_cache_type (OLLAMA_KV_CACHE_TYPE): one of {', '.join(KV_CACHE_TYPES)}")


def ollama_config(
    model: str,
    *,
    num_ctx: int,
    num_parallel: int = 1,
    kv_cache_type: str = "f16",
    flash_attention: bool | None = None,
    num_gpu: int | None = None,
) -> dict:
    """The Ollama equivalent: ``{"modelfile": "FROM ...\\nPARAMETER num_ctx N\\n...", "env": {...}}``.

    ``num_ctx`` is per request slot (Ollama multiplies by ``OLLAMA_NUM_PARALLEL`` for the cache);
    ``OLLAMA_KV_CACHE_TYPE`` and ``OLLAMA_FLASH_ATTENTION`` are server-wide environment variables, not
    Modelfile parameters; ``num_gpu`` is Ollama's name for the offloaded layer count."""
    if not model:
        raise ValueError("model: required")
    _check_ollama_settings(num_ctx, num_parallel, kv_cache_type)
    lines = [f"FROM {model}", f"PARAMETER num_ctx {num_ctx}"]
    if num_gpu is not None:
        lines.append(f"PARAMETER num_gpu {num_gpu}")
    env = {"OLLAMA_NUM_PARALLEL": str(num_parallel), "OLLAMA_KV_CACHE_TYPE": kv_cache_type}
    if flash_attention is not None:
        env["OLLAMA_FLASH_ATTENTION"] = "1" if flash_attention else "0"
    return {"modelfile": "\n".join(lines) + "\n", "env": env}


#: Ollama's server settings as environment variables of ``ollama serve`` (ollama envconfig/config.go:
#: OLLAMA_CONTEXT_LENGTH, OLLAMA_NUM_PARALLEL, OLLAMA_KV_CACHE_TYPE, OLLAMA_FLASH_ATTENTION; docs/context-length.mdx:
#: "OLLAMA_CONTEXT_LENGTH=64000 ollama serve").
def ollama_serve_argv(*, num_ctx: int, num_parallel: int = 1, kv_cache_type: str = "f16",
                      flash_attention: bool | None = None) -> list[str]:
    """``env OLLAMA_CONTEXT_LENGTH=N OLLAMA_NUM_PARALLEL=P OLLAMA_KV_CACHE_TYPE=T [OLLAMA_FLASH_ATTENTION=1|0]
    ollama serve`` (an argv list). ``num_ctx`` is per request slot (Ollama sizes the cache num_ctx x parallel).
    Raises ``ValueError`` naming the field."""
    _check_ollama_settings(num_ctx, num_parallel, kv_cache_type)
    env = [f"OLLAMA_CONTEXT_LENGTH={num_ctx}", f"OLLAMA_NUM_PARALLEL={num_parallel}",
           f"OLLAMA_KV_CACHE_TYPE={kv_cache_type}"]
    if flash_attention is not None:
        env.append(f"OLLAMA_FLASH_ATTENTION={1 if flash_attention else 0}")
    return ["env", *env, "ollama", "serve"]


def ollama_tag(gguf_file: str) -> str:
    """The tag that names a file of a Hub GGUF repo for Ollama: its quantization as the file name states it
    (``Llama-3.2-3B-Instruct-Q4_K_M.gguf`` -> ``Q4_K_M``; ``x-UD-Q4_K_XL-00001-of-00002.gguf`` -> ``UD-Q4_K_XL``);
    Ollama matches it against the repo's file names (https://huggingface.co/docs/hub/ollama, "Custom
    Quantization"). Raises ``ValueError`` when the name carries no quantization."""
    import re

    stem = re.sub(r"(-\d{5}-of-\d{5})?\.gguf$", "", gguf_file.rsplit("/", 1)[-1], flags=re.IGNORECASE)
    m = re.search(r"(?:^|[-_.])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32))$", stem, re.IGNORECASE)
    if not m:
        raise ValueError(f"gguf_file: {gguf_file} carries no quantization in its name for an Ollama tag")
    return m.group(1)


def ollama_run_argv(repo_id: str, gguf_file: str | None) -> list[str]:
    """``ollama run hf.co/{user}/{repo}[:{quant}]``: Ollama pulls a Hub GGUF repo by that name
    (https://huggingface.co/docs/hub/ollama; without a tag it takes the Q4_K_M file)."""
    if not repo_id or "/" not in repo_id:
        raise ValueError("repo_id: ORG/NAME of a GGUF repo on the Hub")
    name = f"hf.co/{repo_id}"
    if gguf_file:
        name += f":{ollama_tag(gguf_file)}"
    return ["ollama", "run", name]
