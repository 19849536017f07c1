/* Fused attention with an online softmax (flash-attention style, float32 math): a work-group
 * holds BQ query rows of one (batch, head), one row per work-item; K and V pass through local
 * memory in tiles of BK keys, each row keeping its running max, sum and output accumulator in
 * private memory, so no score matrix reaches device memory.
 *
 * Q [B, HQ, SQ, D], K [B, HKV, SKV, D], V [B, HKV, SKV, DV], Out [B, HQ, SQ, DV] as logical dims,
 * element (b, h, s, d) of X at b * X_B + h * X_H + s * X_S + d (Q_, K_, V_, O_ strides: head-major
 * or the sequence-major [B, S, H * D]); query head h reads key/value head h / (HQ / HKV).
 * Defines: D, DV, HQ, HKV, SQ, SKV, the strides, BQ, BK, SCALE;
 * SOFTCAP (c * tanh(s / c)); ZERO_NAN (attention_score.h's OUT_VALUE); CAUSAL with OFFSET (key j > row + OFFSET dropped); MASK_BOOL
 * (uchar, 0 drops) or MASK_T / LOADM (added), read at mstride . (b, h, row, j) for keys j < MW
 * (keys past MW drop); LENGTHS with IDX (keys j >= lengths[b] drop); PAST with IDX
 * (cached_attention: lengths[b] is what K and V, its caches, held before this step: row r is at
 * position lengths[b] + r, which CAUSAL and WINDOW measure from, and keys from lengths[b] + SQ on
 * drop): each score through attention_score.h's score(), in base 2, so the softmax runs on exp2.
 * Key tiles stop at the last key a row may read. A row whose keys all drop gives 0 / 0 = NaN, as
 * the numpy kernel of scaled_dot_product_attention does (0 with ZERO_NAN), and 0 with PAST, as
 * cached_attention's. */

__kernel void attention(__global const T* q, __global const T* k, __global const T* v, __global T* out, MASK_ARG,
                        LENGTHS_ARG, int ms0, int ms1, int ms2, int ms3) {
    __local float kt[BK * D];
    __local float vt[BK * DV];
    int lid = get_local_id(0), row = get_group_id(0) * BQ + lid;
    int bh = get_global_id(1), b = bh / HQ, h = bh % HQ;
    int kvh = h / (HQ / HKV);
    bool live = row < SQ;
    float qr[D], acc[DV], sc[BK];
    __global const T* qp = q + (long)b * Q_B + (long)h * Q_H + (long)(live ? row : 0) * Q_S;
    for (int d = 0; d < D; ++d) qr[d] = (float)LOAD(qp, d);
    long mrow = (long)b * ms0 + (long)h * ms1 + (long)(live ? row : 0) * ms2;
    for (int d = 0; d < DV; ++d) acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    int keys = SKV, past = 0;
#ifdef LENGTHS
    keys = (int)min((long)SKV, (long)lengths[b]);
#endif
#ifdef PAST
    past = (int)lengths[b];
    keys = min(SKV, past + SQ);
#endif
    __global const T* kp = k + (long)b * K_B + (long)kvh * K_H;
    __global const T* vp = v + (long)b * V_B + (long)kvh * V_H;
    for (int start = 0; start < keys; start += BK) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = lid; e < BK * D; e += BQ) {
            int j = start + e / D;
            kt[e] = j < SKV ? (float)LOAD(kp, (long)j * K_S + e % D) : 0.0f;
        }
        for (int e = lid; e < BK * DV; e += BQ) {
            int j = start + e / DV;
            vt[e] = j < SKV ? (float)LOAD(vp, (long)j * V_S + e % DV) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float tile_max = -INFINITY;
        for (int jj = 0; jj < BK; ++jj) {
            int j = start + jj;
            float s = 0.0f;
            for (int d = 0; d < D; ++d) s += qr[d] * kt[jj * D + d];
            s = score(s, past + row, j, keys, mask, mrow, ms3);
            sc[jj] = s;
            tile_max = fmax(tile_max, s);
        }
        float m_new = fmax(m, tile_max);
        if (m_new > -INFINITY) {
            float correction = exp2(m - m_new);
            l *= correction;
            for (int d = 0; d < DV; ++d) acc[d] *= correction;
            for (int jj = 0; jj < BK; ++jj) {
                float p = exp2(sc[jj] - m_new);
                l += p;
                for (int d = 0; d < DV; ++d) acc[d] += p * vt[jj * DV + d];
            }
            m = m_new;
        }
    }
    if (!live) return;
    __global T* op = out + (long)b * O_B + (long)h * O_H + (long)row * O_S;
#ifdef PAST
    if (l == 0.0f) l = INFINITY;  /* no key: acc is 0, and so is the row */
#endif
    for (int d = 0; d < DV; ++d) STORE(op, d, OUT_VALUE(acc[d] / l));
}
