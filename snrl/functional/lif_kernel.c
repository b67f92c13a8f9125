/* The LIF sequence kernel of snrl.functional.lif_sequence in C: the forward loop, the
 * reverse walk of the backward pass and the weight gradient; the ALIF loop and walk of
 * snrl.functional.alif_sequence and the readout's loop and scan, at the end (compiled on
 * first use by snrl/functional/_native.py; the torch loops of lif_sequence.py and
 * alif_sequence.py are the reference it is tested against).
 *
 * Layout: everything float32 and C-contiguous. T steps, G layers side by side, B rows, N
 * neurons. u, vs, zs are (T, G, B, N); w is (G, N, N) with row i the presynaptic neuron i;
 * v0, z0 are (G, B, N); alpha is (G, N); starts is (T, B) bytes or NULL. The fresh states fv,
 * fz are (T, G, B, N) when fstep is G B N, or one (G, B, N) for every step when fstep is 0.
 *
 * Per step (the equations of snrl.functional.neurons.lif_step):
 *   I_t = u_t + z_{t-1} W
 *   v_t = I_t + alpha v_{t-1} - threshold z_{t-1}         (subtract)
 *   v_t = I_t + alpha v_{t-1} (1 - z_{t-1})                (zero)
 *   z_t = v_t > threshold
 * where the state before step t is (fv_t, fz_t) for a row that starts an episode at t.
 *
 * Why C: the spikes are binary and sparse (a few per cent of the neurons per step), so
 * z_{t-1} W is the sum of the rows of W whose neuron spiked, a few hundred additions per row
 * instead of a dense N x N product, and one call covers the whole sequence instead of about
 * six torch operations per step.
 */
#include <stddef.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

typedef float v16 __attribute__((vector_size(64)));
/* The same 16 floats at any address, aliasing float data: loads and stores through it are
 * single unaligned vector moves. (Not memcpy into v16 arrays: GCC moves those through the
 * stack in two halves and reads them back whole, a store-forwarding stall on every spike.) */
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

static inline v16 ld(const float *p) { return *(const v16u *)p; }
static inline void st(float *p, v16 x) { *(v16u *)p = x; }

/* Columns per register tile: 128 (eight 16-float sums) where there are 32 vector registers
 * (AVX-512), else 64, so that the sums, a row of W and the factor fit without spilling. */
#if defined(__AVX512F__)
#define WIDE 128
#else
#define WIDE 64
#endif

/* The neurons of a row that spiked (zp != 0): their indices and values in idx and val, their
 * number returned; idx and val have room for N + 16 entries (the vector path writes whole
 * vectors past the last spike). No branch: spikes are unpredictable, and mispredictions cost
 * more than the stores. With AVX-512, 16 neurons at a time: a compare gives the mask of those
 * that spiked, and a compress packs their indices and values (compressed in registers, then
 * stored whole: a compressing store to memory is slow on some of these CPUs). */
static int spike_list(int N, const float *restrict zp, int *restrict idx, float *restrict val) {
    int m = 0, i = 0;
#if defined(__AVX512F__)
    __m512i ids = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i sixteen = _mm512_set1_epi32(16);
    for (; i + 16 <= N; i += 16) {
        const __m512 z = _mm512_loadu_ps(zp + i);
        const __mmask16 k = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_NEQ_UQ);
        _mm512_storeu_si512((void *)(idx + m), _mm512_maskz_compress_epi32(k, ids));
        _mm512_storeu_ps(val + m, _mm512_maskz_compress_ps(k, z));
        m += __builtin_popcount((unsigned)k);
        ids = _mm512_add_epi32(ids, sixteen);
    }
#endif
    for (; i < N; i++) {
        idx[m] = i;
        val[m] = zp[i];
        m += zp[i] != 0.0f;
    }
    return m;
}

/* The rows of a matrix that the m spikes of a row select (i = idx[k], value val[k]) against one
 * row x of N floats, in one of two directions:
 *   gather  (scatter = 0): out = x + sum_k val[k] mat[i, :]   (z_{t-1} W: drive_row)
 *   scatter (scatter = 1): mat[i, :] += val[k] x, each k       (z_{t-1}^T dv: outer_row)
 * Columns go in tiles of WIDE (then 16) whose vectors (the sums, or x) stay in registers while
 * the spikes run: per 16 floats and spike, one load of mat and one multiply-add (and a store,
 * scattering), where working in memory would also load and store out or x for every spike.
 * A tile's sums are independent chains, enough of them to keep both multiply-add units busy.
 * spike_tile is one tile of R vectors at column j0; R and scatter are constants where it is
 * inlined, so the tile's vectors are registers and the branches on scatter are gone. mat is
 * only read when gathering, and out only written then (NULL when scattering). */
static inline __attribute__((always_inline)) void spike_tile(int R, int scatter, int m,
                                                             const int *restrict idx,
                                                             const float *restrict val,
                                                             float *restrict mat, size_t row,
                                                             const float *restrict x, int j0,
                                                             float *restrict out) {
    v16 a[WIDE / 16];
#pragma GCC unroll 8
    for (int q = 0; q < R; q++) a[q] = ld(x + j0 + 16 * q);
    for (int k = 0; k < m; k++) {
        const float c = val[k];
        float *p = mat + (size_t)idx[k] * row + j0;
#pragma GCC unroll 8
        for (int q = 0; q < R; q++) {
            if (scatter)
                st(p + 16 * q, ld(p + 16 * q) + c * a[q]);
            else
                a[q] += c * ld(p + 16 * q);
        }
    }
    if (!scatter) {
#pragma GCC unroll 8
        for (int q = 0; q < R; q++) st(out + j0 + 16 * q, a[q]);
    }
}

/* Every tile of a row (spike_tile); rows whose N is not a multiple of 16 go through plain
 * loops, the spikes added in the order of idx either way. */
static inline __attribute__((always_inline)) void spike_rows(int scatter, int N, int m,
                                                             const int *restrict idx,
                                                             const float *restrict val,
                                                             float *restrict mat,
                                                             const float *restrict x,
                                                             float *restrict out) {
    const size_t row = (size_t)N;
    if (N % 16 == 0) {
        int j0 = 0;
        for (; j0 + WIDE <= N; j0 += WIDE)
            spike_tile(WIDE / 16, scatter, m, idx, val, mat, row, x, j0, out);
        for (; j0 < N; j0 += 16) spike_tile(1, scatter, m, idx, val, mat, row, x, j0, out);
        return;
    }
    if (!scatter)
        for (int j = 0; j < N; j++) out[j] = x[j];
    for (int k = 0; k < m; k++) {
        const float c = val[k];
        float *restrict p = mat + (size_t)idx[k] * row;
        if (scatter)
            for (int j = 0; j < N; j++) p[j] += c * x[j];
        else
            for (int j = 0; j < N; j++) out[j] += c * p[j];
    }
}

/* v = ut + sum_k val[k] W[idx[k], :] for one row of N: the rows of W of the m neurons that
 * spiked, added in the order of idx (spike_rows, gathering). */
static void drive_row(int N, int m, const int *restrict idx, const float *restrict val,
                      const float *restrict w, const float *restrict ut, float *restrict v) {
    spike_rows(0, N, m, idx, val, (float *)w, ut, v); /* w is only read */
}

/* The forward loop. idx and val are scratch for N ints and N floats (the spikes of a row:
 * z_{t-1} W is the sum of the rows of W whose neuron spiked). */
void snrl_lif_forward(int T, int G, int B, int N, const float *u, const float *w,
                      const float *v0, const float *z0, const float *alpha, float threshold,
                      int subtract, const unsigned char *starts, const float *fv,
                      const float *fz, long fstep, float *vs, float *zs, int *idx, float *val) {
    const size_t row = (size_t)N;
    const size_t layer = (size_t)B * row;
    const size_t step = (size_t)G * layer;
    for (int t = 0; t < T; t++) {
        for (int g = 0; g < G; g++) {
            const float *a = alpha + (size_t)g * row;
            const float *wg = w ? w + (size_t)g * row * row : NULL;
            for (int b = 0; b < B; b++) {
                size_t here = (size_t)t * step + (size_t)g * layer + (size_t)b * row;
                const float *vp, *zp;
                if (starts && starts[(size_t)t * B + b]) {
                    size_t f = (size_t)t * fstep + (size_t)g * layer + (size_t)b * row;
                    vp = fv + f;
                    zp = fz + f;
                } else if (t == 0) {
                    vp = v0 + (size_t)g * layer + (size_t)b * row;
                    zp = z0 + (size_t)g * layer + (size_t)b * row;
                } else {
                    vp = vs + here - step;
                    zp = zs + here - step;
                }
                float *v = vs + here;
                float *z = zs + here;
                const float *ut = u + here;
                int m = wg ? spike_list(N, zp, idx, val) : 0;
                drive_row(N, m, idx, val, wg, ut, v);
                if (subtract) {
                    for (int j = 0; j < N; j++) v[j] = (v[j] + a[j] * vp[j]) - threshold * zp[j];
                } else {
                    for (int j = 0; j < N; j++) v[j] = v[j] + (a[j] * vp[j]) * (1.0f - zp[j]);
                }
                for (int j = 0; j < N; j++) z[j] = v[j] > threshold ? 1.0f : 0.0f;
            }
        }
    }
}

/* Rows x vectors of a tile of the product below: 8 rows x 32 columns (16 sums) with 32 vector
 * registers (AVX-512), else 4 rows x 16 columns (the sums of one vector are two AVX
 * registers), so that the sums stay in registers with room for a row of Wt and a factor. */
#if defined(__AVX512F__)
#define MM_ROWS 8
#define MM_VECS 2
#else
#define MM_ROWS 4
#define MM_VECS 1
#endif

/* out[r, j0 + 16 c ...] = sum_k x[r, k] Wt[k, j0 + 16 c ...] for r < rows, c < vecs (both
 * constants where it is inlined, so the sums are registers): one load of Wt per vector and
 * k, then a multiply-add per row. */
static inline __attribute__((always_inline)) void mm_tile(int rows, int vecs, int N,
                                                          const float *restrict x,
                                                          const float *restrict wt, int j0,
                                                          float *restrict out) {
    const size_t row = (size_t)N;
    v16 acc[MM_ROWS][MM_VECS];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int c = 0; c < vecs; c++) acc[r][c] = (v16){0};
    for (int k = 0; k < N; k++) {
        v16 w[MM_VECS];
#pragma GCC unroll 2
        for (int c = 0; c < vecs; c++) w[c] = ld(wt + (size_t)k * row + j0 + 16 * c);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const float xr = x[(size_t)r * row + k];
#pragma GCC unroll 2
            for (int c = 0; c < vecs; c++) acc[r][c] += xr * w[c];
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int c = 0; c < vecs; c++) st(out + (size_t)r * row + j0 + 16 * c, acc[r][c]);
}

/* back += nxt Wt for one row: back[j] += sum_k nxt[k] Wt[k][j] (restrict: no aliasing, so
 * the compiler vectorizes the j loop). The remainder path of matmul_rows. */
static void axpy_row(int N, const float *restrict nxt, const float *restrict wt,
                     float *restrict back) {
    const size_t row = (size_t)N;
    for (int k = 0; k < N; k++) {
        const float c = nxt[k];
        const float *restrict w = wt + (size_t)k * row;
        for (int j = 0; j < N; j++) back[j] += c * w[j];
    }
}

/* back = nxt Wt for B rows of N ((B, N) x (N, N)) in register tiles of MM_ROWS rows (mm_tile).
 * Columns are the outer loop: a slab of Wt (N x 32 floats, 16 kB at N = 128) stays in the
 * first-level cache while every tile of rows passes over it. Rows past the last whole tile
 * (and every row when N is not a multiple of 16) take axpy_row. */
static void matmul_rows(int B, int N, const float *restrict nxt, const float *restrict wt,
                        float *restrict back) {
    const size_t row = (size_t)N;
    int tiled = 0;
    if (N % 16 == 0) {
        tiled = B - B % MM_ROWS;
        const int slab = 16 * MM_VECS;
        int j0 = 0;
        for (; j0 + slab <= N; j0 += slab)
            for (int b = 0; b < tiled; b += MM_ROWS)
                mm_tile(MM_ROWS, MM_VECS, N, nxt + (size_t)b * row, wt, j0, back + (size_t)b * row);
        for (; j0 < N; j0 += 16)
            for (int b = 0; b < tiled; b += MM_ROWS)
                mm_tile(MM_ROWS, 1, N, nxt + (size_t)b * row, wt, j0, back + (size_t)b * row);
    }
    for (int b = tiled; b < B; b++) {
        float *restrict out = back + (size_t)b * row;
        for (int j = 0; j < N; j++) out[j] = 0.0f;
        axpy_row(N, nxt + (size_t)b * row, wt, out);
    }
}

/* The surrogate derivatives the backward walk computes itself, per row, from the membranes
 * (codes of snrl/functional/_native.py's _KINDS; formulas of snrl.functional.surrogate):
 *   1 fast_sigmoid       s = 1 / (1 + p1 |x|)^2            p1 = slope
 *   2 atan               s = p2 / (1 + (p1 x)^2)           p1 = pi slope / 2, p2 = slope / 2
 *   3 triangular         s = -p1 for x >= 0, p1 for x < 0  p1 = slope
 *   4 straight_through   s = 1
 * at x = v - threshold. Any other surrogate's derivative arrives computed (s in the walk).
 * Each operation rounds as in Surrogate.derivative's torch ops, in the same order, and none is
 * fused into a multiply-add: the walk gets the derivatives torch would give, bit for bit. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void surrogate_row(int N, int kind, float p1, float p2, float threshold,
                          const float *restrict v, float *restrict s) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    switch (kind) {
    case 1:
        for (int j = 0; j < N; j++) {
            const float t = __builtin_fabsf(v[j] - threshold) * p1 + 1.0f;
            s[j] = 1.0f / (t * t);
        }
        break;
    case 2:
        for (int j = 0; j < N; j++) {
            const float y = (v[j] - threshold) * p1;
            s[j] = (1.0f / (y * y + 1.0f)) * p2;
        }
        break;
    case 3:
        for (int j = 0; j < N; j++) s[j] = v[j] - threshold >= 0.0f ? -p1 : p1;
        break;
    default:
        for (int j = 0; j < N; j++) s[j] = 1.0f;
    }
}

/* The reverse walk of the backward pass of snrl.functional.lif_sequence (the adjoint of the
 * step above; equations in the docstring of lif_sequence.py):
 *   dv_t = gv_t + s_t gz_t + s_t back_t + decay_t dv_{t+1}
 *   back_t = dv_{t+1} Wb^T (Wb = W - threshold I for subtract), - alpha v_t dv_{t+1} for zero
 *   decay_t = alpha (subtract), alpha (1 - z_t) (zero)
 * where dv_{t+1} counts as 0 in a row whose episode starts at t + 1. s is the surrogate
 * derivative at v - threshold (T, G, B, N), or NULL: then each row's is computed here by
 * surrogate_row (kind, p1, p2). gz, gv may be NULL (no gradient arriving); wbt is Wb
 * transposed, (G, N, N), or NULL; scratch holds (B + 1) x N floats. Writes dv (T, G, B, N) and
 * first (G, B, N), dv_0 masked by the starts at step 0 (unless first is NULL).
 * With more = 1 the sequence is a chunk of a longer one: dv and starts continue in memory
 * past step T - 1 (dv of step T already computed), and step T - 1 takes it as dv_{t+1}.
 */
void snrl_lif_backward(int T, int G, int B, int N, const float *s, int kind, float p1, float p2,
                       const float *gz, const float *gv, const float *wbt, const float *vs,
                       const float *zs, const float *alpha, float threshold, int subtract,
                       const unsigned char *starts, float *dv, float *first, float *scratch,
                       int more) {
    const size_t row = (size_t)N;
    const size_t layer = (size_t)B * row;
    const size_t step = (size_t)G * layer;
    float *srow = scratch + (size_t)B * row; /* s of one row, when computed here */
    for (int t = T - 1; t >= 0; t--) {
        int has_next = t + 1 < T || more;
        for (int g = 0; g < G; g++) {
            const float *a = alpha + (size_t)g * row;
            size_t base = (size_t)t * step + (size_t)g * layer;
            if (has_next && wbt) /* scratch = dv_{t+1} Wb^T for every row (rows whose
                                    episode starts at t + 1 are computed and not used) */
                matmul_rows(B, N, dv + base + step, wbt + (size_t)g * row * row, scratch);
            for (int b = 0; b < B; b++) {
                size_t here = base + (size_t)b * row;
                float *d = dv + here;
                const float *st = s ? s + here : srow;
                if (!s) surrogate_row(N, kind, p1, p2, threshold, vs + here, srow);
                for (int j = 0; j < N; j++) d[j] = 0.0f;
                if (gz) {
                    const float *gzt = gz + here;
                    for (int j = 0; j < N; j++) d[j] = st[j] * gzt[j];
                }
                if (gv) {
                    const float *gvt = gv + here;
                    for (int j = 0; j < N; j++) d[j] += gvt[j];
                }
                if (!has_next || (starts && starts[(size_t)(t + 1) * B + b])) continue;
                const float *nxt = dv + here + step;
                const float *v = vs + here;
                const float *z = zs + here;
                const float *back = scratch + (size_t)b * row;
                if (subtract) {
                    if (wbt) {
                        for (int j = 0; j < N; j++) d[j] += st[j] * back[j] + a[j] * nxt[j];
                    } else {
                        for (int j = 0; j < N; j++)
                            d[j] += st[j] * (-threshold * nxt[j]) + a[j] * nxt[j];
                    }
                } else {
                    for (int j = 0; j < N; j++) {
                        float bj = (wbt ? back[j] : 0.0f) - a[j] * v[j] * nxt[j];
                        d[j] += st[j] * bj + (a[j] - a[j] * z[j]) * nxt[j];
                    }
                }
            }
        }
    }
    if (!first) return;
    for (int g = 0; g < G; g++) {
        for (int b = 0; b < B; b++) {
            size_t here = (size_t)g * layer + (size_t)b * row;
            int masked = T == 0 || (starts && starts[b]);
            for (int j = 0; j < N; j++) first[here + j] = masked ? 0.0f : dv[here + j];
        }
    }
}

/* dw[i, :] += val[k] d for the m spikes i = idx[k] of one row (spike_rows, scattering: d in
 * registers, the rows of dw loaded, added to and stored once per spike). */
static void outer_row(int N, int m, const int *restrict idx, const float *restrict val,
                      const float *restrict d, float *restrict dw) {
    spike_rows(1, N, m, idx, val, dw, d, NULL);
}

/* dW = sum over steps and rows of z_{t-1}^T dv_t, (G, N, N), the spikes each step starts from
 * being z0 at t = 0, zs[t - 1] after, and fz[t] where the row's episode starts at t (as in
 * the forward pass). Binary, sparse spikes make this a few row additions per spike instead of
 * a dense (N, T B) x (T B, N) product. fz may be NULL when starts is NULL (fstep as in the
 * forward loop); idx and val are scratch for N ints and N floats, as in the forward loop.
 */
void snrl_lif_weight_grad(int T, int G, int B, int N, const float *z0, const float *zs,
                          const unsigned char *starts, const float *fz, long fstep,
                          const float *dv, float *dw, int *idx, float *val) {
    const size_t row = (size_t)N;
    const size_t layer = (size_t)B * row;
    const size_t step = (size_t)G * layer;
    for (size_t x = 0; x < (size_t)G * row * row; x++) dw[x] = 0.0f;
    for (int t = 0; t < T; t++) {
        for (int g = 0; g < G; g++) {
            float *dwg = dw + (size_t)g * row * row;
            for (int b = 0; b < B; b++) {
                size_t here = (size_t)t * step + (size_t)g * layer + (size_t)b * row;
                const float *zp;
                if (starts && starts[(size_t)t * B + b])
                    zp = fz + (size_t)t * fstep + (size_t)g * layer + (size_t)b * row;
                else if (t == 0)
                    zp = z0 + (size_t)g * layer + (size_t)b * row;
                else
                    zp = zs + here - step;
                int m = spike_list(N, zp, idx, val);
                outer_row(N, m, idx, val, dv + here, dwg);
            }
        }
    }
}

/* a + b c as torch.addcmul computes it on this CPU: one fused multiply-add (one rounding)
 * where the CPU has them (torch's vectorized kernels use them), else a product and a sum. */
#if defined(__FMA__) || defined(__AVX512F__)
#define ADDCMUL(a, b, c) __builtin_fmaf((b), (c), (a))
#else
#define ADDCMUL(a, b, c) ((a) + (b) * (c))
#endif

/* The leaky-integrator readout of snrl.functional.lif_sequence.li_sequence, v_t = u_t +
 * alpha v_{t-1}, over a whole sequence: u, vs are (T, B, N), v0 is (B, N), alpha is (N); the
 * membrane before step t is the fresh one (fv, with fstep as for the LIF loop, G = 1) where
 * the row starts an episode at t. Each step rounds as the torch loop's torch.addcmul (the
 * test compares them bit for bit), so a run does not depend on whether the kernel built; the
 * loop of about three torch ops per step cost ~250 us per call on PPO's sequences. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
void snrl_li_forward(int T, int B, int N, const float *u, const float *v0, const float *alpha,
                     const unsigned char *starts, const float *fv, long fstep, float *vs) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    const size_t row = (size_t)N;
    const size_t step = (size_t)B * row;
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++) {
            size_t here = (size_t)t * step + (size_t)b * row;
            const float *vp;
            if (starts && starts[(size_t)t * B + b])
                vp = fv + (size_t)t * fstep + (size_t)b * row;
            else if (t == 0)
                vp = v0 + (size_t)b * row;
            else
                vp = vs + here - step;
            const float *ut = u + here;
            float *v = vs + here;
            for (int j = 0; j < N; j++) v[j] = ADDCMUL(ut[j], alpha[j], vp[j]);
        }
    }
}

/* Its backward scan: dv_t = g_t + alpha (keep_{t+1} dv_{t+1}), keep_{t+1} 0 for a row that
 * starts an episode at t + 1 (its state before that step was replaced) and 1 otherwise, as a
 * product (so that a non-finite gradient stays one, as in torch); g and dv are (T, B, N).
 * Rounded as the torch loop's tensor.addcmul_. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
void snrl_li_backward(int T, int B, int N, const float *g, const float *alpha,
                      const unsigned char *starts, float *dv) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    const size_t row = (size_t)N;
    const size_t step = (size_t)B * row;
    for (int t = T - 1; t >= 0; t--) {
        for (int b = 0; b < B; b++) {
            size_t here = (size_t)t * step + (size_t)b * row;
            const float *gt = g + here;
            float *d = dv + here;
            if (t == T - 1) {
                for (int j = 0; j < N; j++) d[j] = gt[j];
                continue;
            }
            const float *nxt = d + step;
            if (starts && starts[(size_t)(t + 1) * B + b]) {
                for (int j = 0; j < N; j++) d[j] = ADDCMUL(gt[j], alpha[j], nxt[j] * 0.0f);
            } else {
                for (int j = 0; j < N; j++) d[j] = ADDCMUL(gt[j], alpha[j], nxt[j]);
            }
        }
    }
}

/* The ALIF sequence of snrl.functional.alif_sequence (one layer, G = 1): per step (the
 * equations of snrl.functional.neurons.alif_step)
 *   a_t   = rho a_{t-1} + (1 - rho) z_{t-1}
 *   thr_t = threshold + beta a_t
 *   v_t   = I_t + alpha v_{t-1} - thr_t z_{t-1}           (subtract)
 *   v_t   = I_t + alpha v_{t-1} (1 - z_{t-1})              (zero)
 *   z_t   = v_t > thr_t
 * with I_t = u_t + z_{t-1} W by the spike rows of W (drive_row), and the state before step t
 * the fresh (fv_t, fz_t, fa_t) for a row that starts an episode at t. u, vs, zs, as are
 * (T, B, N); v0, z0, a0 are (B, N); alpha and rho are (N); fv, fz, fa as in the LIF loop
 * (fstep 0 or B N floats per step). The torch loop of alif_sequence.py is the reference. */
void snrl_alif_forward(int T, int B, int N, const float *u, const float *w, const float *v0,
                       const float *z0, const float *a0, const float *alpha, const float *rho,
                       float threshold, float beta, int subtract, const unsigned char *starts,
                       const float *fv, const float *fz, const float *fa, long fstep,
                       float *vs, float *zs, float *as, int *idx, float *val) {
    const size_t row = (size_t)N;
    const size_t step = (size_t)B * row;
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++) {
            size_t here = (size_t)t * step + (size_t)b * row;
            const float *vp, *zp, *ap;
            if (starts && starts[(size_t)t * B + b]) {
                size_t f = (size_t)t * fstep + (size_t)b * row;
                vp = fv + f;
                zp = fz + f;
                ap = fa + f;
            } else if (t == 0) {
                vp = v0 + (size_t)b * row;
                zp = z0 + (size_t)b * row;
                ap = a0 + (size_t)b * row;
            } else {
                vp = vs + here - step;
                zp = zs + here - step;
                ap = as + here - step;
            }
            float *v = vs + here;
            float *z = zs + here;
            float *a = as + here;
            int m = w ? spike_list(N, zp, idx, val) : 0;
            drive_row(N, m, idx, val, w, u + here, v);
            for (int j = 0; j < N; j++) {
                const float at = rho[j] * ap[j] + (1.0f - rho[j]) * zp[j];
                const float thr = beta * at + threshold;
                float vj;
                if (subtract)
                    vj = (v[j] + alpha[j] * vp[j]) - thr * zp[j];
                else
                    vj = v[j] + (alpha[j] * vp[j]) * (1.0f - zp[j]);
                a[j] = at;
                v[j] = vj;
                z[j] = vj > thr ? 1.0f : 0.0f;
            }
        }
    }
}

/* The reverse walk of the ALIF sequence's backward pass (equations in the docstring of
 * alif_sequence.py), one layer:
 *   dz_t = gz_t + dv_{t+1} Wb^T - beta a_{t+1} dv_{t+1} + (1 - rho) da_{t+1}   (subtract,
 *          Wb = W - threshold I: the baseline threshold folded in)
 *   dz_t = gz_t + dv_{t+1} W^T - alpha v_t dv_{t+1} + (1 - rho) da_{t+1}       (zero)
 *   dv_t = gv_t + s_t dz_t + decay_t dv_{t+1}     decay_t = alpha, or alpha (1 - z_t)
 *   da_t = ga_t + rho da_{t+1} - beta s_t dz_t - beta zp_t dv_t   (the last term: subtract)
 * where dv_{t+1}, da_{t+1} count as 0 in a row whose episode starts at t + 1, zp_t is the spike
 * vector step t starts from (T, B, N), and s_t the surrogate derivative at v_t - thr_t: given
 * (s, T B N) or, when s is NULL, computed here by surrogate_row (kind, p1, p2). gz, gv, ga may
 * be NULL, wbt is Wb transposed (N, N) or NULL; scratch holds (B + 2) N floats. Writes dv, da
 * (T, B, N) and first_v, first_a (B, N): dv_0, da_0 masked where step 0 starts an episode. */
void snrl_alif_backward(int T, int B, int N, const float *s, int kind, float p1, float p2,
                        const float *gz, const float *gv, const float *ga, const float *wbt,
                        const float *vs, const float *zs, const float *as, const float *zp,
                        const float *alpha, const float *rho, float threshold, float beta,
                        int subtract, const unsigned char *starts, float *dv, float *da,
                        float *first_v, float *first_a, float *scratch) {
    const size_t row = (size_t)N;
    const size_t step = (size_t)B * row;
    float *srow = scratch + step;    /* s of one row, when computed here */
    float *xrow = scratch + step + row; /* v - thr_t of that row */
    for (int t = T - 1; t >= 0; t--) {
        const int has_next = t + 1 < T;
        if (has_next && wbt) matmul_rows(B, N, dv + (size_t)(t + 1) * step, wbt, scratch);
        for (int b = 0; b < B; b++) {
            size_t here = (size_t)t * step + (size_t)b * row;
            const float *v = vs + here, *z = zs + here, *a = as + here;
            const float *st = s ? s + here : srow;
            if (!s) {
                for (int j = 0; j < N; j++) xrow[j] = v[j] - (a[j] * beta + threshold);
                surrogate_row(N, kind, p1, p2, 0.0f, xrow, srow);
            }
            const int next = has_next && !(starts && starts[(size_t)(t + 1) * B + b]);
            const float *nv = dv + here + step, *na = da + here + step;
            const float *an = as + here + step, *back = scratch + (size_t)b * row;
            float *d = dv + here, *e = da + here;
            for (int j = 0; j < N; j++) {
                float dz = gz ? gz[here + j] : 0.0f;
                float dvj = 0.0f, daj = 0.0f;
                if (next) {
                    float bj = wbt ? back[j] : (subtract ? -threshold * nv[j] : 0.0f);
                    bj -= subtract ? beta * an[j] * nv[j] : alpha[j] * v[j] * nv[j];
                    dz += bj + (1.0f - rho[j]) * na[j];
                    dvj = (subtract ? alpha[j] : alpha[j] - alpha[j] * z[j]) * nv[j];
                    daj = rho[j] * na[j];
                }
                const float sdz = st[j] * dz;
                dvj += sdz + (gv ? gv[here + j] : 0.0f);
                daj -= beta * sdz;
                if (subtract) daj -= beta * zp[here + j] * dvj;
                d[j] = dvj;
                e[j] = daj + (ga ? ga[here + j] : 0.0f);
            }
        }
    }
    for (int b = 0; b < B; b++) {
        const int masked = T == 0 || (starts && starts[b]);
        for (int j = 0; j < N; j++) {
            size_t x = (size_t)b * row + j;
            first_v[x] = masked ? 0.0f : dv[x];
            first_a[x] = masked ? 0.0f : da[x];
        }
    }
}
