/* The LIF sequence kernel of snrl.functional.lif_sequence in C: the forward loop, the
 * reverse walk of the backward pass and the weight gradient (compiled on first use by
 * snrl/functional/_native.py; the torch loops in lif_sequence.py are the reference it is
 * tested against).
 *
 * Layout: everything float32 and C-contiguous. T steps, G layers side by side, B rows, N
 * neurons. u, vs, zs, fv, fz are (T, G, B, N); w is (G, N, N) with row i the presynaptic
 * neuron i; v0, z0 are (G, B, N); alpha is (G, N); starts is (T, B) bytes or NULL.
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
#include <string.h>

typedef float v16 __attribute__((vector_size(64)));

/* The neurons of a row that spiked (zp != 0): their indices and values in idx and val, their
 * number returned. No branch: spikes are unpredictable, and mispredictions cost more than the
 * stores. */
static int spike_list(int N, const float *restrict zp, int *restrict idx, float *restrict val) {
    int m = 0;
    for (int i = 0; i < N; i++) {
        idx[m] = i;
        val[m] = zp[i];
        m += zp[i] != 0.0f;
    }
    return m;
}

/* Four 16-float registers from p[0..64). */
static inline void load4(v16 r[4], const float *p) {
    for (int q = 0; q < 4; q++) memcpy(&r[q], p + 16 * q, sizeof r[q]);
}

/* v = ut + sum_k val[k] W[idx[k], :] for one row of N: the rows of W of the m neurons that
 * spiked, added in the order of idx. Columns go in tiles of 64 (four 16-float registers, one
 * AVX-512 register or two AVX ones each) whose sums stay in registers while the spikes run:
 * one load of W and one multiply-add per 16 floats and spike, where adding into v in memory
 * would also load and store v for every spike. (memcpy is an unaligned load or store.) */
static void drive_row(int N, int m, const int *restrict idx, const float *restrict val,
                      const float *restrict w, const float *restrict ut, float *restrict v) {
    const size_t row = (size_t)N;
    int j0 = 0;
    if (N % 16 == 0) {
        for (; j0 + 64 <= N; j0 += 64) {
            v16 a[4], x[4];
            load4(a, ut + j0);
            for (int k = 0; k < m; k++) {
                const float c = val[k];
                load4(x, w + (size_t)idx[k] * row + j0);
                for (int q = 0; q < 4; q++) a[q] += c * x[q];
            }
            memcpy(v + j0, a, sizeof a);
        }
        for (; j0 < N; j0 += 16) {
            v16 a0, x;
            memcpy(&a0, ut + j0, sizeof a0);
            for (int k = 0; k < m; k++) {
                memcpy(&x, w + (size_t)idx[k] * row + j0, sizeof x);
                a0 += val[k] * x;
            }
            memcpy(v + j0, &a0, sizeof a0);
        }
        return;
    }
    for (int j = 0; j < N; j++) v[j] = ut[j];
    for (int k = 0; k < m; k++) {
        const float c = val[k];
        const float *restrict wr = w + (size_t)idx[k] * row;
        for (int j = 0; j < N; j++) v[j] += c * wr[j];
    }
}

/* The forward loop. idx and val are scratch for N ints and N floats (the spikes of a row:
 * z_{t-1} W is the sum of the rows of W whose neuron spiked). */
void snrl_lif_forward(int T, int G, int B, int N, const float *u, const float *w,
                      const float *v0, const float *z0, const float *alpha, float threshold,
                      int subtract, const unsigned char *starts, const float *fv,
                      const float *fz, float *vs, float *zs, int *idx, float *val) {
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
                    vp = fv + here;
                    zp = fz + here;
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

/* back = nxt Wt for B rows of N ((B, N) x (N, N)), in tiles of 4 rows x 16 columns whose 64
 * sums stay in four vector registers while k runs: one load of Wt and four multiply-adds per
 * k, instead of a load and a store of back as well. (GCC/Clang vector extension: 16 floats,
 * one AVX-512 register or two AVX ones; memcpy is an unaligned load or store.) */
static void matmul_rows(int B, int N, const float *restrict nxt, const float *restrict wt,
                        float *restrict back) {
    const size_t row = (size_t)N;
    int b = 0;
    if (N % 16 == 0) {
        for (; b + 4 <= B; b += 4) {
            const float *x0 = nxt + (size_t)b * row, *x1 = x0 + row, *x2 = x1 + row,
                        *x3 = x2 + row;
            for (int j0 = 0; j0 < N; j0 += 16) {
                v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                for (int k = 0; k < N; k++) {
                    v16 w;
                    memcpy(&w, wt + (size_t)k * row + j0, sizeof w);
                    a0 += x0[k] * w;
                    a1 += x1[k] * w;
                    a2 += x2[k] * w;
                    a3 += x3[k] * w;
                }
                float *out = back + (size_t)b * row + j0;
                memcpy(out, &a0, sizeof a0);
                memcpy(out + row, &a1, sizeof a1);
                memcpy(out + 2 * row, &a2, sizeof a2);
                memcpy(out + 3 * row, &a3, sizeof a3);
            }
        }
    }
    for (; b < B; b++) {
        float *restrict out = back + (size_t)b * row;
        for (int j = 0; j < N; j++) out[j] = 0.0f;
        axpy_row(N, nxt + (size_t)b * row, wt, out);
    }
}

/* The reverse walk of the backward pass of snrl.functional.lif_sequence (the adjoint of the
 * step above; equations in the docstring of lif_sequence.py):
 *   dv_t = gv_t + s_t gz_t + s_t back_t + decay_t dv_{t+1}
 *   back_t = dv_{t+1} Wb^T (Wb = W - threshold I for subtract), - alpha v_t dv_{t+1} for zero
 *   decay_t = alpha (subtract), alpha (1 - z_t) (zero)
 * where dv_{t+1} counts as 0 in a row whose episode starts at t + 1. s is the surrogate
 * derivative at v - threshold (T, G, B, N); gz, gv may be NULL (no gradient arriving); wbt is
 * Wb transposed, (G, N, N), or NULL; scratch holds B x N floats. Writes dv (T, G, B, N) and
 * first (G, B, N), dv_0 masked by the starts at step 0 (unless first is NULL).
 * With more = 1 the sequence is a chunk of a longer one: dv and starts continue in memory
 * past step T - 1 (dv of step T already computed), and step T - 1 takes it as dv_{t+1}.
 */
void snrl_lif_backward(int T, int G, int B, int N, const float *s, const float *gz,
                       const float *gv, const float *wbt, const float *vs, const float *zs,
                       const float *alpha, float threshold, int subtract,
                       const unsigned char *starts, float *dv, float *first, float *scratch,
                       int more) {
    const size_t row = (size_t)N;
    const size_t layer = (size_t)B * row;
    const size_t step = (size_t)G * layer;
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
                const float *st = s + here;
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

/* dw[i, :] += val[k] d for the m spikes i = idx[k] of one row: d in registers (tiles of 64
 * columns), the rows of dw loaded, added to and stored once per spike. */
static void outer_row(int N, int m, const int *restrict idx, const float *restrict val,
                      const float *restrict d, float *restrict dw) {
    const size_t row = (size_t)N;
    int j0 = 0;
    if (N % 16 == 0) {
        for (; j0 + 64 <= N; j0 += 64) {
            v16 dd[4];
            load4(dd, d + j0);
            for (int k = 0; k < m; k++) {
                float *o = dw + (size_t)idx[k] * row + j0;
                const float c = val[k];
                for (int q = 0; q < 4; q++) {
                    v16 x;
                    memcpy(&x, o + 16 * q, sizeof x);
                    x += c * dd[q];
                    memcpy(o + 16 * q, &x, sizeof x);
                }
            }
        }
        for (; j0 < N; j0 += 16) {
            v16 d0, x;
            memcpy(&d0, d + j0, sizeof d0);
            for (int k = 0; k < m; k++) {
                float *o = dw + (size_t)idx[k] * row + j0;
                memcpy(&x, o, sizeof x);
                x += val[k] * d0;
                memcpy(o, &x, sizeof x);
            }
        }
        return;
    }
    for (int k = 0; k < m; k++) {
        const float c = val[k];
        float *restrict o = dw + (size_t)idx[k] * row;
        for (int j = 0; j < N; j++) o[j] += c * d[j];
    }
}

/* dW = sum over steps and rows of z_{t-1}^T dv_t, (G, N, N), the spikes each step starts from
 * being z0 at t = 0, zs[t - 1] after, and fz[t] where the row's episode starts at t (as in
 * the forward pass). Binary, sparse spikes make this a few row additions per spike instead of
 * a dense (N, T B) x (T B, N) product. fz may be NULL when starts is NULL; idx and val are
 * scratch for N ints and N floats, as in the forward loop.
 */
void snrl_lif_weight_grad(int T, int G, int B, int N, const float *z0, const float *zs,
                          const unsigned char *starts, const float *fz, const float *dv,
                          float *dw, int *idx, float *val) {
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
                    zp = fz + here;
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
