/* Rotary position embedding (rotary_embedding) of X: [B, H, S, D]
 * head-major, or with SEQ_MAJOR [B, S, H * D]. The first ROT entries of each head rotate in pairs —
 * the halves (entry d with d + ROT / 2) or, with INTERLEAVED, the even and odd entries — by the
 * angle of row (b, s) of the tables COS and SIN [rows, ROT / 2] (of type P, read with LOADP): the row
 * ids[b * S + s] with IDS (IDX), else b * S + s, or s with ONE_BATCH (tables of one batch row, [1, S,
 * ROT / 2], shared by the batch); the other entries pass through. One work-item per element (n of
 * them; a work-group may run past).
 * Defines: D, H, S, ROT, HALF (ROT / 2), P, LOADP, and IDX (int without IDS), SEQ_MAJOR, INTERLEAVED, IDS,
 * ONE_BATCH. */

__kernel void rotary(__global const T* x, __global const P* cos_t, __global const P* sin_t,
                     __global const IDX* ids, __global T* out, long n) {
    long e = get_global_id(0);
    if (e >= n) return;
    int d = e % D;
#ifdef SEQ_MAJOR
    long bs = e / (D * H);
#else
    long bs = e / ((long)D * S * H) * S + (e / D) % S;
#endif
    if (d >= ROT) {
        STORE(out, e, LOAD(x, e));
        return;
    }
#ifdef INTERLEAVED
    int pair = d / 2;
    bool first = d % 2 == 0;
    long partner = first ? e + 1 : e - 1;
#else
    int pair = d % HALF;
    bool first = d < HALF;
    long partner = first ? e + HALF : e - HALF;
#endif
#if defined(IDS)
    long row = (long)ids[bs];
#elif defined(ONE_BATCH)
    long row = bs % S;
#else
    long row = bs;
#endif
    float c = LOADP(cos_t, row * HALF + pair), s = LOADP(sin_t, row * HALF + pair);
    float v = (float)LOAD(x, e), p = (float)LOAD(x, partner);
    STORE(out, e, first ? v * c - p * s : p * s + v * c);
}
