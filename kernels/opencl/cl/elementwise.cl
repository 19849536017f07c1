/* Elementwise kernels. Needs OP(a, b) (binary) or ACT(x) (unary), written for REAL and REAL4, or
 * CMP(a, b) (comparisons and logical ops) written for REAL. */

#if defined(OP) || defined(CMP)
/* Where output element i reads x and y: meta = [rank, out dims, x strides, y strides] (stride 0 on
 * broadcast dims). */
inline void bcast_offsets(__constant int* meta, int i, int* xo, int* yo) {
    int rank = meta[0], rem = i;
    *xo = 0;
    *yo = 0;
    for (int d = rank - 1; d >= 0; --d) {
        int idx = rem % meta[1 + d];
        rem /= meta[1 + d];
        *xo += idx * meta[1 + rank + d];
        *yo += idx * meta[1 + 2 * rank + d];
    }
}
#endif

#ifdef OP
/* Same shapes: four elements per work-item. */
__kernel void binary_flat(__global const T* x, __global const T* y, __global T* out, int n) {
    int i = get_global_id(0) * 4;
    if (i + 4 <= n) {
        REAL4 a = LOAD4(x, i), b = LOAD4(y, i);
        STORE4(out, i, OP(a, b));
    } else {
        for (; i < n; ++i) {
            REAL a = LOAD(x, i), b = LOAD(y, i);
            STORE(out, i, OP(a, b));
        }
    }
}

/* OP(a, b) of the halves of each row of x [rows, 2 * cols], a from the first: an fc's gated output. */
__kernel void gated_halves(__global const T* x, __global T* out, int cols, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    long at = (long)(i / cols) * 2 * cols + i % cols;
    REAL a = LOAD(x, at), b = LOAD(x, at + cols);
    STORE(out, i, OP(a, b));
}

/* Broadcasting operands. */
__kernel void binary_bcast(__global const T* x, __global const T* y, __global T* out, __constant int* meta, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int xo, yo;
    bcast_offsets(meta, i, &xo, &yo);
    REAL a = LOAD(x, xo), b = LOAD(y, yo);
    STORE(out, i, OP(a, b));
}
#endif

#ifdef CMP
/* Comparisons and logical ops of broadcasting operands, written as bool (uchar 0 or 1). */
__kernel void compare_bcast(__global const T* x, __global const T* y, __global uchar* out, __constant int* meta,
                            int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int xo, yo;
    bcast_offsets(meta, i, &xo, &yo);
    REAL a = LOAD(x, xo), b = LOAD(y, yo);
    out[i] = (CMP(a, b)) ? 1 : 0;
}

/* One-operand rows (logical_not, isnan, ...): CMP(a, a). */
__kernel void compare_unary(__global const T* x, __global uchar* out, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    REAL a = LOAD(x, i);
    out[i] = (CMP(a, a)) ? 1 : 0;
}
#endif

#ifdef ACT
__kernel void unary(__global const T* x, __global T* out, int n, float act0, float act1, float act2) {
    ACT_PARAMS;
    int i = get_global_id(0) * 4;
    if (i + 4 <= n) {
        REAL4 v = LOAD4(x, i);
        STORE4(out, i, ACT(v));
    } else {
        for (; i < n; ++i) {
            REAL v = LOAD(x, i);
            STORE(out, i, ACT(v));
        }
    }
}
#endif

/* float32 <-> float16 conversions (round to nearest even), four elements per work-item. */
__kernel void to_half(__global const float* x, __global half* out, int n) {
    int i = get_global_id(0) * 4;
    if (i + 4 <= n) {
        vstore_half4_rte(vload4(0, x + i), 0, out + i);
    } else {
        for (; i < n; ++i) vstore_half_rte(x[i], i, out);
    }
}

__kernel void to_float(__global const half* x, __global float* out, int n) {
    int i = get_global_id(0) * 4;
    if (i + 4 <= n) {
        vstore4(vload_half4(0, x + i), 0, out + i);
    } else {
        for (; i < n; ++i) out[i] = vload_half(i, x);
    }
}

#ifdef CAST_LOAD
/* Casts touching integers or bool: SRC / CAST_LOAD and DST / CAST_STORE come from the dtypes. */
__kernel void cast(__global const SRC* x, __global DST* out, int n) {
    int i = get_global_id(0);
    if (i < n) CAST_STORE(out, i, CAST_LOAD(x, i));
}
#endif
