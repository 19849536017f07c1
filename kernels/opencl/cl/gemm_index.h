/* Operand addressing shared by the GEMM kernels: out[b](m, n) = sum_k A[b](m, k) * B[b](k, n).
 *
 * Plain GEMM: A, B and out are strided by the int arguments (batch, row, column strides), so
 * transposed operands and broadcast batches need no copy; the bias index is
 * b * bias_sb + m * bias_sm + n * bias_sn.
 * CONV (implicit GEMM, NCHW): the batch index is the group g, A is the filter [O, CG*KH*KW],
 * B(k, n) is the input pixel under tap k = (c, i, j) of output position n = (image, oh, ow)
 * (zero in the padding), and out(m, n) is Output[image, g*OG + m, oh, ow]. Geometry by defines:
 * C H W O OG CG OH OW KH KW SH SW DH DW PT PL (IN_NHWC, OUT_NHWC: channels-last tensors). */
#define A_INDEX(b, m, k) ((b) * a_sb + (m) * a_sm + (k) * a_sk)
#ifdef CONV
#define OHW (OH * OW)
/* Input element (image, channel c, row y, column z); IN_NHWC / OUT_NHWC: the input / the output
 * (and the residual) are channels-last, out(m, n) at n * O + m. */
#ifdef IN_NHWC
#define IN_AT(img, c, y, z) ((((img) * H + (y)) * W + (z)) * C + (c))
#else
#define IN_AT(img, c, y, z) ((((img) * C + (c)) * H + (y)) * W + (z))
#endif
/* The output pixel of column n: (image, row, column). POOL (NHWC outputs on tensor cores): column
 * n is pixel n % 4 of the 2x2 window n / 4 of the pooled map, and the epilogue stores each window's
 * maximum at its own index, n / 4. */
#if POOL
#define POOL_W (OW / 2)
#define POOL_HW ((OH / 2) * (OW / 2))
#define COL_IMG(n) ((n) / 4 / POOL_HW)
#define COL_Y(n) ((n) / 4 % POOL_HW / POOL_W * 2 + (n) % 4 / 2)
#define COL_X(n) ((n) / 4 % POOL_HW % POOL_W * 2 + (n) % 2)
#define OUT_INDEX(b, m, n) ((n) / 4 * O + (b) * OG + (m))
#else
#define COL_IMG(n) ((n) / OHW)
#define COL_Y(n) ((n) % OHW / OW)
#define COL_X(n) ((n) % OW)
#endif
#if POOL
#elif defined(OUT_NHWC)
#define OUT_INDEX(b, m, n) ((n) * O + (b) * OG + (m))
#else
#define OUT_INDEX(b, m, n) ((((n) / OHW) * O + (b) * OG + (m)) * OHW + (n) % OHW)
#endif
inline int conv_b_index(int g, int k, int n) {
    int tj = k % KW, ti = (k / KW) % KH, c = k / (KW * KH);
    int y = COL_Y(n) * SH - PT + ti * DH, z = COL_X(n) * SW - PL + tj * DW;
    if (y < 0 || y >= H || z < 0 || z >= W) return -1;
    return IN_AT(COL_IMG(n), g * CG + c, y, z);
}
#define B_INDEX(b, k, n) conv_b_index((b), (k), (n))

/* A work-item whose column n of every B slice is fixed (the work-group size a multiple of the
 * tile width) locates its output pixel once; then only the tap (c, i, j) of k is decoded. */
#define CONV_COLUMN(n_) const int col_n = (n_); \
    const int col_y = COL_Y(col_n) * SH - PT, col_x = COL_X(col_n) * SW - PL; \
    const int col_img = COL_IMG(col_n), col_c = b * CG; \
    const bool col_valid = col_n < N
#define CONV_AT(k) conv_column_index((k), col_y, col_x, col_img, col_c, col_valid && (k) < kend)
inline int conv_column_index(int k, int col_y, int col_x, int col_img, int col_c, bool valid) {
    int tj = k % KW, ti = (k / KW) % KH, c = k / (KW * KH);
    int y = col_y + ti * DH, z = col_x + tj * DW;
    return (valid && y >= 0 && y < H && z >= 0 && z < W) ? IN_AT(col_img, col_c + c, y, z) : -1;
}
#define BIAS_INDEX(b, m, n) ((b) * OG + (m))
#else
#define B_INDEX(b, k, n) ((b) * b_sb + (k) * b_sk + (n) * b_sn)
#define OUT_INDEX(b, m, n) ((b) * c_sb + (m) * c_sm + (n) * c_sn)
#define BIAS_INDEX(b, m, n) ((b) * bias_sb + (m) * bias_sm + (n) * bias_sn)
#endif

/* Split-K: work-group z = b * splits + s sums k in [s * kchunk, (s + 1) * kchunk); with SPLITK
 * each writes its float32 partial sums to ws[z][m][n], and either splitk_reduce applies the
 * epilogue (a second launch), or, with SPLITK_SERIAL, the last of a tile's splits to finish does
 * (SPLITK_FINISH). */
#define GEMM_ARGS __global const T* A, __global const T* B, __global const T* bias, __global const T* res, \
    __global T* out, __global float* ws, int M, int N, int K, int a_sb, int a_sm, int a_sk, int b_sb, int b_sk, \
    int b_sn, int c_sb, int c_sm, int c_sn, int bias_sb, int bias_sm, int bias_sn, int splits, int kchunk, \
    float act0, float act1, float act2

#define SPLIT_RANGE const int b = get_group_id(2) / splits, kbeg = (get_group_id(2) % splits) * kchunk, \
    kend = min(K, kbeg + kchunk)

#ifdef SPLITK_SERIAL
/* A tile's splits write their partials tile-major, each tile's own TILE_M x TILE_N blocks, one per
 * split: the last split reads them in runs, and no cache line holds two tiles' partials (a compute
 * unit's cache is not coherent with the others': it could hold a line of a tile whose partials
 * change after it read them for a neighbouring tile). */
#define SPLIT_TILE ((b * get_num_groups(1) + get_group_id(1)) * get_num_groups(0) + get_group_id(0))
#define SPLIT_BLOCK(s) ((SPLIT_TILE * splits + (s)) * (TILE_M * TILE_N))
#define GEMM_STORE(acc, b, m, n) ws[SPLIT_BLOCK(get_group_id(2) % splits) + ((m) - m0) * TILE_N + (n) - n0] = (acc);
#elif defined(SPLITK)
#define GEMM_STORE(acc, b, m, n) ws[(get_group_id(2) * M + (m)) * N + (n)] = (acc);
#else
#define GEMM_STORE(acc, b, m, n) EPILOGUE(acc, BIAS_INDEX(b, m, n), OUT_INDEX(b, m, n))
#endif

#ifdef SPLITK_SERIAL
/* The end of a split-K work-group whose TILE_M x TILE_N tile starts at (m0, n0): every
 * work-item's partials fenced into global memory, one work-item counts the split in the tile's
 * counter (after the partials in ws, zero between launches); the split that counts last sums the
 * tile's partials and applies the epilogue, and zeroes the counter for the next launch. Saves the
 * reduce launch: at batch 1 the host's enqueues (8 us each on the H100) take longer than the
 * work. */
#define SPLITK_FINISH(lid, threads) \
    __local int last_; /* at the kernel's outermost scope, as local variables must be */ \
    mem_fence(CLK_GLOBAL_MEM_FENCE); \
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE); \
    if ((lid) == 0) { \
        __global int* counters_ = (__global int*)ws + get_num_groups(0) * get_num_groups(1) * get_num_groups(2) \
            * (TILE_M * TILE_N); \
        last_ = atomic_inc(counters_ + SPLIT_TILE) == splits - 1; \
        if (last_) counters_[SPLIT_TILE] = 0; \
    } \
    barrier(CLK_LOCAL_MEM_FENCE); \
    if (last_) { \
        mem_fence(CLK_GLOBAL_MEM_FENCE); \
        for (int f_ = (lid); f_ < TILE_M * TILE_N; f_ += (threads)) { \
            const int m = m0 + f_ / TILE_N, n = n0 + f_ % TILE_N; \
            if (m < M && n < N) { \
                float v = 0.0f; \
                for (int s_ = 0; s_ < splits; ++s_) v += ws[SPLIT_BLOCK(s_) + f_]; \
                EPILOGUE(v, BIAS_INDEX(b, m, n), OUT_INDEX(b, m, n)) \
            } \
        } \
    }
#else
#define SPLITK_FINISH(lid, threads)
#endif

/* Sums the split-K partials of one output (i = m * N + n, image b) and applies the epilogue. */
__kernel void splitk_reduce(GEMM_ARGS) {
    ACT_PARAMS;
    const int i = get_global_id(0), b = get_global_id(1);
    if (i >= M * N) return;
    const int m = i / N, n = i % N;
    float v = 0.0f;
    for (int s = 0; s < splits; ++s) v += ws[((b * splits + s) * M + m) * N + n];
    EPILOGUE(v, BIAS_INDEX(b, m, n), OUT_INDEX(b, m, n))
}
