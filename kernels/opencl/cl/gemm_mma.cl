/* The float16 GEMM on NVIDIA tensor cores (compute capability >= 8.0): mma.sync m16n8k16 with
 * float16 operands and float32 accumulators, through inline PTX. A work-group of
 * WARPS_M x WARPS_N warps computes a BM x BN tile of out; each warp MI x NI fragments of 16 x 8.
 * BK-deep slices of A (as [m][k]) and B (transposed, as [n][k]) are staged in local memory as
 * raw float16 bits, padded so fragment loads hit distinct banks. */
#define BM (WARPS_M * MI * 16)
#define BN (WARPS_N * NI * 8)
#define BK 32
#define LDS (BK + 8)
#define THREADS (WARPS_M * WARPS_N * 32)

inline void mma_16816(float* d, const uint* a, const uint* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void gemm_mma(GEMM_ARGS) {
    ACT_PARAMS;
    __global const ushort* Ab = (__global const ushort*)A;
    __global const ushort* Bb = (__global const ushort*)B;
    __local ushort As[BM * LDS];
    __local ushort Bs[BN * LDS];
    const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;
    const int wm = (warp / WARPS_N) * MI * 16, wn = (warp % WARPS_N) * NI * 8;
    const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM, b = get_group_id(2);
    float acc[MI][NI][4];
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NI; ++j)
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = lid; e < BM * BK; e += THREADS) {
            int mm = e / BK, kk = e % BK, m = m0 + mm, k = k0 + kk;
            As[mm * LDS + kk] = (m < M && k < K) ? Ab[A_INDEX(b, m, k)] : (ushort)0;
        }
        for (int e = lid; e < BK * BN; e += THREADS) {
            int kk = e / BN, nn = e % BN, n = n0 + nn, k = k0 + kk;
            int at = (n < N && k < K) ? B_INDEX(b, k, n) : -1;
            Bs[nn * LDS + kk] = at >= 0 ? Bb[at] : (ushort)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int ks = 0; ks < BK; ks += 16) {
            uint af[MI][4], bf[NI][2];
            for (int i = 0; i < MI; ++i) {
                int r = wm + i * 16 + g, c = ks + 2 * t;
                af[i][0] = *(__local const uint*)&As[r * LDS + c];
                af[i][1] = *(__local const uint*)&As[(r + 8) * LDS + c];
                af[i][2] = *(__local const uint*)&As[r * LDS + c + 8];
                af[i][3] = *(__local const uint*)&As[(r + 8) * LDS + c + 8];
            }
            for (int j = 0; j < NI; ++j) {
                int r = wn + j * 8 + g, c = ks + 2 * t;
                bf[j][0] = *(__local const uint*)&Bs[r * LDS + c];
                bf[j][1] = *(__local const uint*)&Bs[r * LDS + c + 8];
            }
            for (int i = 0; i < MI; ++i)
                for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], af[i], bf[j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NI; ++j)
            for (int r = 0; r < 4; ++r) {
                int m = m0 + wm + i * 16 + g + (r >> 1) * 8, n = n0 + wn + j * 8 + 2 * t + (r & 1);
                if (m < M && n < N) EPILOGUE(acc[i][j][r], BIAS_INDEX(b, m, n), OUT_INDEX(b, m, n))
            }
}
