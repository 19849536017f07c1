/* The plain tiled GEMM (float32, or float16 storage with float32 arithmetic): a TSM x TSN tile
 * of out per work-group of (TSN/WPTN) x (TSM/WPTM) work-items, each computing WPTM x WPTN
 * outputs strided across the tile; TSK-deep slices of A and B staged in local memory. */
#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)
#define NT (RTSM * RTSN)
#define TILE_M TSM
#define TILE_N TSN

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm(GEMM_ARGS) {
    ACT_PARAMS;
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * RTSN + tx;
    const int n0 = get_group_id(0) * TSN, m0 = get_group_id(1) * TSM;
    SPLIT_RANGE;
#ifdef CONV
    CONV_COLUMN(n0 + lid % TSN);
#endif
    __local float As[TSK][TSM];
    __local float Bs[TSK][TSN];
    float acc[WPTM][WPTN];
    for (int i = 0; i < WPTM; ++i)
        for (int j = 0; j < WPTN; ++j) acc[i][j] = 0.0f;
    for (int k0 = kbeg; k0 < kend; k0 += TSK) {
        for (int t = lid; t < TSM * TSK; t += NT) {
            int mm = t / TSK, kk = t % TSK, m = m0 + mm, k = k0 + kk;
            As[kk][mm] = (m < M && k < kend) ? (float)LOAD(A, A_INDEX(b, m, k)) : 0.0f;
        }
        for (int t = lid; t < TSK * TSN; t += NT) {
            int kk = t / TSN, nn = t % TSN, n = n0 + nn, k = k0 + kk;
#ifdef CONV
            int at = CONV_AT(k);
#else
            int at = (n < N && k < kend) ? B_INDEX(b, k, n) : -1;
#endif
            Bs[kk][nn] = at >= 0 ? (float)LOAD(B, at) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TSK; ++kk) {
            float av[WPTM], bv[WPTN];
            for (int i = 0; i < WPTM; ++i) av[i] = As[kk][ty + i * RTSM];
            for (int j = 0; j < WPTN; ++j) bv[j] = Bs[kk][tx + j * RTSN];
            for (int i = 0; i < WPTM; ++i)
                for (int j = 0; j < WPTN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < WPTM; ++i) {
        int m = m0 + ty + i * RTSM;
        if (m >= M) break;
        for (int j = 0; j < WPTN; ++j) {
            int n = n0 + tx + j * RTSN;
            if (n < N) GEMM_STORE(acc[i][j], b, m, n)
        }
    }
    SPLITK_FINISH(lid, NT)
}

#ifndef SPLITK_SERIAL /* the CPU kernel sums its splits in a second launch */
/* The CPU GEMM: no local memory and no barriers (which CPU implementations pay for dearly).
 * A work-item computes WPTM rows of one column n; neighbouring work-items take neighbouring
 * columns, so the device vectorises across them and the caches give the reuse. */
__kernel void gemm_direct(GEMM_ARGS) {
    ACT_PARAMS;
    const int n = get_global_id(0), m0 = get_global_id(1) * WPTM;
    SPLIT_RANGE;
    if (n >= N) return;
    float acc[WPTM];
    for (int i = 0; i < WPTM; ++i) acc[i] = 0.0f;
    const int rows = min(WPTM, M - m0);
    if (rows == WPTM) {
        for (int k = kbeg; k < kend; ++k) {
            const int at = B_INDEX(b, k, n);
            const float bv = at >= 0 ? (float)LOAD(B, max(at, 0)) : 0.0f;
            for (int i = 0; i < WPTM; ++i) acc[i] = fma((float)LOAD(A, A_INDEX(b, m0 + i, k)), bv, acc[i]);
        }
    } else {
        for (int k = kbeg; k < kend; ++k) {
            const int at = B_INDEX(b, k, n);
            const float bv = at >= 0 ? (float)LOAD(B, max(at, 0)) : 0.0f;
            for (int i = 0; i < rows; ++i) acc[i] = fma((float)LOAD(A, A_INDEX(b, m0 + i, k)), bv, acc[i]);
        }
    }
    for (int i = 0; i < rows; ++i) GEMM_STORE(acc[i], b, m0 + i, n)
}
#endif
