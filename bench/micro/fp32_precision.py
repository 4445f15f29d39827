"""float32 products on the GPU: each tl.dot input_precision Triton 3.6 offers on NVIDIA (ieee, tf32, tf32x3,
bf16x3, bf16x6), with B read N-contiguous (torch.matmul's [K, N]) or K-contiguous (nn.Linear's weight, [N, K]),
over a few tiles, beside cuBLAS with TF32 off and on; each result's error against float64 and whether it passes
KernelBench's allclose at 1e-4 and 1e-2 on torch.randn and torch.rand inputs. Reads only: it decides which
precision and operand layout the code generator should use at each tolerance (issue 21). Run from the repository
root on a GPU machine:  python3 bench/micro/fp32_precision.py [M N K ...]   (default 4096 4096 4096, then an
implicit-GEMM-like 32768 x 128 x 1152)."""
import sys

import torch
import triton
import triton.language as tl

PRECISIONS = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")
# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
CONFIGS = ((128, 128, 32, 4, 3), (128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (64, 128, 32, 4, 4),
           (128, 64, 32, 4, 4))


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sbk, sbn, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C = A @ B, A [M, K] row-major, B at strides (sbk, sbn); tiles in groups of 8 rows."""
    tile = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = tile // (8 * tiles_n)
    rows = tl.minimum(tl.cdiv(M, BLOCK_M) - group * 8, 8)
    tile_m = group * 8 + (tile % (8 * tiles_n)) % rows
    tile_n = (tile % (8 * tiles_n)) // rows
    m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ka = k0 + tl.arange(0, BLOCK_K)[None, :]
        kb = k0 + tl.arange(0, BLOCK_K)[:, None]
        a = tl.load(a_ptr + m * K + ka, mask=(m < M) & (ka < K), other=0.0)
        b = tl.load(b_ptr + kb * sbk + n * sbn, mask=(kb < K) & (n < N), other=0.0)
        acc += tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + m * N + n, acc, mask=(m < M) & (n < N))


def run(a, b, precision, config):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device)
    bm, bn, bk, warps, stages = config
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    mm[grid](a, b, c, M, N, K, b.stride(0), b.stride(1), precision, bm, bn, bk, num_warps=warps,
             num_stages=stages)
    return c


def errors(c, reference):
    """Relative error of the whole output, and allclose at 1e-4 and 1e-2 as KernelBench checks."""
    exact = reference.to(torch.float32)
    relative = ((c.double() - reference).norm() / reference.norm()).item()
    return relative, torch.allclose(c, exact, atol=1e-4, rtol=1e-4), torch.allclose(c, exact, atol=1e-2, rtol=1e-2)


def shape_rows(M, N, K):
    """Timed on randn inputs (each precision and layout at its fastest config), checked on randn and rand."""
    rows = []
    flops = 2.0 * M * N * K
    chosen = {}
    for draw in ("randn", "rand"):
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = getattr(torch, draw)(M, K, device="cuda", generator=gen)
        b_kn = getattr(torch, draw)(K, N, device="cuda", generator=gen)
        b_nk = b_kn.t().contiguous().t()  # the same matrix, K contiguous
        reference = a.double() @ b_kn.double()
        timed = draw == "randn"
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            ms = triton.testing.do_bench(lambda: a @ b_kn) if timed else float("nan")
            rows.append((draw, f"cuBLAS {'tf32' if tf32 else 'fp32'}", "-", "-", ms, flops,
                         *errors(a @ b_kn, reference)))
        torch.backends.cuda.matmul.allow_tf32 = False
        for precision in PRECISIONS:
            for layout, b in (("N-contig", b_kn), ("K-contig", b_nk)):
                if timed:
                    best = None
                    for config in CONFIGS:
                        try:
                            run(a, b, precision, config)
                            ms = triton.testing.do_bench(lambda: run(a, b, precision, config))
                        except Exception as error:  # out of resources: the config does not fit
                            print(f"# {precision} {layout} {config}: {type(error).__name__}", file=sys.stderr)
                            continue
                        if best is None or ms < best[0]:
                            best = (ms, config)
                    chosen[precision, layout] = best
                best = chosen[precision, layout]
                if best is None:
                    rows.append((draw, precision, layout, "none fit", float("nan"), flops, float("nan"), False,
                                 False))
                    continue
                c = run(a, b, precision, best[1])
                rows.append((draw, precision, layout, "x".join(map(str, best[1])),
                             best[0] if timed else float("nan"), flops, *errors(c, reference)))
    return rows


def main():
    args = [int(v) for v in sys.argv[1:]]
    shapes = [tuple(args[i:i + 3]) for i in range(0, len(args), 3)] or [(4096, 4096, 4096), (32768, 128, 1152)]
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    for M, N, K in shapes:
        print(f"\n## {M} x {N} x {K}")
        print(f"{'inputs':6s} {'kernel':12s} {'B':8s} {'config':14s} {'ms':>8s} {'TFLOP/s':>8s} {'rel err':>9s} 1e-4 1e-2")
        for draw, kernel, layout, config, ms, flops, rel, ok4, ok2 in shape_rows(M, N, K):
            tflops = flops / ms / 1e9 if ms == ms and ms > 0 else float("nan")
            print(f"{draw:6s} {kernel:12s} {layout:8s} {config:14s} {ms:8.3f} {tflops:8.1f} {rel:9.2e} "
                  f"{'yes' if ok4 else 'no ':4s} {'yes' if ok2 else 'no'}")


if __name__ == "__main__":
    main()
