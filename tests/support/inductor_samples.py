"""A hand-written Inductor wrapper in the torch 2.11-2.13 format (CUDA), for proposer tests.

Written from what Inductor's codegen emits (codegen/triton.py): three kernels --
a 1-D pointwise, a persistent reduction and a looped reduction -- defined with
``async_compile.triton('name', '''...''', device_str='cuda')`` and launched with
``name.run(..., stream=stream0)``.  One function writes the heuristics decorators from
each kernel's own parameters, so the samples differ only where Inductor's output does.
Real captures from the H200 live in tests/fixtures/wrappers/ once the compile helper
commits them.
"""

DEVICE = (
    "DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, "
    "regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, "
    "max_threads_per_block=1024, warp_size=32)"
)

INDUCTOR_META = (
    "'optimize_mem': True, 'no_x_dim': {no_x_dim}, 'atomic_add_found': False, 'num_load': 1, "
    "'num_store': 1, 'num_reduction': {nred}, 'autotune_hints': set(), "
    "'backend_hash': 'B0F5E1A3C0F2A1D0E7C9B8A7F6E5D4C3B2A1908F7E6D5C4B3A29180F7E6D5C4B', "
    "'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, "
    "'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, "
    "'max_autotune': True, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, "
    "'spill_threshold': 16, 'store_cubin': False"
)

HEADER = """
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()
"""

_TRITON_META = (
    "'device': DEVICE, 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, "
    "'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], "
    "(1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], "
    "(3,): [['tt.divisibility', 16]]}]"
).replace("DEVICE", DEVICE)


def _signature(params: str) -> str:
    """triton_meta's signature of a kernel's parameters, as Inductor types them: the samples'
    pointers are float32, their sizes i32 and their blocks constexpr."""
    types = []
    for param in params.split(","):
        name = param.split(":")[0].strip()
        kind = "constexpr" if ":" in param else "*fp32" if "ptr" in name else "i32"
        types.append(f"'{name}': '{kind}'")
    return "{" + ", ".join(types) + "}"


def _heuristic_kernel(kind: str, size_hints: str, kernel: str) -> str:
    """A kernel's source as Inductor writes it: the imports, the ``triton_heuristics.<kind>``
    decorator (a pointwise kernel has no reduction, a reduction an inner hint), ``kernel``."""
    pointwise = kind == "pointwise"
    name, params = kernel.split("def ", 1)[1].split(")", 1)[0].split("(")
    signature = _signature(params)
    meta = INDUCTOR_META.format(no_x_dim="None" if pointwise else "False", nred=int(not pointwise))
    hint = "" if pointwise else "    reduction_hint=ReductionHint.INNER,\n"
    tail = ",\n    min_elem_per_thread=0" if pointwise else ""
    return (
        f"{HEADER}\n@triton_heuristics.{kind}(\n"
        f"    size_hints={size_hints},\n{hint}"
        "    filename=__file__,\n"
        f"    triton_meta={{'signature': {signature}, {_TRITON_META}}},\n"
        f"    inductor_meta={{'grid_type': 'Grid1D', 'kernel_name': '{name}', "
        f"'mutated_arg_names': [], {meta}}}{tail}\n"
        f")\n{kernel}"
    )


POINTWISE = _heuristic_kernel(
    "pointwise",
    "{'x': 1048576}",
    """@triton.jit
def triton_poi_fused_add_mul_relu_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1048576
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)
    x0 = xindex
    x1 = (xindex % 4096)
    tmp0 = tl.load(in_ptr0 + (x0), None)
    tmp1 = tl.load(in_ptr1 + (x1), None, eviction_policy='evict_last')
    tmp2 = tmp0 * tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tl.store(out_ptr0 + (x0), tmp4, None)
""",
)

PERSISTENT = _heuristic_kernel(
    "persistent_reduction",
    "{'x': 256, 'r0_': 128}",
    """@triton.jit
def triton_per_fused_relu_sum_1(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 256
    r0_numel = 128
    R0_BLOCK: tl.constexpr = 128
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + 128*x0), xmask, other=0.0)
    tmp1 = tl.full([1, 1], 0, tl.int32)
    tmp2 = triton_helpers.maximum(tmp1, tmp0)
    tmp3 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
    tmp5 = tl.where(xmask, tmp3, 0)
    tmp6 = tl.sum(tmp5, 1)[:, None].to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp6, xmask)
""",
)

REDUCTION = _heuristic_kernel(
    "reduction",
    "{'x': 64, 'r0_': 8192}",
    """@triton.jit
def triton_red_fused_amax_2(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 64
    r0_numel = 8192
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], float("-inf"), tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + 8192*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = triton_helpers.maximum(_tmp2, tmp1)
        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)
    tmp2 = triton_helpers.max2(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (x0), tmp2, xmask)
""",
)

TEMPLATE = (
    HEADER
    + """
@triton_heuristics.template(
    num_stages=3,
    num_warps=4,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'arg_A': '*fp32', 'out_ptr0': '*fp32'}, 'device': DEVICE, 'constants': {}, 'configs': []},
    inductor_meta={'kernel_name': 'triton_tem_fused_mm_3', 'grid_type': 'FixedGrid'},
)
@triton.jit
def triton_tem_fused_mm_3(in_ptr0, arg_A, out_ptr0):
    pass
""".replace("DEVICE", DEVICE)
)


def _define(name: str, source: str) -> str:
    return f"{name} = async_compile.triton('{name}', '''{source}''', device_str='cuda')\n"


WRAPPER = (
    "# AOT ID: ['0_inference']\n"
    "from torch._inductor.async_compile import AsyncCompile\n"
    "async_compile = AsyncCompile()\n\n\n"
    + _define("triton_poi_fused_add_mul_relu_0", POINTWISE)
    + "\n\n"
    + _define("triton_per_fused_relu_sum_1", PERSISTENT)
    + "\n\n"
    + _define("triton_red_fused_amax_2", REDUCTION)
    + """

async_compile.wait(globals())
del async_compile

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        args.clear()
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((256, 4096), (4096, 1), torch.float32)
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_mul_relu_0.run(arg0_1, arg1_1, buf0, 1048576, stream=stream0)
            buf1 = empty_strided_cuda((256, ), (1, ), torch.float32)
            triton_per_fused_relu_sum_1.run(buf0, buf1, 256, 128, stream=stream0)
            buf2 = empty_strided_cuda((64, ), (1, ), torch.float32)
            triton_red_fused_amax_2.run(buf0, buf2, 64, 8192, stream=stream0)
        return (buf1, buf2, )
"""
)
