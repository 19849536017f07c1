/* The GEMV of a few rows on k-contiguous weights (b_sk = 1: a [N, K] weight read as its transpose,
 * as decoders' projections hold them): out(m, n) = sum_k A(m, k) B(k, n) for m < GEMV_ROWS, bound
 * by reading B once. K, b_sb and b_sn are multiples of VW, so that VW consecutive k of a column are
 * one aligned 16-byte load.
 *
 * A work-group of GEMV_THREADS work-items owns GEMV_COLS columns: rows of LANES work-items stream
 * COLS_PER consecutive columns each, LANES 16-byte loads across k side by side, so that a row's
 * loads of one column are one run of LANES * 16 bytes; a work-item issues UNROLL such loads per
 * column before it uses them. Each of its VW values of A, read where they lie (cached: every row of
 * the work-group reads the same ones; one 16-byte load where A is k-contiguous, VEC_A), multiplies
 * its COLS_PER columns' weights, with no barrier in the loop.
 * A work-item's float32 sums are added up across its row in local memory and stored by GEMM_STORE;
 * with SPLITK_SERIAL the work-groups of one column block split K, and the last to finish applies
 * the epilogue (SPLITK_FINISH, gemm_index.h). */
#ifdef STORAGE_HALF
#define VW 8
#define VEC float8
#define LOADV(p, i) vloada_half8(0, (p) + (i))
#define DOTV(a, w) (dot((a).lo, (w).lo) + dot((a).hi, (w).hi))
#else
#define VW 4
#define VEC float4
#define LOADV(p, i) (*(__global const float4*)((p) + (i)))
#define DOTV(a, w) dot((a), (w))
#endif
#define LANES 32
#define COLS_PER (GEMV_COLS * LANES / GEMV_THREADS)
#define UNROLL 2
#define SPAN (LANES * VW) /* the k a row of work-items reads per load */
#define TILE_M GEMV_ROWS
#define TILE_N GEMV_COLS

/* A(m, k .. k + VW - 1) from element i, k's stride sk. */
#define A_F(i) ((float)LOAD(A, (i)))
inline VEC a_vec(__global const T* A, int i, int sk) {
#ifdef VEC_A
    return LOADV(A, i);
#elif defined(STORAGE_HALF)
    return (float8)(A_F(i), A_F(i + sk), A_F(i + 2 * sk), A_F(i + 3 * sk), A_F(i + 4 * sk), A_F(i + 5 * sk),
                    A_F(i + 6 * sk), A_F(i + 7 * sk));
#else
    return (float4)(A_F(i), A_F(i + sk), A_F(i + 2 * sk), A_F(i + 3 * sk));
#endif
}

__kernel __attribute__((reqd_work_group_size(GEMV_THREADS, 1, 1)))
void gemv_t(GEMM_ARGS) {
    ACT_PARAMS;
    SPLIT_RANGE;
    const int lid = get_local_id(0), lane = lid % LANES, row = lid / LANES;
    const int m0 = 0, n0 = get_group_id(0) * GEMV_COLS, c0 = row * COLS_PER;
    __local float sums[GEMV_COLS * GEMV_ROWS][LANES + 1];
    __global const T* Bn[COLS_PER];
    #pragma unroll
    for (int c = 0; c < COLS_PER; ++c) Bn[c] = B + B_INDEX(b, 0, min(n0 + c0 + c, N - 1));
    float acc[GEMV_ROWS][COLS_PER];
    #pragma unroll
    for (int m = 0; m < GEMV_ROWS; ++m) {
        #pragma unroll
        for (int c = 0; c < COLS_PER; ++c) acc[m][c] = 0.0f;
    }
    for (int k = kbeg + lane * VW; k < kend; k += SPAN * UNROLL) {
        VEC w[UNROLL][COLS_PER];
        #pragma unroll
        for (int s = 0; s < UNROLL; ++s) {
            #pragma unroll
            for (int c = 0; c < COLS_PER; ++c) w[s][c] = k + s * SPAN < kend ? LOADV(Bn[c], k + s * SPAN) : (VEC)(0.0f);
        }
        #pragma unroll
        for (int s = 0; s < UNROLL; ++s) {
            if (k + s * SPAN < kend) {
                #pragma unroll
                for (int m = 0; m < GEMV_ROWS; ++m) {
                    const VEC a = a_vec(A, A_INDEX(b, m, k + s * SPAN), a_sk);
                    #pragma unroll
                    for (int c = 0; c < COLS_PER; ++c) acc[m][c] += DOTV(a, w[s][c]);
                }
            }
        }
    }
    #pragma unroll
    for (int m = 0; m < GEMV_ROWS; ++m) {
        #pragma unroll
        for (int c = 0; c < COLS_PER; ++c) sums[(c0 + c) * GEMV_ROWS + m][lane] = acc[m][c];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int f = lid; f < GEMV_COLS * GEMV_ROWS; f += GEMV_THREADS) {
        const int col = f / GEMV_ROWS, m = f % GEMV_ROWS;
        float v = 0.0f;
        for (int q = 0; q < LANES; ++q) v += sums[f][q];
        if (n0 + col < N) GEMM_STORE(v, b, m, n0 + col)
    }
    SPLITK_FINISH(lid, GEMV_THREADS)
}
