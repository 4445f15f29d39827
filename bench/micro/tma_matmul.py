"""float32 products through the tensor memory accelerator on Hopper: the same grouped-tile product written with
pointer loads (what egg's `kmajor` writes today), with TMA tensor descriptors built on the host, and as a
persistent TMA kernel (one program per SM walking the tiles in grouped order; with warp specialization too),
the output stored by TMA or through pointers, with B read K-contiguous (a copy of B transposed, as `kmajor`
makes, per call or once) or as stored (N-contiguous, no copy); each beside cuBLAS with TF32 on and off, with its
relative error against float64. Reads only: it decides whether the code generator should write
descriptor loads (issue 21). Run from the repository root on a GPU machine:
    [PRECISIONS=tf32,tf32x3] python3 bench/micro/tma_matmul.py [M N K ...]
(default: tf32; 4096 4096 4096 and 8192 8192 2048)"""
import os
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from fp32_precision import mm as mm_pointers  # the pointer-load product: B at any strides

# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
CONFIGS = ((128, 256, 32, 8, 3), (128, 256, 32, 8, 4), (128, 128, 32, 4, 4), (128, 128, 64, 4, 3),
           (256, 128, 32, 8, 3))
PRECISIONS = ("tf32",)


@triton.jit
def grouped(tile, tiles_m, tiles_n):
    group = tile // (8 * tiles_n)
    rows = tl.minimum(tiles_m - group * 8, 8)
    return group * 8 + (tile % (8 * tiles_n)) % rows, (tile % (8 * tiles_n)) // rows


@triton.jit
def store_tile(c_desc, c_ptr, acc, tile_m, tile_n, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               TMA_STORE: tl.constexpr):
    """The output tile through its descriptor (staged whole in shared memory) or through masked pointers."""
    if TMA_STORE:
        c_desc.store([tile_m * BLOCK_M, tile_n * BLOCK_N], acc)
    else:
        m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
        n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        tl.store(c_ptr + m * N + n, acc, mask=(m < M) & (n < N))


@triton.jit
def mm_tma(a_desc, b_desc, c_desc, c_ptr, M, N, K, B_KMAJOR: tl.constexpr, PRECISION: tl.constexpr,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, TMA_STORE: tl.constexpr):
    """C = A @ B, every tile moved by a host-built tensor descriptor (out-of-bounds reads are zeros)."""
    tile_m, tile_n = grouped(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N))
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([tile_m * BLOCK_M, k0])
        if B_KMAJOR:
            b = b_desc.load([tile_n * BLOCK_N, k0]).T
        else:
            b = b_desc.load([k0, tile_n * BLOCK_N])
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    store_tile(c_desc, c_ptr, acc, tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, TMA_STORE)


@triton.jit
def mm_tma_persistent(a_desc, b_desc, c_desc, c_ptr, M, N, K, B_KMAJOR: tl.constexpr, PRECISION: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      PROGRAMS: tl.constexpr, TMA_STORE: tl.constexpr, SPECIALIZE: tl.constexpr):
    """The TMA product with one program per SM, each walking tiles PROGRAMS apart in grouped order."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=True):
        tile_m, tile_n = grouped(tile, tiles_m, tiles_n)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for kt in tl.range(k_tiles, warp_specialize=SPECIALIZE):
            a = a_desc.load([tile_m * BLOCK_M, kt * BLOCK_K])
            if B_KMAJOR:
                b = b_desc.load([tile_n * BLOCK_N, kt * BLOCK_K]).T
            else:
                b = b_desc.load([kt * BLOCK_K, tile_n * BLOCK_N])
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        store_tile(c_desc, c_ptr, acc, tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, TMA_STORE)


def variants(a, b, precision, config):
    """(name, function) for every way of writing the product in one tile config."""
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, warps, stages = config
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    c = torch.empty(M, N, device=a.device)
    options = dict(num_warps=warps, num_stages=stages)

    transposed = b.t().contiguous()

    def pointers(kmajor, copy=True):
        def run():
            bt = (b.t().contiguous() if copy else transposed) if kmajor else b
            strides = (1, K) if kmajor else (N, 1)  # B[k, n] at bt's [N, K] rows, or as stored
            mm_pointers[grid](a, bt, c, M, N, K, *strides, precision, bm, bn, bk, **options)
            return c
        return run

    def tma(kmajor, persistent, tma_store=True, copy=True, specialize=False):
        def run():
            bt = (b.t().contiguous() if copy else transposed) if kmajor else b
            a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
            b_desc = TensorDescriptor.from_tensor(bt, [bn, bk] if kmajor else [bk, bn])
            c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
            if persistent:
                programs = min(sms, grid[0])
                mm_tma_persistent[(programs,)](a_desc, b_desc, c_desc, c, M, N, K, kmajor, precision, bm, bn, bk,
                                               programs, tma_store, specialize, **options)
            else:
                mm_tma[grid](a_desc, b_desc, c_desc, c, M, N, K, kmajor, precision, bm, bn, bk, tma_store,
                             **options)
            return c
        return run

    # "kernel": B's K-major copy made once outside the timing (a weight packed once); the others copy per call
    return (("ptr kmajor", pointers(True)), ("ptr kmajor kernel", pointers(True, copy=False)),
            ("tma kmajor", tma(True, False)), ("tma kmajor pstore", tma(True, False, False)),
            ("tma persist kmajor pstore", tma(True, True, False)),
            ("tma persist kmajor pstore kernel", tma(True, True, False, copy=False)),
            ("tma persist kmajor ws", tma(True, True, False, specialize=True)),
            ("tma persist nmajor pstore", tma(False, True, False)))


def relative_error(c, reference):
    return ((c.double() - reference).norm() / reference.norm()).item()


def shape_rows(M, N, K):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    reference = a.double() @ b.double()
    flops = 2.0 * M * N * K
    rows = []
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = triton.testing.do_bench(lambda: a @ b, warmup=50, rep=300)
        rows.append((f"cublas tf32={'on' if tf32 else 'off'}", "-", ms, relative_error(a @ b, reference)))
    torch.backends.cuda.matmul.allow_tf32 = False
    for precision in PRECISIONS:
        for config in CONFIGS:
            for name, fn in variants(a, b, precision, config):
                try:
                    error = relative_error(fn(), reference)
                    ms = triton.testing.do_bench(fn, warmup=50, rep=300)
                except Exception as exc:  # a config that does not fit, or a form Triton refuses: data
                    rows.append((f"{name} {precision}", config, float("nan"), f"{type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0][:80] if str(exc) else ''}"))
                    continue
                rows.append((f"{name} {precision}", config, ms, error))
    print(f"\n== M={M} N={N} K={K}")
    print(f"{'variant':28s} {'config':24s} {'ms':>8s} {'TFLOP/s':>8s} {'rel err':>10s}")
    for name, config, ms, error in rows:
        tflops = flops / ms / 1e9 if ms == ms else float("nan")
        err = f"{error:10.2e}" if isinstance(error, float) else error
        print(f"{name:28s} {str(config):24s} {ms:8.3f} {tflops:8.1f} {err}", flush=True)


def main():
    global PRECISIONS
    PRECISIONS = tuple(os.environ.get("PRECISIONS", "tf32").split(","))
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    args = [int(x) for x in sys.argv[1:]] or [4096, 4096, 4096, 8192, 8192, 2048]
    for i in range(0, len(args), 3):
        shape_rows(*args[i:i + 3])


if __name__ == "__main__":
    main()
