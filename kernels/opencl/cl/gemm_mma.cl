/* The float16 GEMM on NVIDIA tensor cores (compute capability >= 8.0): mma.sync m16n8k16 with
 * float16 operands and float32 accumulators, through inline PTX. A work-group of
 * WARPS_M x WARPS_N warps computes a BM x BN tile of out; each warp MI x NI fragments of 16 x 8.
 *
 * BK-deep slices of A (as [m][k]) and B (as [k][n]) pass through a STAGES-deep ring of local
 * memory. Rows are split in 16-byte chunks whose column is XOR-swizzled by the row (SWZ), so the
 * eight rows one ldmatrix phase reads fall in distinct bank groups without padding. Fragments
 * come from ldmatrix (B through its .trans form).
 *
 * VEC_A / VEC_B: the operand is k-contiguous (A) or n-contiguous (B) with sizes and strides
 * multiples of 8; its slices are copied by cp.async, 16 bytes a copy, zero-filled past the edges,
 * STAGES - 1 slices ahead of the tensor cores. Otherwise (strided operands, the implicit-GEMM
 * gather of a convolution) each work-item reads its elements of the slice STAGES - 1 ahead into
 * registers before the tensor cores start on the current one, and parks them in local memory
 * after. NHWC: B is a convolution's channels-last input, held as [n][k] like A and copied by
 * cp.async too (see B_ISSUE). PENDING (= STAGES - 2, a literal for the PTX) is how many copies may
 * stay in flight.
 * The epilogue reuses the local memory of the slices (LDS: the row pitch of its float bands).
 * The PTX helpers (mma_16816, ldmatrix, cp.async, SWZ) are those of mma.h. */
#define BM (WARPS_M * MI * 16)
#define BN (WARPS_N * NI * 8)
#define THREADS (WARPS_M * WARPS_N * 32)
#define TILE_M BM
#define TILE_N BN
#define A_STAGE (BM * BK)
#define B_STAGE (BK * BN)
#define LDS (NI * 8 + 8)
#if (THREADS / 32) * 16 * LDS * 4 > STAGES * (A_STAGE + B_STAGE) * 2
#error the epilogue's bands do not fit in the local memory of the slices
#endif
#define A_OFF(m, k) ((m) * BK + SWZ((m), (k) / 8, BK / 8) * 8 + (k) % 8)
#define B_OFF(k, n) ((k) * BN + SWZ((k), (n) / 8, BN / 8) * 8 + (n) % 8)
#define NK_OFF(n, k) ((n) * BK + SWZ((n), (k) / 8, BK / 8) * 8 + (k) % 8)
#define A_ITEMS (BM * BK / THREADS)
#define B_ITEMS (BK * BN / THREADS)
#define A_ROWS (THREADS / (BK / 8))
#define B_ROWS (THREADS / (BN / 8))

/* Slice k0 of A into the stage at local byte address `as`: cp.async (VEC_A) or into the
 * registers ra. A work-item copies the same chunk column of rows a_row + q * A_ROWS; A_ROWS is a
 * multiple of 8, so those rows share their swizzle and lie a constant apart in local memory. */
#ifdef VEC_A
#define A_SETUP \
    const int a_row = lid / (BK / 8), a_col = lid % (BK / 8) * 8; \
    const uint a_put = 2 * A_OFF(a_row, a_col); \
    const int a_get = A_INDEX(b, m0 + a_row, a_col)
#define A_ISSUE(as, k0) \
    UNROLL for (int q = 0; q < BM / A_ROWS; ++q) { \
        const bool in = m0 + a_row + q * A_ROWS < M && (k0) + a_col < kend; \
        cp_async16((as) + a_put + 2 * q * A_ROWS * BK, Ab + (in ? a_get + q * A_ROWS * a_sm + (k0) : 0), in ? 16 : 0); \
    }
#define A_PARK(as)
#else
#define A_SETUP
#define A_ISSUE(as, k0) \
    UNROLL for (int q = 0; q < A_ITEMS; ++q) { \
        const int e = lid + q * THREADS, mm = e / BK, kk = e % BK; \
        const int m = m0 + mm, k = (k0) + kk; \
        ra[q] = (m < M && k < kend) ? Ab[A_INDEX(b, m, k)] : (ushort)0; \
    }
#define A_PARK(as) \
    UNROLL for (int q = 0; q < A_ITEMS; ++q) { \
        const int e = lid + q * THREADS; \
        As[((as) - as0) / 2 + A_OFF(e / BK, e % BK)] = ra[q]; \
    }
#endif

#if defined(NHWC)
/* B(k, n) = Xt[image][y][x][c] of the NHWC copy of the input, k = (i * KW + j) * C + c: B is held
 * as [n][k] like A, and 8 channels of one tap are 16 contiguous bytes (C % 8 == 0), zero-filled
 * in the padding. A work-item copies chunk column b_col of pixels b_row + q * NK_ROWS. */
#define NK_ROWS (THREADS / (BK / 8))
#define B_SETUP \
    const int b_row = lid / (BK / 8), b_col = lid % (BK / 8) * 8; \
    const uint b_put = 2 * NK_OFF(b_row, b_col); \
    int px_base[BN / NK_ROWS], px_y[BN / NK_ROWS], px_x[BN / NK_ROWS]; \
    UNROLL for (int q = 0; q < BN / NK_ROWS; ++q) { \
        const int n = n0 + b_row + q * NK_ROWS; \
        px_base[q] = COL_IMG(n) * (H * W); \
        px_y[q] = n < N ? COL_Y(n) * SH - PT : -(1 << 20); \
        px_x[q] = COL_X(n) * SW - PL; \
    }
#define B_ISSUE(bs, k0) { \
        const int k = (k0) + b_col, tap = k / C, c = k % C, y = tap / KW * DH, x = tap % KW * DW; \
        UNROLL for (int q = 0; q < BN / NK_ROWS; ++q) { \
            const int yy = px_y[q] + y, xx = px_x[q] + x; \
            const bool in = k < kend && yy >= 0 && yy < H && xx >= 0 && xx < W; \
            cp_async16((bs) + b_put + 2 * q * NK_ROWS * BK, Bb + (in ? (px_base[q] + yy * W + xx) * C + c : 0), \
                       in ? 16 : 0); \
        } \
    }
#define B_PARK(bs)
#elif defined(VEC_B)
#define B_SETUP \
    const int b_row = lid / (BN / 8), b_col = lid % (BN / 8) * 8; \
    const uint b_put = 2 * B_OFF(b_row, b_col); \
    const int b_get = B_INDEX(b, b_row, n0 + b_col); \
    const bool b_in = n0 + b_col < N
#define B_ISSUE(bs, k0) \
    UNROLL for (int q = 0; q < BK / B_ROWS; ++q) { \
        const bool in = b_in && (k0) + b_row + q * B_ROWS < kend; \
        cp_async16((bs) + b_put + 2 * q * B_ROWS * BN, Bb + (in ? b_get + ((k0) + q * B_ROWS) * b_sk : 0), \
                   in ? 16 : 0); \
    }
#define B_PARK(bs)
#else
#ifdef CONV
#define B_SETUP CONV_COLUMN(n0 + lid % BN)
#define B_AT(k, n) CONV_AT(k)
#else
#define B_SETUP
#define B_AT(k, n) ((n) < N && (k) < kend ? B_INDEX(b, k, n) : -1)
#endif
#define B_ISSUE(bs, k0) \
    UNROLL for (int q = 0; q < B_ITEMS; ++q) { \
        const int e = lid + q * THREADS, k = (k0) + e / BN, n = n0 + e % BN; \
        const int at = B_AT(k, n); \
        rb[q] = at >= 0 ? Bb[at] : (ushort)0; \
    }
#define B_PARK(bs) \
    UNROLL for (int q = 0; q < B_ITEMS; ++q) { \
        const int e = lid + q * THREADS; \
        Bs[((bs) - bs0) / 2 + B_OFF(e / BN, e % BN)] = rb[q]; \
    }
#endif

/* Where a work-item's ldmatrix rows lie in a stage (halves, for each 16-deep k step): rows
 * (lane % 16) of the warp's A rows, and for B either k rows (lane % 16) at the n chunk of each
 * fragment pair ([k][n], .trans) or n rows (lane % 8 + lane / 16 * 8) of each pair ([n][k]). The
 * swizzle of a row depends only on the row modulo 8, i.e. on the lane. */
#define FRAG_SETUP \
    uint a_frag[BK / 16], b_frag[BK / 16][NI / 2]; \
    UNROLL for (int kk = 0; kk < BK / 16; ++kk) { \
        const int r = wm + (lane & 15); \
        a_frag[kk] = 2 * (r * BK + SWZ(r, 2 * kk + (lane >> 4), BK / 8) * 8); \
        UNROLL for (int jj = 0; jj < NI / 2; ++jj) B_FRAG(kk, jj); \
    }
#ifdef NHWC
#define B_FRAG(kk, jj) { \
        const int r = wn + jj * 16 + (lane & 7) + (lane >> 4) * 8; \
        b_frag[kk][jj] = 2 * (r * BK + SWZ(r, 2 * kk + ((lane >> 3) & 1), BK / 8) * 8); \
    }
#define LDMATRIX_B ldmatrix_x4
#else
#define B_FRAG(kk, jj) { \
        const int r = kk * 16 + (lane & 15); \
        b_frag[kk][jj] = 2 * (r * BN + SWZ(r, wn / 8 + 2 * jj + (lane >> 4), BN / 8) * 8); \
    }
#define LDMATRIX_B ldmatrix_x4_trans
#endif

/* The tensor-core work on the stage at local byte addresses (as, bs): BK / 16 steps of MI x NI
 * mma. */
#define COMPUTE(as, bs) \
    UNROLL for (int kk = 0; kk < BK / 16; ++kk) { \
        uint af[MI][4], bf[NI][4]; \
        UNROLL for (int i = 0; i < MI; ++i) ldmatrix_x4(af[i], (as) + a_frag[kk] + 2 * i * 16 * BK); \
        UNROLL for (int j = 0; j < NI; j += 2) { \
            LDMATRIX_B(bf[j], (bs) + b_frag[kk][j / 2]); \
            bf[j + 1][0] = bf[j][2]; \
            bf[j + 1][1] = bf[j][3]; \
        } \
        UNROLL for (int i = 0; i < MI; ++i) \
            UNROLL for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], af[i], bf[j]); \
    }

/* The stores of band i (16 rows of the warp's tile, staged as floats). VEC_OUT (8 or 2): that
 * many consecutive columns of a row are as many consecutive outputs, aligned to their size
 * (columns, and a convolution's OH * OW, multiples of VEC_OUT), written by one lane in
 * one store (16 or 4 bytes) after one residual load of the same size. Otherwise a warp stores 32
 * consecutive columns of a row at a time. Either way all the band's residual loads are issued
 * before its first store: one at a time, their latency made ResNet-50's 1x1 expansions with a
 * residual 5x slower (float16, batch 32, on the H100: 64 to 256 channels on 56x56 maps 355 ->
 * 67 us with VEC_OUT 8; 256 to 1024 on 14x14, 41 -> 33 us with VEC_OUT 2). */
#ifdef VEC_OUT
#if VEC_OUT == 8
#define VEC_T uint4
#define VEC_WORDS(v) {(v).x, (v).y, (v).z, (v).w}
#define VEC_MAKE(w) (uint4)((w)[0], (w)[1], (w)[2], (w)[3])
#else
#define VEC_T uint
#define VEC_WORDS(v) {(v)}
#define VEC_MAKE(w) ((w)[0])
#endif
#define VEC_PER_ROW (NI * 8 / VEC_OUT)
#define VEC_CHUNKS (16 * VEC_PER_ROW / 32)
#ifdef HAS_RES
#define LOAD_RES_VEC(q, at) resv[q] = *(__global const VEC_T*)((__global const T*)res + (at))
#define ADD_RES_VEC(q, v) { float lo_, hi_; const uint w_[VEC_OUT / 2] = VEC_WORDS(resv[q]); \
        UNROLL for (int h_ = 0; h_ < VEC_OUT / 2; ++h_) { unpack_half2(w_[h_], &lo_, &hi_); v[2 * h_] += lo_; v[2 * h_ + 1] += hi_; } }
#else
#define LOAD_RES_VEC(q, at)
#define ADD_RES_VEC(q, v)
#endif
#define STORE_BAND(i) { \
        VEC_T resv[VEC_CHUNKS]; \
        UNROLL for (int q = 0; q < VEC_CHUNKS; ++q) { \
            const int f = lane + 32 * q, m = m0 + wm + (i) * 16 + f / VEC_PER_ROW, n = n0 + wn + f % VEC_PER_ROW * VEC_OUT; \
            if (m < M && n < N) LOAD_RES_VEC(q, OUT_INDEX(b, m, n)); \
        } \
        UNROLL for (int q = 0; q < VEC_CHUNKS; ++q) { \
            const int f = lane + 32 * q, r = f / VEC_PER_ROW, c = f % VEC_PER_ROW * VEC_OUT; \
            const int m = m0 + wm + (i) * 16 + r, n = n0 + wn + c; \
            if (m < M && n < N) { \
                float v[VEC_OUT]; \
                UNROLL for (int e = 0; e < VEC_OUT; ++e) { \
                    v[e] = staged[r * LDS + c + e]; \
                    ADD_BIAS(v[e], BIAS_INDEX(b, m, n + e)) \
                } \
                ADD_RES_VEC(q, v) \
                uint packed[VEC_OUT / 2]; \
                UNROLL for (int e = 0; e < VEC_OUT; e += 2) { \
                    const REAL rl = (REAL)v[e], rh = (REAL)v[e + 1]; \
                    packed[e / 2] = pack_half2((float)(ACT(rl)), (float)(ACT(rh))); \
                } \
                *(__global VEC_T*)((__global T*)out + OUT_INDEX(b, m, n)) = VEC_MAKE(packed); \
            } \
        } \
    }
#elif POOL
/* A 2x2 max pool (NHWC): each window's 4 pixels are 4 consecutive columns. Each lane takes one row
 * of a window, applies the epilogue to its 4 values and stores their maximum (rounding and the
 * activation keep order, so this is the pool of the stored outputs). */
#define STORE_BAND(i) \
        UNROLL for (int f = lane; f < 16 * NI * 2; f += 32) { \
            const int r = f % 16, c = f / 16 * 4, m = m0 + wm + (i) * 16 + r, n = n0 + wn + c; \
            if (m < M && n < N) { \
                float best_ = -INFINITY; \
                UNROLL for (int e = 0; e < 4; ++e) { \
                    float v_ = staged[r * LDS + c + e]; \
                    ADD_BIAS(v_, BIAS_INDEX(b, m, n)) \
                    const REAL r_ = (REAL)v_; \
                    best_ = fmax(best_, (float)(ACT(r_))); \
                } \
                STORE(out, OUT_INDEX(b, m, n), (REAL)best_); \
            } \
        }
#elif defined(OUT_NHWC)
/* Channels-last outputs: a column's rows are consecutive outputs, so the lanes take the band's 16
 * rows of two columns at a time (32-byte runs of float16) instead of a row's columns. */
#define STORE_BAND(i) \
        UNROLL for (int f = lane; f < 16 * NI * 8; f += 32) { \
            const int r = f % 16, c = f / 16, m = m0 + wm + (i) * 16 + r, n = n0 + wn + c; \
            if (m < M && n < N) EPILOGUE(staged[r * LDS + c], BIAS_INDEX(b, m, n), OUT_INDEX(b, m, n)) \
        }
#elif defined(HAS_RES)
#define RES_ITEMS (16 * NI * 8 / 32)
#define STORE_BAND(i) { \
        float resv[RES_ITEMS]; \
        UNROLL for (int q = 0; q < RES_ITEMS; ++q) { \
            const int f = lane + 32 * q, m = m0 + wm + (i) * 16 + f / (NI * 8), n = n0 + wn + f % (NI * 8); \
            resv[q] = m < M && n < N ? (float)LOAD(res, OUT_INDEX(b, m, n)) : 0.0f; \
        } \
        UNROLL for (int q = 0; q < RES_ITEMS; ++q) { \
            const int f = lane + 32 * q, m = m0 + wm + (i) * 16 + f / (NI * 8), n = n0 + wn + f % (NI * 8); \
            if (m < M && n < N) { \
                float v_ = staged[f / (NI * 8) * LDS + f % (NI * 8)]; \
                ADD_BIAS(v_, BIAS_INDEX(b, m, n)) \
                v_ += resv[q]; \
                const REAL r_ = (REAL)v_; \
                STORE(out, OUT_INDEX(b, m, n), ACT(r_)); \
            } \
        } \
    }
#else
#define STORE_BAND(i) \
        UNROLL for (int f = lane; f < 16 * NI * 8; f += 32) { \
            const int m = m0 + wm + (i) * 16 + f / (NI * 8), n = n0 + wn + f % (NI * 8); \
            if (m < M && n < N) EPILOGUE(staged[f / (NI * 8) * LDS + f % (NI * 8)], BIAS_INDEX(b, m, n), OUT_INDEX(b, m, n)) \
        }
#endif

#ifdef SPLITK_SERIAL
/* Split-K: every split of a tile parks its accumulators in the workspace as they lie in registers
 * (a float4 per fragment and work-item: each store and load is one coalesced 16-byte access), then
 * counts itself in the tile's counter (after the parks in ws; zero between launches). The split
 * that counts last sums the parks in split order into its accumulators and goes on to the
 * epilogue; the others end. All of the last one's work-items load at once, MI * NI loads each in
 * flight per split: one work-item summing a tile's partials element by element took longer than
 * the product (VGG-19's 512-channel layers at batch 1 on the H100). */
#define PARK(s, i, j) ((__global float4*)ws + ((SPLIT_TILE * splits + (s)) * MI * NI + (i) * NI + (j)) * THREADS + lid)
#define SPLITK_GATHER { \
        UNROLL for (int i = 0; i < MI; ++i) \
            UNROLL for (int j = 0; j < NI; ++j) \
                *PARK(get_group_id(2) % splits, i, j) = (float4)(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]); \
        MEMBAR_GL; \
        barrier(CLK_LOCAL_MEM_FENCE); \
        if (lid == 0) { \
            __global int* counter_ = (__global int*)ws + get_num_groups(0) * get_num_groups(1) * get_num_groups(2) \
                * (BM * BN) + SPLIT_TILE; \
            last_ = atomic_inc(counter_) == splits - 1; \
            if (last_) *counter_ = 0; \
        } \
        barrier(CLK_LOCAL_MEM_FENCE); \
        if (!last_) return; \
        MEMBAR_GL; \
        UNROLL for (int i = 0; i < MI; ++i) \
            UNROLL for (int j = 0; j < NI; ++j) \
                UNROLL for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f; \
        for (int s = 0; s < splits; ++s) \
            UNROLL for (int i = 0; i < MI; ++i) \
                UNROLL for (int j = 0; j < NI; ++j) { \
                    const float4 p = load_cg4(PARK(s, i, j)); \
                    acc[i][j][0] += p.x; acc[i][j][1] += p.y; acc[i][j][2] += p.z; acc[i][j][3] += p.w; \
                } \
    }
#else
#define SPLITK_GATHER
#endif

/* The work-group's tile: consecutive work-groups walk down GROUP_M tile rows before moving right,
 * so the ones in flight together share their A rows and B columns in the L2 cache. */
#ifndef GROUP_M
#define GROUP_M 8
#endif
#define TILE_ORIGIN \
    const int tiles_n = get_num_groups(0), tiles_m = get_num_groups(1); \
    const int pid = get_group_id(1) * tiles_n + get_group_id(0), band = pid / (GROUP_M * tiles_n); \
    const int rows = min(tiles_m - band * GROUP_M, GROUP_M), in_band = pid % (GROUP_M * tiles_n); \
    const int m0 = (band * GROUP_M + in_band % rows) * BM, n0 = in_band / rows * BN

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void gemm_mma(GEMM_ARGS) {
    ACT_PARAMS;
    __global const ushort* Ab = (__global const ushort*)A;
    __global const ushort* Bb = (__global const ushort*)B;
    __local ushort S[STAGES * (A_STAGE + B_STAGE)] __attribute__((aligned(128)));
    __local ushort* As = S;
    __local ushort* Bs = S + STAGES * A_STAGE;
#ifdef SPLITK_SERIAL
    __local int last_;
#endif
    const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;
    const int wm = (warp / WARPS_N) * MI * 16, wn = (warp % WARPS_N) * NI * 8;
    TILE_ORIGIN;
    SPLIT_RANGE;
#ifndef VEC_A
    ushort ra[A_ITEMS];
#endif
#if !defined(VEC_B) && !defined(NHWC)
    ushort rb[B_ITEMS];
#endif
    A_SETUP;
    B_SETUP;
    FRAG_SETUP;
    const uint as0 = SMEM(As), bs0 = SMEM(Bs);
    float acc[MI][NI][4];
    UNROLL for (int i = 0; i < MI; ++i)
        UNROLL for (int j = 0; j < NI; ++j)
            UNROLL for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    const int slices = (kend - kbeg + BK - 1) / BK;
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) {
            A_ISSUE(as0 + s * 2 * A_STAGE, kbeg + s * BK)
            B_ISSUE(bs0 + s * 2 * B_STAGE, kbeg + s * BK)
            A_PARK(as0 + s * 2 * A_STAGE)
            B_PARK(bs0 + s * 2 * B_STAGE)
        }
        CP_COMMIT;
    }
    uint a_read = as0, b_read = bs0, a_write = as0 + (STAGES - 1) * 2 * A_STAGE, b_write = bs0 + (STAGES - 1) * 2 * B_STAGE;
    for (int kt = 0; kt < slices; ++kt) {
        CP_WAIT;
        barrier(CLK_LOCAL_MEM_FENCE);
        const bool more = kt + STAGES - 1 < slices;
        if (more) {
            const int k0 = kbeg + (kt + STAGES - 1) * BK;
            A_ISSUE(a_write, k0)
            B_ISSUE(b_write, k0)
        }
        CP_COMMIT;
        COMPUTE(a_read, b_read)
        if (more) {
            A_PARK(a_write)
            B_PARK(b_write)
        }
        a_read = a_read == as0 + (STAGES - 1) * 2 * A_STAGE ? as0 : a_read + 2 * A_STAGE;
        b_read = b_read == bs0 + (STAGES - 1) * 2 * B_STAGE ? bs0 : b_read + 2 * B_STAGE;
        a_write = a_write == as0 + (STAGES - 1) * 2 * A_STAGE ? as0 : a_write + 2 * A_STAGE;
        b_write = b_write == bs0 + (STAGES - 1) * 2 * B_STAGE ? bs0 : b_write + 2 * B_STAGE;
    }
    SPLITK_GATHER
    /* The epilogue, a 16-row band of each warp's tile at a time: the accumulators pass through local
     * memory so that a warp's stores cover consecutive columns of a row. */
    __local float* staged = (__local float*)S + warp * 16 * LDS;
    UNROLL for (int i = 0; i < MI; ++i) {
        barrier(CLK_LOCAL_MEM_FENCE);
        UNROLL for (int j = 0; j < NI; ++j) {
            vstore2((float2)(acc[i][j][0], acc[i][j][1]), 0, staged + g * LDS + j * 8 + 2 * t);
            vstore2((float2)(acc[i][j][2], acc[i][j][3]), 0, staged + (g + 8) * LDS + j * 8 + 2 * t);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        STORE_BAND(i)
    }
}
