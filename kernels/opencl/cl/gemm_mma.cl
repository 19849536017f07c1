/* The float16 GEMM on NVIDIA tensor cores (compute capability >= 8.0): mma.sync m16n8k16 with
 * float16 operands and float32 accumulators, through inline PTX. A work-group of
 * WARPS_M x WARPS_N warps computes a BM x BN tile of out; each warp MI x NI fragments of 16 x 8.
 * BK-deep slices of A (as [m][k]) and B (as [k][n]) are staged in local memory as raw float16
 * bits, rows padded by 8 halves so fragment loads hit distinct banks. The next slice is read from
 * global memory into registers while the tensor cores work on the current one. VEC_A / VEC_B:
 * the operand is k-contiguous (A) or n-contiguous (B) with sizes and strides multiples of 8, so
 * it moves 8 halves (a uint4) at a time. */
#define BM (WARPS_M * MI * 16)
#define BN (WARPS_N * NI * 8)
#define BK 32
#define LDA (BK + 8)
#define LDB (BN + 8)
#define THREADS (WARPS_M * WARPS_N * 32)
#ifdef VEC_A
#define A_ITEMS (BM * BK / 8 / THREADS)
#define A_REG uint4
#else
#define A_ITEMS (BM * BK / THREADS)
#define A_REG ushort
#endif
#ifdef VEC_B
#define B_ITEMS (BK * BN / 8 / THREADS)
#define B_REG uint4
#else
#define B_ITEMS (BK * BN / THREADS)
#define B_REG ushort
#endif

inline void mma_16816(float* d, const uint* a, const uint* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Where element (or vector) e of a thread's share of the A / B slice lies in the tile. */
#ifdef VEC_A
#define A_AT(e) const int mm = (e) / (BK / 8), kk = (e) % (BK / 8) * 8
#else
#define A_AT(e) const int mm = (e) / BK, kk = (e) % BK
#endif
#ifdef VEC_B
#define B_AT(e) const int kk = (e) / (BN / 8), nn = (e) % (BN / 8) * 8
#else
#define B_AT(e) const int kk = (e) / BN, nn = (e) % BN
#endif

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void gemm_mma(GEMM_ARGS) {
    ACT_PARAMS;
    __global const ushort* Ab = (__global const ushort*)A;
    __global const ushort* Bb = (__global const ushort*)B;
    __local ushort As[BM * LDA] __attribute__((aligned(16)));
    __local ushort Bs[BK * LDB] __attribute__((aligned(16)));
    const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;
    const int wm = (warp / WARPS_N) * MI * 16, wn = (warp % WARPS_N) * NI * 8;
    const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;
    SPLIT_RANGE;
    A_REG ra[A_ITEMS];
    B_REG rb[B_ITEMS];
    float acc[MI][NI][4];
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NI; ++j)
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

#define LOAD_SLICE(k0) \
    for (int q = 0; q < A_ITEMS; ++q) { \
        A_AT(lid + q * THREADS); \
        const int m = m0 + mm, k = (k0) + kk; \
        ra[q] = (m < M && k < kend) ? A_FETCH(A_INDEX(b, m, k)) : (A_REG)0; \
    } \
    for (int q = 0; q < B_ITEMS; ++q) { \
        B_AT(lid + q * THREADS); \
        const int n = n0 + nn, k = (k0) + kk; \
        B_FETCH(rb[q], b, k, n); \
    }
#define STORE_SLICE \
    for (int q = 0; q < A_ITEMS; ++q) { \
        A_AT(lid + q * THREADS); \
        A_PUT(&As[mm * LDA + kk], ra[q]); \
    } \
    for (int q = 0; q < B_ITEMS; ++q) { \
        B_AT(lid + q * THREADS); \
        B_PUT(&Bs[kk * LDB + nn], rb[q]); \
    }
#ifdef VEC_A
#define A_FETCH(i) (*(__global const uint4*)(Ab + (i)))
#define A_PUT(p, v) (*(__local uint4*)(p) = (v))
#else
#define A_FETCH(i) (Ab[i])
#define A_PUT(p, v) (*(p) = (v))
#endif
#ifdef VEC_B
#define B_FETCH(r, b, k, n) r = (n < N && k < kend) ? *(__global const uint4*)(Bb + B_INDEX(b, k, n)) : (uint4)0
#define B_PUT(p, v) (*(__local uint4*)(p) = (v))
#elif defined(CONV)
#define B_FETCH(r, b, k, n) { const int at_ = CONV_AT(k); r = at_ >= 0 ? Bb[at_] : (ushort)0; }
#define B_PUT(p, v) (*(p) = (v))
#else
#define B_FETCH(r, b, k, n) { int at_ = (n < N && k < kend) ? B_INDEX(b, k, n) : -1; r = at_ >= 0 ? Bb[at_] : (ushort)0; }
#define B_PUT(p, v) (*(p) = (v))
#endif

#ifdef CONV
    CONV_COLUMN(n0 + lid % BN);
#endif
    LOAD_SLICE(kbeg)
    STORE_SLICE
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k0 = kbeg; k0 < kend; k0 += BK) {
        const bool more = k0 + BK < kend;
        if (more) {
            LOAD_SLICE(k0 + BK)
        }
        for (int ks = 0; ks < BK; ks += 16) {
            uint af[MI][4], bf[NI][2];
            for (int i = 0; i < MI; ++i) {
                const int r = wm + i * 16 + g, c = ks + 2 * t;
                af[i][0] = *(__local const uint*)&As[r * LDA + c];
                af[i][1] = *(__local const uint*)&As[(r + 8) * LDA + c];
                af[i][2] = *(__local const uint*)&As[r * LDA + c + 8];
                af[i][3] = *(__local const uint*)&As[(r + 8) * LDA + c + 8];
            }
            for (int j = 0; j < NI; ++j) {
                const int n = wn + j * 8 + g, k = ks + 2 * t;
                bf[j][0] = (uint)Bs[k * LDB + n] | ((uint)Bs[(k + 1) * LDB + n] << 16);
                bf[j][1] = (uint)Bs[(k + 8) * LDB + n] | ((uint)Bs[(k + 9) * LDB + n] << 16);
            }
            for (int i = 0; i < MI; ++i)
                for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], af[i], bf[j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (more) {
            STORE_SLICE
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NI; ++j)
            for (int r = 0; r < 4; ++r) {
                const int m = m0 + wm + i * 16 + g + (r >> 1) * 8, n = n0 + wn + j * 8 + 2 * t + (r & 1);
                if (m < M && n < N) GEMM_STORE(acc[i][j][r], b, m, n)
            }
}
