/* Fused float16 attention on NVIDIA tensor cores (compute capability >= 8.0), the flash-attention
 * scheme of attention.cl with the two products on mma.sync m16n8k16 (float16 operands, float32
 * accumulators; helpers of mma.h, the score's masks of attention_score.h). A work-group of WARPS = BQ / 16 warps holds BQ query rows
 * of one (batch, head), 16 rows a warp, whose Q fragments stay in registers. Tiles of BK keys of
 * K and V pass through two stages of local memory (cp.async, zero-filled past the keys, rows in
 * 16-byte chunks XOR-swizzled as in the GEMM), the next tile's copy in flight while the tensor
 * cores work on the current one. Each warp computes its 16 x BK scores S = Q K^T into mma
 * accumulators, applies scale, softcap, masks, causal and key lengths there, keeps its rows'
 * running max and sum in registers (a row's four lanes agree through shfl.sync), rounds
 * P = exp(S - max) to float16 as the A fragments of O += P V (the accumulator layout of S is the
 * fragment layout of P), and divides by the sum at the end: no score matrix in device memory.
 *
 * Same logical dims, strides, defines and arguments as attention.cl (D and DV multiples of 16;
 * every stride a multiple of 8, so rows are 16-byte aligned); BK is the key tile. Softmax runs
 * in base 2 (scores times log2 e). A row whose keys all drop keeps max -inf and sum 0, and gives
 * 0 / 0 = NaN, as the numpy kernel does. Key tiles past the last key any row of the work-group
 * may keep (lengths, mask width, causal) are not visited. */
#define WARPS (BQ / 16)
#define THREADS (WARPS * 32)
#define PENDING 0
#define K_TILE (BK * D)
#define V_TILE (BK * DV)
#define K_OFF(j, d) ((j) * D + SWZ((j), (d) / 8, D / 8) * 8 + (d) % 8)
#define V_OFF(j, d) ((j) * DV + SWZ((j), (d) / 8, DV / 8) * 8 + (d) % 8)

/* Rows [start, start + BK) of one operand (W halves a row, S the row stride) into local memory at
 * byte address `to`, 16 bytes a copy; rows at or past SKV are zeros. */
#define ISSUE_ROWS(to, src, start, W, S) \
    UNROLL for (int q = 0; q < (BK * (W) / 8 + THREADS - 1) / THREADS; ++q) { \
        const int e = lid + q * THREADS, j = e / ((W) / 8), c = e % ((W) / 8) * 8; \
        const bool in = (start) + j < SKV; \
        if (e < BK * (W) / 8) \
            cp_async16((to) + 2 * (j * (W) + SWZ(j, c / 8, (W) / 8) * 8), (src) + (in ? ((start) + j) * (S) + c : 0), \
                       in ? 16 : 0); \
    }

/* The running max of the row whose scores are s[*][c], s[*][c + 1] (across its 4 lanes). */
inline float row_max(float (*s)[4], int c, float m) {
    UNROLL for (int j = 0; j < BK / 8; ++j) m = fmax(m, fmax(s[j][c], s[j][c + 1]));
    m = fmax(m, shfl_xor(m, 1));
    return fmax(m, shfl_xor(m, 2));
}

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void attention_mma(__global const T* q, __global const T* k, __global const T* v, __global T* out, MASK_ARG,
                   LENGTHS_ARG, int ms0, int ms1, int ms2, int ms3) {
    __local ushort tiles[2 * (K_TILE + V_TILE)] __attribute__((aligned(128)));
    const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;
    const int q0 = get_group_id(0) * BQ, bh = get_group_id(1), b = bh / HQ, h = bh % HQ, kvh = h / (HQ / HKV);
    const int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    long mrow[2];
    UNROLL for (int i = 0; i < 2; ++i) mrow[i] = (long)b * ms0 + (long)h * ms1 + (long)min(rows[i], SQ - 1) * ms2;

    /* Q fragments (A operands of m16n8k16, row-major): rows g and g + 8, columns 2t and 2t + 8. */
    __global const uint* qp = (__global const uint*)(q + (long)b * Q_B + (long)h * Q_H);
    uint qf[D / 16][4];
    UNROLL for (int kk = 0; kk < D / 16; ++kk)
        UNROLL for (int r = 0; r < 4; ++r) {
            const int row = rows[r & 1];
            qf[kk][r] = row < SQ ? qp[(row * Q_S + kk * 16 + (r >> 1) * 8 + 2 * t) / 2] : 0u;
        }

    int keys = SKV;
#ifdef LENGTHS
    keys = (int)min((long)SKV, (long)lengths[b]);
#endif
    int limit = keys;
#if defined(MASK_BOOL) || defined(MASK_T)
    limit = min(limit, MW);
#endif
#ifdef CAUSAL
    limit = min(limit, min(q0 + BQ, SQ) - 1 + OFFSET + 1);
#endif
    const int key_tiles = max(limit, 0) / BK + (max(limit, 0) % BK != 0);

    __global const ushort* kp = (__global const ushort*)(k + (long)b * K_B + (long)kvh * K_H);
    __global const ushort* vp = (__global const ushort*)(v + (long)b * V_B + (long)kvh * V_H);
    const uint stage0 = SMEM(tiles), stage_bytes = 2 * (K_TILE + V_TILE);
    /* ldmatrix rows of this lane: K as [key][d] (B operands of S, non-transposed: keys (lane & 7) +
     * (lane >> 4) * 8 at d chunk (lane >> 3) & 1), V as [key][dv] (B operands of O, transposed:
     * keys lane & 15 at dv chunk lane >> 4); a row's swizzle repeats every 16 rows. */
    const int k_row = (lane & 7) + (lane >> 4) * 8, k_hi = (lane >> 3) & 1, v_row = lane & 15, v_hi = lane >> 4;

    float o[DV / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    UNROLL for (int j = 0; j < DV / 8; ++j)
        UNROLL for (int r = 0; r < 4; ++r) o[j][r] = 0.0f;

    if (key_tiles > 0) {
        ISSUE_ROWS(stage0, kp, 0, D, K_S)
        ISSUE_ROWS(stage0 + 2 * K_TILE, vp, 0, DV, V_S)
    }
    CP_COMMIT;
    for (int it = 0; it < key_tiles; ++it) {
        const int start = it * BK;
        const uint ks = stage0 + (it & 1) * stage_bytes, vs = ks + 2 * K_TILE;
        CP_WAIT;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (it + 1 < key_tiles) {
            const uint next = stage0 + ((it + 1) & 1) * stage_bytes;
            ISSUE_ROWS(next, kp, start + BK, D, K_S)
            ISSUE_ROWS(next + 2 * K_TILE, vp, start + BK, DV, V_S)
        }
        CP_COMMIT;

        float s[BK / 8][4];
        UNROLL for (int j = 0; j < BK / 8; ++j)
            UNROLL for (int r = 0; r < 4; ++r) s[j][r] = 0.0f;
        UNROLL for (int kk = 0; kk < D / 16; ++kk)
            UNROLL for (int j = 0; j < BK / 8; j += 2) {
                uint kf[4];
                ldmatrix_x4(kf, ks + 2 * ((j * 8 + k_row) * D + SWZ(k_row, 2 * kk + k_hi, D / 8) * 8));
                mma_16816(s[j], qf[kk], kf);
                mma_16816(s[j + 1], qf[kk], kf + 2);
            }

        UNROLL for (int j = 0; j < BK / 8; ++j)
            UNROLL for (int r = 0; r < 4; ++r)
                s[j][r] = score(s[j][r], rows[r >> 1], start + j * 8 + 2 * t + (r & 1), keys, mask, mrow[r >> 1], ms3);
        UNROLL for (int i = 0; i < 2; ++i) {
            const float top = row_max(s, 2 * i, m[i]);
            const float base = top == -INFINITY ? 0.0f : top;  /* no key yet: exp2(-inf - 0) = 0, no NaN */
            const float correction = native_exp2(m[i] - base);
            m[i] = top;
            l[i] *= correction;
            UNROLL for (int j = 0; j < DV / 8; ++j) {
                o[j][2 * i] *= correction;
                o[j][2 * i + 1] *= correction;
            }
            UNROLL for (int j = 0; j < BK / 8; ++j) {
                s[j][2 * i] = native_exp2(s[j][2 * i] - base);
                s[j][2 * i + 1] = native_exp2(s[j][2 * i + 1] - base);
                l[i] += s[j][2 * i] + s[j][2 * i + 1];
            }
        }

        UNROLL for (int kk = 0; kk < BK / 16; ++kk) {
            const uint pf[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                                pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            UNROLL for (int j = 0; j < DV / 8; j += 2) {
                uint vf[4];
                ldmatrix_x4_trans(vf, vs + 2 * ((kk * 16 + v_row) * DV + SWZ(v_row, j + v_hi, DV / 8) * 8));
                mma_16816(o[j], pf, vf);
                mma_16816(o[j + 1], pf, vf + 2);
            }
        }
    }

    __global uint* op = (__global uint*)(out + (long)b * O_B + (long)h * O_H);
    UNROLL for (int i = 0; i < 2; ++i) {
        float sum = l[i] + shfl_xor(l[i], 1);
        sum += shfl_xor(sum, 2);
        if (rows[i] < SQ)
            UNROLL for (int j = 0; j < DV / 8; ++j)
                op[(rows[i] * O_S + j * 8 + 2 * t) / 2] = pack_half2(OUT_VALUE(o[j][2 * i] / sum),
                                                                    OUT_VALUE(o[j][2 * i + 1] / sum));
    }
}
