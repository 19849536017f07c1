/* Attention of a few query rows over a key/value cache (cached_attention's decode step): a
 * work-group of NT work-items per query row of a (batch, head), the keys spread across them, so
 * a step's handful of rows keeps every lane busy (attention.cl gives each row one work-item).
 * Keys pass in chunks of CH: each work-item scores its keys of the chunk into local memory, the
 * work-group reduces the chunk's max and sum (an online softmax across chunks), and then work-item
 * t accumulates output dims t, t + NT, ... over the chunk's keys, reading V's rows coalesced.
 *
 * Layouts, strides, the score (attention_score.h) and PAST as in attention.cl; NT is a power of
 * two, ACC = ceil(DV / NT). Defines besides attention.cl's: NT, CH, ACC. */

inline float group_reduce(__local float* scratch, float x, int lid, bool take_max) {
    scratch[lid] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = NT / 2; stride > 0; stride /= 2) {
        if (lid < stride)
            scratch[lid] = take_max ? fmax(scratch[lid], scratch[lid + stride]) : scratch[lid] + scratch[lid + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

__kernel void decode_attention(__global const T* q, __global const T* k, __global const T* v, __global T* out,
                               MASK_ARG, LENGTHS_ARG, int ms0, int ms1, int ms2, int ms3) {
    __local float qs[D];
    __local float p[CH];
    __local float scratch[NT];
    int lid = get_local_id(0), group = get_group_id(0);
    int row = group % SQ, bh = group / SQ, b = bh / HQ, h = bh % HQ, kvh = h / (HQ / HKV);
    __global const T* qp = q + (long)b * Q_B + (long)h * Q_H + (long)row * Q_S;
    for (int d = lid; d < D; d += NT) qs[d] = (float)LOAD(qp, d);
    barrier(CLK_LOCAL_MEM_FENCE);
    long mrow = (long)b * ms0 + (long)h * ms1 + (long)row * ms2;
    int past = (int)lengths[b], keys = min(SKV, past + SQ);
    __global const T* kp = k + (long)b * K_B + (long)kvh * K_H;
    __global const T* vp = v + (long)b * V_B + (long)kvh * V_H;
    float acc[ACC];
    for (int a = 0; a < ACC; ++a) acc[a] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int start = 0; start < keys; start += CH) {
        int count = min(CH, keys - start);
        float chunk_max = -INFINITY;
        for (int jj = lid; jj < count; jj += NT) {
            int j = start + jj;
            float s = 0.0f;
            for (int d = 0; d < D; ++d) s += qs[d] * (float)LOAD(kp, (long)j * K_S + d);
            s = score(s, past + row, j, keys, mask, mrow, ms3);
            p[jj] = s;
            chunk_max = fmax(chunk_max, s);
        }
        float m_new = fmax(m, group_reduce(scratch, chunk_max, lid, true));
        if (m_new == -INFINITY) continue;  /* every key of the chunk dropped, and every one before */
        float sum = 0.0f;
        for (int jj = lid; jj < count; jj += NT) {
            float e = exp2(p[jj] - m_new);
            p[jj] = e;
            sum += e;
        }
        float correction = exp2(m - m_new);
        l = l * correction + group_reduce(scratch, sum, lid, false);  /* its barriers publish p */
        for (int a = 0; a < ACC; ++a) {
            int d = lid + a * NT;
            if (d >= DV) break;
            float total = acc[a] * correction;
            for (int jj = 0; jj < count; ++jj) total += p[jj] * (float)LOAD(vp, (long)(start + jj) * V_S + d);
            acc[a] = total;
        }
        m = m_new;
        barrier(CLK_LOCAL_MEM_FENCE);  /* p is read before the next chunk writes it */
    }
    __global T* op = out + (long)b * O_B + (long)h * O_H + (long)row * O_S;
    if (l == 0.0f) l = INFINITY;  /* no key: acc is 0, and so is the row */
    for (int a = 0; a < ACC; ++a) {
        int d = lid + a * NT;
        if (d < DV) STORE(op, d, acc[a] / l);
    }
}
