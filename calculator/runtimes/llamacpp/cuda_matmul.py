"""Which kernel llama.cpp's CUDA backend runs for a weight matmul, and at which peak rate of the GPU it computes.

Read from ggml-cuda in llama-cpp-python 0.3.36 (vendor/llama.cpp/ggml/src/ggml-cuda/, cited as :data:`SRC`), for an
NVIDIA GPU of compute capability ``cc`` and a pass of ``n`` tokens (``ne11``, the columns of ``src1``):

* **dense weights** (``GGML_OP_MUL_MAT``, ``ggml_cuda_mul_mat``, ggml-cuda.cu:1818-1871) try, in order: the F16 / BF16
  / F32 vector kernel (``mmvf``, :1838; mmvf.cu:792-872: one to four tokens), the small-batch tensor-core kernel for
  unquantized weights (``mmf``, :1858; mmf.cu:133-191: up to 16 tokens, F16 from Volta, BF16 / F32 from Ampere), the
  quantized vector kernel (``mmvq``, :1862; mmvq.cu:318-383: up to ``MMVQ_MAX_BATCH_SIZE`` = 8 tokens, fewer for some
  K-quants on Volta, Ada and Blackwell), the quantized matmul ``mmq`` (:1866), else cuBLAS (:1870);
* **MMQ** (``ggml_cuda_should_use_mmq``, mmq.cu:318-387) takes the types of mmq.cu:324-351 (Q1_0 / Q2_0, the legacy
  Q4_0..Q8_0, the K-quants Q2_K..Q6_K, the IQ types but IQ1_M, MXFP4, NVFP4; not IQ1_M, TQ1_0 / TQ2_0, F16, BF16, F32)
  when the device has 48 KiB of shared memory per block (:362-368; every NVIDIA GPU from Pascal has), and then:
  from Turing (``turing_mma_available``: the build's highest compiled arch for the device >= 7.5, common.cuh:364-366)
  always, at any batch (mmq.cu:371-373): the kernel multiplies int8 x int8 on the tensor cores (mma.sync
  ``m16n8k32 ... s32.s8.s8.s32``, ``m8n8k16`` on Turing; mma.cuh:984-1021) after quantizing the activations to q8_1
  (mmq.cu:208, ``quantize_mmq_q8_1_cuda``); below compute capability 6.1 (no dp4a) only for MoE experts (:375-379);
  on Pascal 6.1 always and on Volta 7.0 below ``MMQ_DP4A_MAX_BATCH_SIZE`` = 64 tokens (mmq.cuh:8; mmq.cu:385-386,
  ``!fp16_mma_hardware_available(cc) || ne11 < 64``), on the CUDA cores with ``dp4a`` (the MMA data layout needs
  ``turing_mma_available``, mmq.cuh:189-194). On Blackwell 12.x (``blackwell_mma_available``, common.cuh:376-379:
  12.0 <= cc < 13.0) MXFP4 / NVFP4 keep their activations in 4 bits and run the native FP4 MMA (mmq.cu:118-135,
  mma.cuh:1198-1205);
* **cuBLAS** (``ggml_cuda_mul_mat_cublas``, ggml-cuda.cu:1617-1640) dequantizes a quantized weight to F16 when the GPU
  has fast FP16 (``fast_fp16_hardware_available``: cc >= 6.0 and not 6.1, common.cuh:320-323; else to F32), keeps F16
  (F32 without fast FP16), keeps BF16 from Ampere (``fast_bf16_hardware_available``, common.cuh:333-336; before it BF16
  becomes F32 above 8 tokens, :1624-1631); an F16 GEMM computes with ``CUBLAS_COMPUTE_16F`` (FP16 accumulate,
  :1392) except on Volta, where it accumulates in FP32 (``prefer_f32_output``, :1507); BF16 accumulates in FP32
  (:1378); F32 is ``cublasSgemm`` on the CUDA cores (:1540);
* **MoE experts** (``GGML_OP_MUL_MAT_ID``, ``ggml_cuda_mul_mat_id``, ggml-cuda.cu:1904-1943): up to 8 tokens a
  quantized expert runs MMVQ (:1919-1925, ``get_mmvq_mmid_max_batch``, mmvq.cu:285-295: 8 on Volta, Ada and later,
  per-type limits on Turing / Ampere), then MMQ by the same rule with ``n_experts`` (:1934-1937), then MMF for
  unquantized experts (:1939-1942, mmf.cu:162-167: up to 128 tokens, 512 for expert matrices of at most 1024 rows;
  taken here as up to 128, tensor-core MMA with FP32 accumulate), else cuBLAS expert by expert.

The build is assumed compiled for the GPU's own architecture (``GGML_NATIVE``, or the release arch list, ggml-cuda
CMakeLists.txt:41-67), so ``ggml_cuda_highest_compiled_arch(cc)`` is the GPU's capability.

:func:`cuda_matmul_path` gives the kernel and the arithmetic unit; :func:`unit_rate` the catalog's peak for that unit
(``tops_int8``, ``tflops_fp16_acc16``, ``tflops_bf16``, ``tflops_fp4``) with its source. The vector kernels (MMVQ,
MMVF, MMF) read the weights once for at most 16 tokens and are bandwidth-bound; their compute stays priced at the
catalog's BF16 / FP16 tensor figure, as before this rule (the dp4a rate of MMVQ on the CUDA cores is not in the
catalog).
"""
from __future__ import annotations

from dataclasses import dataclass

SRC = "llama-cpp-python 0.3.36 vendor/llama.cpp/ggml/src/ggml-cuda/"

#: ggml types that MMQ implements (mmq.cu:324-351)
MMQ_TYPES = frozenset({
    "Q1_0", "Q2_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
    "IQ1_S", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS", "IQ4_NL", "MXFP4", "NVFP4"})
#: ggml types that are not block-quantized (``ggml_is_quantized`` false)
UNQUANTIZED = frozenset({"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64"})
FP4_TYPES = frozenset({"MXFP4", "NVFP4"})
MMVQ_MAX_BATCH_SIZE = 8  # mmvq.cuh:3
MMF_MAX_COLS = 16  # mmf.cu:176-177 (src1_ncols > 16: no mmf)
MMF_MOE_MAX_COLS = 128  # mmf.cu:162-167 (MUL_MAT_ID: 128, or 512 for expert matrices of at most 1024 rows)
MMQ_DP4A_MAX_BATCH_SIZE = 64  # mmq.cuh:8

# per-type MMVQ limits for dense matmuls (mmvq.cu:324-383), by exact compute capability
_MMVQ_LIMITS = {
    (8, 9): {"Q2_K": 4, "Q3_K": 6},  # :324-333, tuned on RTX 4090
    (12, 0): {"Q2_K": 5, "Q3_K": 5, "Q4_K": 5, "Q5_K": 6, "Q6_K": 7},  # :334-347, RTX 5090
    (12, 1): {"Q2_K": 6},  # :348-355, DGX Spark GB10
    (8, 7): {"Q2_K": 1, "Q3_K": 1, "Q4_K": 1, "Q5_K": 1, "Q6_K": 1},  # :356-367, Jetson Orin
    (7, 0): {"Q2_K": 4, "Q3_K": 6, "Q4_K": 5, "Q5_K": 6, "Q6_K": 7},  # :368-383, Volta
}
# MoE experts on Turing / Ampere (get_mmvq_mmid_max_batch_turing_plus, mmvq.cu:177-188); Pascal (:150-175)
_MMID_TURING = {"IQ2_S": 7, "IQ3_S": 6, "IQ3_XXS": 7, "MXFP4": 7, "NVFP4": 8, "Q2_K": 7, "Q3_K": 5}
_MMID_PASCAL = {"IQ1_S": 6, "IQ1_M": 6, "IQ2_S": 4, "IQ2_XS": 5, "IQ2_XXS": 5, "IQ3_S": 4, "IQ3_XXS": 4,
                "IQ4_NL": 6, "IQ4_XS": 5, "MXFP4": 4, "NVFP4": 4, "Q2_K": 4, "Q3_K": 4, "Q4_0": 6, "Q4_1": 6,
                "Q4_K": 5, "Q5_0": 6, "Q5_1": 6, "Q5_K": 5, "Q6_K": 4, "Q8_0": 4}

# the arithmetic units a path computes on
INT8_MMA = "int8_mma"  # MMQ, tensor-core int8 MMA (Turing and later)
DP4A = "dp4a"  # MMQ on the CUDA cores (Pascal 6.1, Volta below 64 tokens)
FP4_MMA = "fp4_mma"  # MMQ with 4-bit activations, Blackwell 12.x MXFP4 / NVFP4
FP16_ACC16 = "fp16_acc16"  # cuBLAS CUBLAS_COMPUTE_16F
FP16_ACC32 = "fp16_acc32"  # cuBLAS F16 inputs, FP32 accumulate (Volta)
BF16_ACC32 = "bf16_acc32"  # cuBLAS BF16, FP32 accumulate
FP32 = "fp32"  # cublasSgemm on the CUDA cores
VECTOR = "vector"  # MMVQ / MMVF / MMF: at most 16 tokens, bandwidth-bound


@dataclass(frozen=True)
class MatmulPath:
    """The kernel llama.cpp's CUDA backend runs for one weight matmul (``mmvq`` | ``mmvf`` | ``mmf`` | ``mmq`` |
    ``cublas``), the arithmetic unit it computes on (:data:`INT8_MMA`, :data:`DP4A`, ...) and the source lines."""

    kernel: str
    unit: str
    source: str


def _cc_int(cc: tuple[int, int]) -> int:
    return cc[0] * 100 + cc[1] * 10


def _mmvq_max(ggml_type: str, cc: tuple[int, int], n_experts: int) -> int:
    if n_experts:
        c = _cc_int(cc)
        if c == 700 or c >= 890:
            return MMVQ_MAX_BATCH_SIZE  # mmvq.cu:288-290
        table = _MMID_TURING if c >= 750 else _MMID_PASCAL
        return table.get(ggml_type, MMVQ_MAX_BATCH_SIZE)
    return _MMVQ_LIMITS.get(cc, {}).get(ggml_type, MMVQ_MAX_BATCH_SIZE)


def should_use_mmq(ggml_type: str, cc: tuple[int, int], n_tokens: int, n_experts: int = 0) -> bool:
    """``ggml_cuda_should_use_mmq`` (mmq.cu:318-387) for an NVIDIA GPU (48 KiB of shared memory per block assumed:
    every NVIDIA GPU from Pascal has it) in a build compiled for the GPU's own architecture."""
    if ggml_type not in MMQ_TYPES:
        return False
    c = _cc_int(cc)
    if c >= 750:
        return True  # turing_mma_available, :371-373
    if c < 610:
        return c >= 600 and n_experts > 0  # :375-379
    fp16_mma = c >= 700  # fp16_mma_hardware_available, common.cuh:326-330
    return not fp16_mma or n_tokens < MMQ_DP4A_MAX_BATCH_SIZE  # :385-386


def cuda_matmul_path(ggml_type: str, cc: tuple[int, int], n_tokens: int, n_experts: int = 0) -> MatmulPath:
    """The kernel and arithmetic unit of a weight matmul of GGUF type ``ggml_type`` (``Q4_K``, ``F16``...) over
    ``n_tokens`` tokens on an NVIDIA GPU of compute capability ``cc`` (``(8, 9)``); ``n_experts`` > 0 for routed
    experts (``MUL_MAT_ID``). The rule and its lines are the module docstring's."""
    c = _cc_int(cc)
    quantized = ggml_type not in UNQUANTIZED
    if n_experts:
        if quantized and n_tokens <= _mmvq_max(ggml_type, cc, n_experts):
            return MatmulPath("mmvq", VECTOR, SRC + "ggml-cuda.cu:1919-1925, mmvq.cu:285-295")
        if not quantized and n_tokens <= MMF_MAX_COLS:
            return MatmulPath("mmf", VECTOR, SRC + "ggml-cuda.cu:1939-1942, mmf.cu:133-191")
        if n_tokens <= MMF_MOE_MAX_COLS and ((ggml_type == "F16" and c >= 700) or (ggml_type == "BF16" and c >= 800)):
            return MatmulPath("mmf", BF16_ACC32 if ggml_type == "BF16" else FP16_ACC32,
                              SRC + "ggml-cuda.cu:1939-1942, mmf.cu:162-167, :181-190 (tensor-core MMA, FP32 "
                              "accumulate)")
    elif not quantized and n_tokens <= MMF_MAX_COLS:
        # mmvf (one to four tokens, mmvf.cu:792-872) or mmf (up to 16, mmf.cu:133-191): both small-batch
        return MatmulPath("mmf" if n_tokens > 4 else "mmvf", VECTOR,
                          SRC + "ggml-cuda.cu:1838-1861, mmvf.cu:792-872, mmf.cu:133-191")
    elif quantized and n_tokens <= _mmvq_max(ggml_type, cc, 0):
        return MatmulPath("mmvq", VECTOR, SRC + "ggml-cuda.cu:1862-1865, mmvq.cu:318-383")
    if should_use_mmq(ggml_type, cc, n_tokens, n_experts):
        where = SRC + ("ggml-cuda.cu:1934-1937" if n_experts else "ggml-cuda.cu:1866") + ", mmq.cu:318-387"
        if ggml_type in FP4_TYPES and 1200 <= c < 1300:
            return MatmulPath("mmq", FP4_MMA, where + "; 4-bit activations, native FP4 MMA on Blackwell 12.x: "
                              "mmq.cu:118-135, common.cuh:376-379, mma.cuh:1198-1205")
        if c >= 750:
            return MatmulPath("mmq", INT8_MMA, where + "; int8 tensor-core MMA on q8_1 activations: mma.cuh:984-1021, "
                              "mmq.cu:208")
        return MatmulPath("mmq", DP4A, where + "; dp4a on the CUDA cores (no int8 MMA before Turing): "
                          "mmq.cuh:189-194")
    # cuBLAS (ggml-cuda.cu:1617-1640): dequantize to F16 with fast FP16, else F32
    fast_fp16 = c >= 600 and c != 610  # fast_fp16_hardware_available, common.cuh:320-323
    where = SRC + "ggml-cuda.cu:1617-1640 (cuBLAS compute type)"
    if quantized or ggml_type == "F16":
        if not fast_fp16:
            return MatmulPath("cublas", FP32, where + ", :1540 cublasSgemm")
        if c == 700:
            return MatmulPath("cublas", FP16_ACC32, where + ", :1507 (Volta: FP32 accumulate)")
        return MatmulPath("cublas", FP16_ACC16, where + ", :1392 (CUBLAS_COMPUTE_16F)")
    if ggml_type == "BF16":
        if c >= 800:  # fast_bf16_hardware_available, common.cuh:333-336
            return MatmulPath("cublas", BF16_ACC32, where + ", :1378 (BF16, CUBLAS_COMPUTE_32F)")
        return MatmulPath("cublas", FP32, where + ", :1624-1631 (BF16 as F32 before Ampere), :1540 cublasSgemm")
    return MatmulPath("cublas", FP32, where + ", :1540 cublasSgemm")


#: How much less of their INT8 peak llama.cpp's MMQ reaches on the datacenter tensor-core parts (compute capability 8.0
#: / 9.0) than the GPU class the llama.cpp efficiency row describes: on llama.cpp's public CUDA scoreboard (discussion
#: #15013, Llama 2 7B Q4_0, -fa 1) the row priced at the full INT8 rate predicts pp512 2.5x the measured rate on the A30
#: (7588 vs 3069 t/s), 2.7x on an A100 80 GB (14145 vs 5286) and 3.4x on an H100 (37850 vs 11263; the scoreboard does
#: not say SXM or PCIe: PCIe 2.6x), where the other 19 GPUs' median |error| is 18 % (benchmarks/llamacpp_bench_fit.py).
#: The median of the three, fitted once for the class (never per GPU): the three then stand at about 0.9x, 1.0x and
#: 1.3x (SXM). Blackwell 10.x has no public run and keeps the full rate (speed.MMQ_DATACENTER_NOTE says so).
MMQ_DATACENTER_SHORTFALL = 2.7


def mmq_datacenter(gpu) -> bool:
    """Whether ``gpu`` is one of the datacenter tensor-core parts :data:`MMQ_DATACENTER_SHORTFALL` was measured on
    (NVIDIA, compute capability 8.0 or 9.0: A100 / A30 / H100 / H200 / H20 class)."""
    return gpu.vendor == "nvidia" and gpu.capability_tuple in ((8, 0), (9, 0))


def unit_rate(gpu, unit: str) -> tuple[float | None, str]:
    """(peak FLOP/s or OP/s of ``gpu`` for ``unit``, where the figure comes from); None when the catalog row has no
    such figure (a custom GPU without ``int8<TOPS>``)."""
    bf = gpu.tflops_bf16
    if unit == VECTOR:
        return bf * 1e12, (f"{bf:g} TFLOP/s, the catalog's BF16 / FP16 tensor figure: MMVQ / MMVF / MMF read the "
                           "weights once for at most 16 tokens (bandwidth-bound); MMVQ's dp4a rate on the CUDA cores "
                           "is not in the catalog")
    if unit in (INT8_MMA, DP4A):
        if gpu.tops_int8 is None:
            return None, (f"{gpu.name}: no INT8 rate in the catalog (a custom GPU can give it as :int8<TOPS>), so "
                          "llama.cpp's quantized matmuls (MMQ) are not modelled")
        what = "INT8 tensor-core MMA" if unit == INT8_MMA else "dp4a on the CUDA cores"
        rate, src = gpu.tops_int8 * 1e12, f"{gpu.tops_int8:g} dense TOPS ({what}): {gpu.int8_source or 'given'}"
        if unit == INT8_MMA and mmq_datacenter(gpu):
            rate /= MMQ_DATACENTER_SHORTFALL
            src += (f"; / {MMQ_DATACENTER_SHORTFALL:g} on this datacenter part, whose MMQ reaches a smaller share of "
                    "its INT8 peak (cuda_matmul.MMQ_DATACENTER_SHORTFALL)")
        return rate, src
    if unit == FP4_MMA:
        if gpu.tflops_fp4:
            return gpu.tflops_fp4 * 1e12, f"{gpu.tflops_fp4:g} dense TFLOP/s FP4: {gpu.fp4_source}"
        if gpu.tops_int8 is None:
            return None, f"{gpu.name}: neither an FP4 nor an INT8 rate in the catalog"
        return gpu.tops_int8 * 1e12, (f"{gpu.tops_int8:g} dense TOPS INT8 for the native FP4 MMA: the catalog has no "
                                      f"FP4 rate for {gpu.name}, so the INT8 one (a lower bound on the speed; "
                                      f"{gpu.int8_source})")
    if unit == FP16_ACC16:
        if gpu.tflops_fp16_acc16 is not None:
            return gpu.tflops_fp16_acc16 * 1e12, (f"{gpu.tflops_fp16_acc16:g} dense TFLOP/s FP16 with FP16 "
                                                  f"accumulate: {gpu.fp16_acc16_source}")
        return bf * 1e12, (f"{bf:g} TFLOP/s: no FP16-accumulate figure for {gpu.name}, its FP16 / BF16 tensor figure "
                           "(GeForce boards run FP16 accumulate at twice that)")
    if unit in (FP16_ACC32, BF16_ACC32):
        return bf * 1e12, f"{bf:g} dense TFLOP/s FP16 / BF16 tensor with FP32 accumulate ({gpu.spec_source})"
    return bf * 1e12, (f"{bf:g} TFLOP/s, the catalog's BF16 / FP16 tensor figure for cublasSgemm (FP32 on the CUDA "
                       "cores, whose rate the catalog lacks: this part's time is a lower bound)")
