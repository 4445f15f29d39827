# Device call 2: matmul config sweep (ieee/tf32/tf32x3), flash-attention prototype, SDPA capture on CUDA.
import sys, time, json, math, torch, triton, triton.language as tl
from triton.testing import do_bench
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
out = sys.argv[1]
lines = []
def log(s):
    print(s, flush=True); lines.append(s)

@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, P: tl.constexpr, G: tl.constexpr):
    pid = tl.program_id(0)
    gm = tl.cdiv(M, BM); gn = tl.cdiv(N, BN)
    group = pid // (G * gn); rows = tl.minimum(gm - group * G, G)
    tm = group * G + (pid % (G * gn)) % rows; tn = (pid % (G * gn)) // rows
    mi = tm * BM + tl.arange(0, BM)[:, None]; ni = tn * BN + tl.arange(0, BN)[None, :]
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + tl.arange(0, BK)[None, :]; kb = k0 + tl.arange(0, BK)[:, None]
        x = tl.load(a + mi * K + ka, (mi < M) & (ka < K), other=0.0)
        y = tl.load(b + kb * N + ni, (kb < K) & (ni < N), other=0.0)
        acc += tl.dot(x, y, input_precision=P)
    tl.store(c + mi * N + ni, acc, (mi < M) & (ni < N))

def run_mm(A, B, cfg, P):
    M, K = A.shape; N = B.shape[1]; C = torch.empty(M, N, device="cuda")
    BM, BN, BK, w, s = cfg
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    f = lambda: mm[grid](A, B, C, M, N, K, BM, BN, BK, P, 8, num_warps=w, num_stages=s)
    f(); return C, f

cfgs = [(64,64,32,4,3),(128,128,32,8,3),(128,64,64,4,3),(128,128,32,4,4),(128,256,32,8,3),(256,128,32,8,3),
        (128,128,64,8,3),(64,128,32,4,4),(128,64,32,4,4),(128,128,16,8,3),(64,128,16,4,4),(128,128,8,8,2),(64,64,16,4,4),(32,64,32,4,3)]
t_start = time.time()
for (M, N, K) in [(4096, 4096, 4096), (1024, 1024, 1024), (1024, 1024, 8192)]:
    A = torch.rand(M, K, device="cuda"); B = torch.rand(K, N, device="cuda")
    ref = (A.double() @ B.double())
    tc = do_bench(lambda: A @ B)
    torch.backends.cuda.matmul.allow_tf32 = True; tt = do_bench(lambda: A @ B); torch.backends.cuda.matmul.allow_tf32 = False
    log(f"== {M}x{N}x{K}: cublas fp32 {tc:.3f} ms, cublas tf32 {tt:.3f} ms")
    for P in ["ieee", "tf32", "tf32x3"]:
        best = None
        for cfg in cfgs:
            try:
                C, f = run_mm(A, B, cfg, P)
                err = ((C.double() - ref).abs().max() / ref.abs().max()).item()
                t = do_bench(f)
                log(f"{P:6s} {cfg} {t:.3f} ms err {err:.1e}")
                if best is None or t < best[0]: best = (t, cfg)
            except Exception as e:
                log(f"{P:6s} {cfg} FAIL {type(e).__name__}: {str(e)[:80]}")
        log(f"BEST {M}x{N}x{K} {P}: {best} vs cublas fp32 {tc:.3f} -> {tc/best[0]:.2f}x")
log(f"mm sweep {time.time()-t_start:.0f} s")

@triton.jit
def flash(q, k, v, o, mask, T, scale, D: tl.constexpr, DP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
          P: tl.constexpr, MASKED: tl.constexpr):
    tile = tl.program_id(0); bh = tl.program_id(1).to(tl.int64)
    rows = tile * BM + tl.arange(0, BM)
    d = tl.arange(0, DP)
    base = bh * T * D
    qt = tl.load(q + base + rows[:, None] * D + d[None, :], (rows[:, None] < T) & (d[None, :] < D), other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32); l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, DP], tl.float32)
    for n0 in range(0, T, BN):
        cols = n0 + tl.arange(0, BN)
        kt = tl.load(k + base + cols[None, :] * D + d[:, None], (cols[None, :] < T) & (d[:, None] < D), other=0.0)
        s = tl.dot(qt, kt, input_precision=P) * scale
        valid = (cols[None, :] < T) & (rows[:, None] >= 0)
        if MASKED:
            mk = tl.load(mask + rows[:, None] * 1024 + cols[None, :], (rows[:, None] < T) & (cols[None, :] < T), other=0.0)
            valid = valid & (mk != 0)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = tl.load(v + base + cols[:, None] * D + d[None, :], (cols[:, None] < T) & (d[None, :] < D), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, vt, input_precision=P)
        m_i = m_new
    acc = tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)
    tl.store(o + base + rows[:, None] * D + d[None, :], acc, (rows[:, None] < T) & (d[None, :] < D))

def attn_ref(q, k, v, mask):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    if mask is not None:
        att = att.masked_fill(mask[:q.size(2), :q.size(2)] == 0, float("-inf"))
    return torch.softmax(att, -1) @ v

for (B, H, T, D, masked) in [(128, 8, 512, 96, True), (2, 4, 16384, 32, False), (16, 12, 1024, 64, True)]:
    q, k, v = (torch.rand(B, H, T, D, device="cuda") for _ in range(3))
    mask = torch.tril(torch.ones(1024, 1024, device="cuda")) if masked else None
    with torch.no_grad():
        ref = attn_ref(q.double(), k.double(), v.double(), mask.double() if masked else None).float() if T * T * B * H < 2**31 // 2 else None
        te = do_bench(lambda: attn_ref(q, k, v, mask))
        cf = torch.compile(attn_ref)
        cf(q, k, v, mask); tcmp = do_bench(lambda: cf(q, k, v, mask))
    log(f"== attention B{B} H{H} T{T} D{D} masked {masked}: eager {te:.3f} ms compile {tcmp:.3f} ms")
    o = torch.empty_like(q)
    DP = triton.next_power_of_2(D)
    for P in ["ieee", "tf32", "tf32x3"]:
        for BM, BN, w, s in [(64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 3), (128, 32, 4, 2), (64, 128, 8, 2), (32, 64, 4, 2)]:
            try:
                f = lambda: flash[(triton.cdiv(T, BM), B * H)](q, k, v, o, mask if masked else q, T, 1.0 / math.sqrt(D), D, DP, BM, BN, P, masked, num_warps=w, num_stages=s)
                f()
                err = ((o - ref).abs().max() / ref.abs().max()).item() if ref is not None else float("nan")
                t = do_bench(f)
                log(f"flash {P:6s} BM{BM} BN{BN} w{w} s{s}: {t:.3f} ms err {err:.1e} ({te/t:.2f}x eager, {tcmp/t:.2f}x compile)")
            except Exception as e:
                log(f"flash {P} {BM} {BN} FAIL {type(e).__name__}: {str(e)[:100]}")
    del q, k, v, o, ref
    torch.cuda.empty_cache()

# SDPA capture on CUDA: which ops does torch.export + egg's decomposition give?
sys.path.insert(0, "python")
try:
    from egg_worker import capture
    class M(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
    args = [torch.rand(2, 2, 64, 32, device="cuda") for _ in range(3)]
    ep = capture._exported(M().cuda(), args)
    log("SDPA ops on CUDA: " + ", ".join(str(n.target) for n in ep.graph.nodes if n.op == "call_function"))
except Exception as e:
    log(f"SDPA capture FAIL {type(e).__name__}: {e}")
open(out, "w").write("\n".join(lines) + "\n")
