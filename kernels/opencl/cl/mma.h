/* NVIDIA tensor-core helpers through inline PTX (compute capability >= 8.0), shared by the
 * float16 GEMM (gemm_mma.cl) and attention (attention_mma.cl): mma.sync m16n8k16 with float16
 * operands and float32 accumulators, ldmatrix, cp.async, warp shuffles and float16 packing.
 * CP_WAIT needs PENDING (a literal: how many copy groups may stay in flight) where it is used. */
#define UNROLL _Pragma("unroll")
#define STR_(x) #x
#define STR(x) STR_(x)

/* Chunk c of row r in rows of R 16-byte chunks: with R >= 8 row r's chunks are XORed by r % 8;
 * shorter rows share the eight bank groups of 128 bytes, so their swizzle steps every 8 / R rows.
 * A row's swizzle depends on r % 8 alone for R >= 8, and is the same for rows 16 apart for any R. */
#define SWZ(r, c, R) ((c) ^ (((r) / ((R) >= 8 ? 1 : 8 / (R))) & ((R) >= 8 ? 7 : (R) - 1)))

/* A local pointer's address in the shared window, as ldmatrix and cp.async take it. */
#define SMEM(p) ((uint)(ulong)(p))

/* d += a b over one 16 x 8 x 16 fragment: a row-major, b column-major (b[n][k]). */
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
/* Global memory ordering at the scope of the whole device, for work-groups that hand data on. */
#define MEMBAR_GL asm volatile("membar.gl;" ::: "memory")

/* 16 bytes from global memory through L2 only (ld.global.cg): another compute unit wrote them, and
 * this one's L1 may hold an older copy. */
inline float4 load_cg4(__global const float4* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p) : "memory");
    return v;
}

#define CP_COMMIT asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT asm volatile("cp.async.wait_group " STR(PENDING) ";" ::: "memory")

/* x of the lane whose id is this lane's XOR `mask` (all 32 lanes take part). */
inline float shfl_xor(float x, int mask) {
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(x)), "r"(mask));
    return as_float(r);
}

/* Two floats as the float16 pair of one register (lo in the low half), rounded to nearest even. */
inline uint pack_half2(float lo, float hi) {
    uint r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* The two float16 halves of a register as floats (lo: the low half). */
inline void unpack_half2(uint v, float* lo, float* hi) {
    asm("{.reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h;}" : "=f"(*lo), "=f"(*hi) : "r"(v));
}
