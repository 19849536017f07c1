/* Attention of a few query rows over a key/value cache (cached_attention's decode step): a
 * work-group of NT work-items per query row of a (batch, head), the keys spread across them, so
 * a step's handful of rows keeps every lane busy (attention.cl gives each row one work-item).
 * Keys pass in chunks of CH: each work-item scores its keys of the chunk into local memory, the
 * work-group reduces the chunk's max and sum (an online softmax across chunks), and then work-item
 * t accumulates output dims t, t + NT, ... over the chunk's keys, reading V's rows coalesced.
 *
 * The step's own keys and values (kn, vn: [B, HKV, SQ, D] as logical dims at KN_ / VN_ strides
 * from KN_OFF / VN_OFF, and Q from Q_OFF: a packed projection passes one buffer thrice) are read
 * from where they are and appended to the caches here, each row's by the work-groups of
 * the first query head of its key/value head (no kv_append launches); a row at SKV or beyond is
 * dropped, as kv_append drops it.
 *
 * With ROTARY the query and the step's keys are rotated first (rotary.cl's rotation, from the
 * tables cos_t and sin_t [rows, HALF] of type P: row ids[b * SQ + s] with IDS (PIDX), s with
 * ONE_BATCH, else b * SQ + s), the keys into local memory, and the cache takes the rotated keys.
 *
 * Layouts, strides, the score (attention_score.h) and PAST as in attention.cl; NT is a power of
 * two, ACC = ceil(DV / NT). Defines besides attention.cl's: NT, CH, ACC, Q_OFF, KN_B/H/S/OFF, VN_B/H/S/OFF, and
 * with ROTARY: ROT, HALF, P, LOADP, INTERLEAVED, IDS with PIDX, ONE_BATCH. */

#ifdef ROTARY
#ifdef IDS
#define ROTARY_ARGS __global const P* cos_t, __global const P* sin_t, __global const PIDX* ids
#else
#define ROTARY_ARGS __global const P* cos_t, __global const P* sin_t, __global const void* ids
#endif

/* x rounded as a T stores it (the rotation's output is a T where rotary_embedding writes it). */
inline float as_stored(float x) {
#if defined(STORAGE_HALF) || defined(NATIVE_HALF)
    ushort bits;
    vstore_half_rte(x, 0, (half*)&bits);
    return vload_half(0, (half*)&bits);
#else
    return x;
#endif
}

/* Entry d of the head row x rotated by table row trow (entries from ROT on pass through). */
inline float turned(__global const T* x, int d, __global const P* cos_t, __global const P* sin_t, long trow) {
    if (d >= ROT) return (float)LOAD(x, d);
#ifdef INTERLEAVED
    int pair = d / 2, partner = d % 2 == 0 ? d + 1 : d - 1;
    bool first = d % 2 == 0;
#else
    int pair = d % HALF, partner = d < HALF ? d + HALF : d - HALF;
    bool first = d < HALF;
#endif
    float c = LOADP(cos_t, trow * HALF + pair), s = LOADP(sin_t, trow * HALF + pair);
    float v = (float)LOAD(x, d), p = (float)LOAD(x, partner);
    return as_stored(first ? v * c - p * s : p * s + v * c);
}

inline long table_row(int b, int s, __global const void* ids) {
#if defined(IDS)
    return (long)((__global const PIDX*)ids)[b * SQ + s];
#elif defined(ONE_BATCH)
    return s;
#else
    return (long)b * SQ + s;
#endif
}
#define QUERY(d) turned(qp, (d), cos_t, sin_t, table_row(b, row, ids))
#define NEW_KEY(s, d) kr[(s) * D + (d)]
#else
#define ROTARY_ARGS __global const void* cos_t, __global const void* sin_t, __global const void* ids
#define QUERY(d) ((float)LOAD(qp, (d)))
#define NEW_KEY(s, d) ((float)LOAD(knp, (long)(s) * KN_S + (d)))
#endif

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

/* Value j's row: the cache's before the step's own, the step's from where it is. */
#define ROW(cache, cs, step, ss, j) ((j) < past ? (cache) + (long)(j) * (cs) : (step) + (long)((j) - past) * (ss))

__kernel void decode_attention(__global const T* q, __global const T* kn, __global const T* vn, __global T* k,
                               __global T* v, __global T* out, MASK_ARG, LENGTHS_ARG, ROTARY_ARGS, int ms0, int ms1,
                               int ms2, int ms3) {
    __local float qs[D];
    __local float p[CH];
    __local float scratch[NT];
#ifdef ROTARY
    __local float kr[SQ * D];  /* the step's keys, rotated */
#endif
    int lid = get_local_id(0), group = get_group_id(0);
    int row = group % SQ, bh = group / SQ, b = bh / HQ, h = bh % HQ, kvh = h / (HQ / HKV);
    __global const T* qp = q + Q_OFF + (long)b * Q_B + (long)h * Q_H + (long)row * Q_S;
    for (int d = lid; d < D; d += NT) qs[d] = QUERY(d);
    long mrow = (long)b * ms0 + (long)h * ms1 + (long)row * ms2;
    int past = (int)lengths[b], keys = min(SKV, past + SQ);
    __global T* kp = k + (long)b * K_B + (long)kvh * K_H;
    __global T* vp = v + (long)b * V_B + (long)kvh * V_H;
    __global const T* knp = kn + KN_OFF + (long)b * KN_B + (long)kvh * KN_H;
    __global const T* vnp = vn + VN_OFF + (long)b * VN_B + (long)kvh * VN_H;
#ifdef ROTARY
    for (int e = lid; e < SQ * D; e += NT) kr[e] = turned(knp + (long)(e / D) * KN_S, e % D, cos_t, sin_t,
                                                       table_row(b, e / D, ids));
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    if (h % (HQ / HKV) == 0 && past + row < SKV) {
        for (int d = lid; d < D; d += NT) STORE(kp, (long)(past + row) * K_S + d, NEW_KEY(row, d));
        for (int d = lid; d < DV; d += NT) STORE(vp, (long)(past + row) * V_S + d, LOAD(vnp, (long)row * VN_S + d));
    }
    float acc[ACC];
    for (int a = 0; a < ACC; ++a) acc[a] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int start = 0; start < keys; start += CH) {
        int count = min(CH, keys - start);
        float chunk_max = -INFINITY;
        for (int jj = lid; jj < count; jj += NT) {
            int j = start + jj;
            float s = 0.0f;
            if (j < past) {
                for (int d = 0; d < D; ++d) s += qs[d] * (float)LOAD(kp, (long)j * K_S + d);
            } else {
                for (int d = 0; d < D; ++d) s += qs[d] * NEW_KEY(j - past, d);
            }
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
            for (int jj = 0; jj < count; ++jj) total += p[jj] * (float)LOAD(ROW(vp, V_S, vnp, VN_S, start + jj), d);
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
