"""bf16 4096^3 GEMM on the GPU: egg's generated kernel shape (loads upcast to float32, masked and cast back before
tl.dot) against the same kernel with half loads fed to tl.dot directly, over a few tiles, beside torch.matmul.
Reads only: it decides what the code generator should emit for half products (issue 25). Run from the repository
root on a GPU machine:  python3 bench/micro/bf16_gemm.py"""
import torch
import triton
import triton.language as tl

N = 4096


@triton.jit
def tile_rows_columns(N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's output rows and columns, tiles in groups of 8 rows (as egg's kernels order them)."""
    tile = tl.program_id(0)
    tiles_n = N // BLOCK_N
    group = tile // (8 * tiles_n)
    rows = tl.minimum(N // BLOCK_M - group * 8, 8)
    tile_m = group * 8 + (tile % (8 * tiles_n)) % rows
    tile_n = (tile % (8 * tiles_n)) // rows
    return tile_m * BLOCK_M + tl.arange(0, BLOCK_M)[:, None], tile_n * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]


@triton.jit
def mm_upcast(a_ptr, b_ptr, c_ptr, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    m, n = tile_rows_columns(N, BLOCK_M, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, N, BLOCK_K):
        ka = k0 + tl.arange(0, BLOCK_K)[None, :]
        kb = k0 + tl.arange(0, BLOCK_K)[:, None]
        a = tl.where((m < N) & (ka < N), tl.load(a_ptr + ka + N * m, (m < N) & (ka < N)).to(tl.float32), 0.0)
        b = tl.where((n < N) & (kb < N), tl.load(b_ptr + N * kb + n, (n < N) & (kb < N)).to(tl.float32), 0.0)
        acc += tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    tl.store(c_ptr + N * m + n, acc.to(tl.bfloat16), (m < N) & (n < N))


@triton.jit
def mm_direct(a_ptr, b_ptr, c_ptr, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    m, n = tile_rows_columns(N, BLOCK_M, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, N, BLOCK_K):
        ka = k0 + tl.arange(0, BLOCK_K)[None, :]
        kb = k0 + tl.arange(0, BLOCK_K)[:, None]
        a = tl.load(a_ptr + ka + N * m, (m < N) & (ka < N), other=0.0)
        b = tl.load(b_ptr + N * kb + n, (n < N) & (kb < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + N * m + n, acc.to(tl.bfloat16), (m < N) & (n < N))


def main():
    torch.manual_seed(0)
    a = torch.rand(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.rand(N, N, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ b.float()
    rows = [("torch.matmul", "-", triton.testing.do_bench(lambda: a @ b), (a @ b).float())]
    for kernel in (mm_upcast, mm_direct):
        for bm, bn, bk, warps, stages in ((128, 128, 32, 4, 3), (128, 128, 64, 4, 3), (128, 128, 64, 8, 4),
                                          (128, 256, 64, 8, 3), (256, 128, 64, 8, 3)):
            c = torch.empty(N, N, device="cuda", dtype=torch.bfloat16)
            grid = ((N // bm) * (N // bn),)

            def run():
                kernel[grid](a, b, c, N=N, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)
            try:
                run()
                ms = triton.testing.do_bench(run)
                rows.append((kernel.__name__, f"{bm}x{bn}x{bk} w{warps} s{stages}", ms, c.float()))
            except Exception as error:  # out of shared memory for a tile: report and go on
                rows.append((kernel.__name__, f"{bm}x{bn}x{bk} w{warps} s{stages}", float("nan"), None))
                print("failed:", kernel.__name__, bm, bn, bk, type(error).__name__, str(error)[:300])
    flops = 2 * N ** 3
    print(torch.cuda.get_device_name(), "bf16", N)
    print(f"{'kernel':14s} {'tile':22s} {'ms':>8s} {'TFLOP/s':>8s} {'rel_l2':>9s}")
    for name, tile, ms, out in rows:
        err = float("nan") if out is None else ((out - ref).norm() / ref.norm()).item()
        print(f"{name:14s} {tile:22s} {ms:8.3f} {flops / ms / 1e9:8.1f} {err:9.2e}")


if __name__ == "__main__":
    main()
