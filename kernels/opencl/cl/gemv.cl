/* The GEMV of a few rows (fully-connected layers and decoders at batch 1 to 8): out(m, n) = sum_k A(m, k) B(k, n)
 * for m < GEMV_ROWS, bound by reading B once. B is n-contiguous (b_sn = 1), with N, b_sk and b_sb
 * multiples of VW, so that VW consecutive columns are one aligned 16-byte load.
 *
 * A work-group of GEMV_THREADS work-items owns GEMV_COLS columns: LANES work-items across a row,
 * KROWS such rows of lanes down K. A work-item takes UNROLL_K consecutive rows of k per step and
 * issues their loads before it uses them. A's rows are staged in local memory KC at a time, so that
 * a step reads one float4 of A per row m. The float32 sums of a work-group's rows of lanes are added
 * up in local memory, one row m at a time, and stored by GEMM_STORE; with SPLITK_SERIAL the
 * work-groups of one column block split K, and the last to finish applies the epilogue
 * (SPLITK_FINISH, gemm_index.h). */
#ifdef STORAGE_HALF
#define VW 8
#define VEC float8
#define LOADV(p, i) vloada_half8(0, (p) + (i))
#define STOREV(v, p) vstore8((v), 0, (p))
#else
#define VW 4
#define VEC float4
#define LOADV(p, i) (*(__global const float4*)((p) + (i)))
#define STOREV(v, p) vstore4((v), 0, (p))
#endif
#define LANES (GEMV_COLS / VW)
#define KROWS (GEMV_THREADS / LANES)
#define UNROLL_K 4 /* one float4 of A per row m */
#define STEP (KROWS * UNROLL_K)
#define KC (4 * STEP)
#define TILE_M GEMV_ROWS
#define TILE_N GEMV_COLS
#define A_AT(m, k) ((k) < kend ? (float)LOAD(A, A_INDEX(b, (m), (k))) : 0.0f)

__kernel __attribute__((reqd_work_group_size(GEMV_THREADS, 1, 1)))
void gemv(GEMM_ARGS) {
    ACT_PARAMS;
    SPLIT_RANGE;
    const int lid = get_local_id(0), lane = lid % LANES, r0 = lid / LANES * UNROLL_K;
    const int m0 = 0, n0 = get_group_id(0) * GEMV_COLS, n = n0 + lane * VW;
    __local float4 As[GEMV_ROWS][KC / 4];
    __local float sums[KROWS][GEMV_COLS];
    __global const T* Bn = B + B_INDEX(b, 0, min(n, N - VW));
    VEC acc[GEMV_ROWS];
    for (int m = 0; m < GEMV_ROWS; ++m) acc[m] = (VEC)(0.0f);
    for (int c0 = kbeg; c0 < kend; c0 += KC) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < GEMV_ROWS * KC / 4; t += GEMV_THREADS) {
            const int m = t / (KC / 4), k = c0 + t % (KC / 4) * 4;
            As[m][t % (KC / 4)] = (float4)(A_AT(m, k), A_AT(m, k + 1), A_AT(m, k + 2), A_AT(m, k + 3));
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int rows = n < N ? min(KC, kend - c0) : 0;
        for (int r = r0; r < rows; r += STEP) {
            VEC w[UNROLL_K];
            for (int u = 0; u < UNROLL_K; ++u) w[u] = r + u < rows ? LOADV(Bn, (c0 + r + u) * b_sk) : (VEC)(0.0f);
            for (int m = 0; m < GEMV_ROWS; ++m) {
                const float4 a = As[m][r / 4];
                acc[m] = fma((VEC)(a.s3), w[3], fma((VEC)(a.s2), w[2], fma((VEC)(a.s1), w[1],
                             fma((VEC)(a.s0), w[0], acc[m]))));
            }
        }
    }
    for (int m = 0; m < GEMV_ROWS; ++m) {
        barrier(CLK_LOCAL_MEM_FENCE);
        STOREV(acc[m], &sums[lid / LANES][lane * VW]);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = lid; c < GEMV_COLS && n0 + c < N; c += GEMV_THREADS) {
            float v = 0.0f;
            for (int q = 0; q < KROWS; ++q) v += sums[q][c];
            GEMM_STORE(v, b, m, n0 + c)
        }
    }
    SPLITK_FINISH(lid, GEMV_THREADS)
}
