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
 * after. PENDING (= STAGES - 2, a literal for the PTX) is how many copies may stay in flight. */
#define BM (WARPS_M * MI * 16)
#define BN (WARPS_N * NI * 8)
#define THREADS (WARPS_M * WARPS_N * 32)
#define A_STAGE (BM * BK)
#define B_STAGE (BK * BN)
#ifndef UNROLL
#define UNROLL _Pragma("unroll")
#endif
#define STR_(x) #x
#define STR(x) STR_(x)

/* Chunk c of row r in rows of R 16-byte chunks: with R >= 8 row r's chunks are XORed by r % 8;
 * shorter rows share the eight bank groups of 128 bytes, so their swizzle steps every 8 / R rows. */
#define SWZ(r, c, R) ((c) ^ (((r) / ((R) >= 8 ? 1 : 8 / (R))) & ((R) >= 8 ? 7 : (R) - 1)))
#define A_OFF(m, k) ((m) * BK + SWZ((m), (k) / 8, BK / 8) * 8 + (k) % 8)
#define B_OFF(k, n) ((k) * BN + SWZ((k), (n) / 8, BN / 8) * 8 + (n) % 8)

/* A local pointer's address in the shared window, as ldmatrix and cp.async take it. */
#define SMEM(p) ((uint)(ulong)(p))

inline void mma_16816(float* d, const uint* a, const uint* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

inline void ldmatrix_x4(uint* r, uint at) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}

inline void ldmatrix_x4_trans(uint* r, uint at) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}

/* 16 bytes from global to local memory, the first `bytes` of them read and the rest zeroed. */
inline void cp_async16(uint to, __global const ushort* from, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(to), "l"(from), "r"(bytes) : "memory");
}
#define CP_COMMIT asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT asm volatile("cp.async.wait_group " STR(PENDING) ";" ::: "memory")

#define A_CHUNKS (BM * BK / 8 / THREADS)
#define B_CHUNKS (BK * BN / 8 / THREADS)
#define A_ITEMS (BM * BK / THREADS)
#define B_ITEMS (BK * BN / THREADS)

/* Slice k0 of A into stage `as`: cp.async (VEC_A) or into the registers ra. */
#ifdef VEC_A
#define A_ISSUE(as, k0) \
    UNROLL for (int q = 0; q < A_CHUNKS; ++q) { \
        const int e = lid + q * THREADS, mm = e / (BK / 8), kk = e % (BK / 8) * 8; \
        const int m = m0 + mm, k = (k0) + kk; \
        const bool in = m < M && k < kend; \
        cp_async16(SMEM((as) + A_OFF(mm, kk)), in ? Ab + A_INDEX(b, m, k) : Ab, in ? 16 : 0); \
    }
#define A_PARK(as)
#else
#define A_ISSUE(as, k0) \
    UNROLL for (int q = 0; q < A_ITEMS; ++q) { \
        const int e = lid + q * THREADS, mm = e / BK, kk = e % BK; \
        const int m = m0 + mm, k = (k0) + kk; \
        ra[q] = (m < M && k < kend) ? Ab[A_INDEX(b, m, k)] : (ushort)0; \
    }
#define A_PARK(as) \
    UNROLL for (int q = 0; q < A_ITEMS; ++q) { \
        const int e = lid + q * THREADS; \
        (as)[A_OFF(e / BK, e % BK)] = ra[q]; \
    }
#endif

#ifdef VEC_B
#define B_ISSUE(bs, k0) \
    UNROLL for (int q = 0; q < B_CHUNKS; ++q) { \
        const int e = lid + q * THREADS, kk = e / (BN / 8), nn = e % (BN / 8) * 8; \
        const int n = n0 + nn, k = (k0) + kk; \
        const bool in = n < N && k < kend; \
        cp_async16(SMEM((bs) + B_OFF(kk, nn)), in ? Bb + B_INDEX(b, k, n) : Bb, in ? 16 : 0); \
    }
#define B_PARK(bs)
#else
#ifdef CONV
#define B_AT(k, n) CONV_AT(k)
#else
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
        (bs)[B_OFF(e / BN, e % BN)] = rb[q]; \
    }
#endif

/* The tensor-core work on one stage: BK / 16 steps of MI x NI mma, fragments by ldmatrix. */
#define COMPUTE(as, bs) \
    UNROLL for (int ks = 0; ks < BK; ks += 16) { \
        uint af[MI][4], bf[NI][4]; \
        UNROLL for (int i = 0; i < MI; ++i) { \
            const int r = wm + i * 16 + (lane & 15); \
            ldmatrix_x4(af[i], SMEM((as) + r * BK + SWZ(r, ks / 8 + (lane >> 4), BK / 8) * 8)); \
        } \
        UNROLL for (int j = 0; j < NI; j += 2) { \
            const int r = ks + (lane & 15); \
            ldmatrix_x4_trans(bf[j], SMEM((bs) + r * BN + SWZ(r, (wn + j * 8) / 8 + (lane >> 4), BN / 8) * 8)); \
            bf[j + 1][0] = bf[j][2]; \
            bf[j + 1][1] = bf[j][3]; \
        } \
        UNROLL for (int i = 0; i < MI; ++i) \
            UNROLL for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], af[i], bf[j]); \
    }

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void gemm_mma(GEMM_ARGS) {
    ACT_PARAMS;
    __global const ushort* Ab = (__global const ushort*)A;
    __global const ushort* Bb = (__global const ushort*)B;
    __local ushort As[STAGES * A_STAGE] __attribute__((aligned(128)));
    __local ushort Bs[STAGES * B_STAGE] __attribute__((aligned(128)));
    const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;
    const int wm = (warp / WARPS_N) * MI * 16, wn = (warp % WARPS_N) * NI * 8;
    const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;
    SPLIT_RANGE;
#ifndef VEC_A
    ushort ra[A_ITEMS];
#endif
#ifndef VEC_B
    ushort rb[B_ITEMS];
#endif
#ifdef CONV
    CONV_COLUMN(n0 + lid % BN);
#endif
    float acc[MI][NI][4];
    UNROLL for (int i = 0; i < MI; ++i)
        UNROLL for (int j = 0; j < NI; ++j)
            UNROLL for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    const int slices = (kend - kbeg + BK - 1) / BK;
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) {
            A_ISSUE(As + s * A_STAGE, kbeg + s * BK)
            B_ISSUE(Bs + s * B_STAGE, kbeg + s * BK)
            A_PARK(As + s * A_STAGE)
            B_PARK(Bs + s * B_STAGE)
        }
        CP_COMMIT;
    }
    int read = 0, write = STAGES - 1;
    for (int kt = 0; kt < slices; ++kt) {
        CP_WAIT;
        barrier(CLK_LOCAL_MEM_FENCE);
        const bool more = kt + STAGES - 1 < slices;
        __local ushort* an = As + write * A_STAGE;
        __local ushort* bn = Bs + write * B_STAGE;
        if (more) {
            const int k0 = kbeg + (kt + STAGES - 1) * BK;
            A_ISSUE(an, k0)
            B_ISSUE(bn, k0)
        }
        CP_COMMIT;
        COMPUTE(As + read * A_STAGE, Bs + read * B_STAGE)
        if (more) {
            A_PARK(an)
            B_PARK(bn)
        }
        read = read == STAGES - 1 ? 0 : read + 1;
        write = write == STAGES - 1 ? 0 : write + 1;
    }
    UNROLL for (int i = 0; i < MI; ++i)
        UNROLL for (int j = 0; j < NI; ++j)
            UNROLL for (int r = 0; r < 4; ++r) {
                const int m = m0 + wm + i * 16 + g + (r >> 1) * 8, n = n0 + wn + j * 8 + 2 * t + (r & 1);
                if (m < M && n < N) GEMM_STORE(acc[i][j][r], b, m, n)
            }
}
