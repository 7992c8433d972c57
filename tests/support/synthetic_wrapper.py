"""A synthetic Inductor wrapper with hundreds of kernels, generated from a template.

Large models compile to a few hundred Triton kernels; no wrapper that size is
committed (fixtures are captured on the GPU host), so the scale tests build one
in the format ``wrapper_parse`` reads: ``async_compile.triton`` definitions
with Inductor's decorator metadata, then ``call(args)`` with buffers, library
GEMMs between blocks of launches, and some kernels launched more than once
(layers that share code).
"""

from __future__ import annotations

KERNEL_TEMPLATE = """
# kernel path: /tmp/torchinductor_synthetic/{name}.py
# Topologically Sorted Source Nodes: [add, relu, layer_{i}], Original ATen: [aten.add, aten.relu]
{name} = async_compile.triton('{name}', '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={{'x': {numel}}},
    filename=__file__,
    triton_meta={{'signature': {{'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {{}}, 'configs': [{{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}}]}},
    inductor_meta={{'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': '{name}', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'num_load': 2, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '{hash}', 'tiling_scores': {{'x': {score}}}}},
    min_elem_per_thread=0
)
@triton.jit
def {name}(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = {numel}
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    x1 = (xindex % {cols})
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.load(in_ptr1 + (x1), xmask, eviction_policy='evict_last')
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tl.store(out_ptr0 + (x0), tmp4, xmask)
''', device_str='cuda')
"""

HEADER = """# AOT ID: ['0_inference']
import torch
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
aten = torch.ops.aten
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
async_compile = AsyncCompile()
"""

ROWS, COLS = 1024, 768


def kernel_name(i: int) -> str:
    return f"triton_poi_fused_add_relu_{i}"


def synthetic_wrapper(kernels: int, launches_per_kernel: int = 2, block: int = 4) -> str:
    """Wrapper text with ``kernels`` distinct kernels, each launched ``launches_per_kernel``
    times, and a library GEMM after every ``block`` launches (so runs of ``block``
    adjacent launches become fusion groups)."""
    numel = ROWS * COLS
    parts = [HEADER]
    for i in range(kernels):
        parts.append(
            KERNEL_TEMPLATE.format(
                name=kernel_name(i), i=i, numel=numel, cols=COLS, hash=f"{i:064X}", score=numel * 8
            )
        )
    parts.append("async_compile.wait(globals())\ndel async_compile\n\n")
    body = [
        "def call(args):",
        "    arg0_1, arg1_1, arg2_1 = args",
        "    args.clear()",
        f"    assert_size_stride(arg0_1, ({ROWS}, {COLS}), ({COLS}, 1))",
        f"    assert_size_stride(arg1_1, ({COLS},), (1,))",
        f"    assert_size_stride(arg2_1, ({COLS}, {COLS}), ({COLS}, 1))",
        "    with torch.cuda._DeviceGuard(0):",
        "        torch.cuda.set_device(0)",
        f"        buf0 = empty_strided_cuda(({ROWS}, {COLS}), ({COLS}, 1), torch.float32)",
        "        extern_kernels.mm(arg0_1, arg2_1, out=buf0)",
    ]
    prev = "buf0"
    n = 0  # buffers
    launched = 0
    for rep in range(launches_per_kernel):
        for i in range(kernels):
            n += 1
            launched += 1
            buf = f"buf{n}"
            body += [
                f"        {buf} = empty_strided_cuda(({ROWS}, {COLS}), ({COLS}, 1), torch.float32)",
                "        stream0 = get_raw_stream(0)",
                f"        {kernel_name(i)}.run({prev}, arg1_1, {buf}, {numel}, stream=stream0)",
                f"        del {prev}" if prev != "buf0" or rep or i else "        del buf0",
            ]
            prev = buf
            if launched % block == 0:
                n += 1
                body += [
                    f"        buf{n} = empty_strided_cuda(({ROWS}, {COLS}), ({COLS}, 1), torch.float32)",
                    f"        extern_kernels.mm({prev}, arg2_1, out=buf{n})",
                    f"        del {prev}",
                ]
                prev = f"buf{n}"
    body += [
        "        del arg0_1, arg1_1, arg2_1",
        f"    return ({prev}, )",
        "",
        "",
        "def get_args():",
        "    from torch._dynamo.testing import rand_strided",
        f"    arg0_1 = rand_strided(({ROWS}, {COLS}), ({COLS}, 1), device='cuda:0', dtype=torch.float32)",
        f"    arg1_1 = rand_strided(({COLS},), (1,), device='cuda:0', dtype=torch.float32)",
        f"    arg2_1 = rand_strided(({COLS}, {COLS}), ({COLS}, 1), device='cuda:0', dtype=torch.float32)",
        "    return [arg0_1, arg1_1, arg2_1]",
        "",
    ]
    parts.append("\n".join(body))
    return "".join(parts)
