/* Indexing ops. ELEM: the element type (bits copied as they are); IDX: the index type. An index
 * counts from the end when negative; one outside the dim reads the nearest end of it (a kernel
 * cannot raise, and must not read outside the buffer). */

inline int dim_index(long v, int size) {
    return (int)clamp(v < 0 ? v + size : v, 0L, (long)size - 1);
}

#ifdef ELEM
/* Out = Condition ? X : Y, broadcast: meta = [rank, out dims, Condition, X, Y strides]. */
__kernel void where_bcast(__global const uchar* cond, __global const ELEM* x, __global const ELEM* y,
                          __global ELEM* out, __constant int* meta, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int rank = meta[0], rem = i, co = 0, xo = 0, yo = 0;
    for (int d = rank - 1; d >= 0; --d) {
        int idx = rem % meta[1 + d];
        rem /= meta[1 + d];
        co += idx * meta[1 + rank + d];
        xo += idx * meta[1 + 2 * rank + d];
        yo += idx * meta[1 + 3 * rank + d];
    }
    out[i] = cond[co] ? x[xo] : y[yo];
}
#endif

#ifdef IDX
/* X viewed as [outer, axis_len, inner]; Out [outer, count, inner] takes index[j] along the axis. */
__kernel void gather(__global const ELEM* x, __global const IDX* index, __global ELEM* out, int count,
                     int axis_len, int inner, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int r = i % inner, j = (i / inner) % count, outer = i / (inner * count);
    out[i] = x[(outer * axis_len + dim_index(index[j], axis_len)) * inner + r];
}

/* Out[p, r] = X[index[p, 0], ..., index[p, depth - 1], r]: meta = [depth, X's first dims, their strides]. */
__kernel void gather_nd(__global const ELEM* x, __global const IDX* index, __global ELEM* out,
                        __constant int* meta, int inner, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int depth = meta[0], p = i / inner, offset = i % inner;
    for (int k = 0; k < depth; ++k) offset += dim_index(index[p * depth + k], meta[1 + k]) * meta[1 + depth + k];
    out[i] = x[offset];
}

/* Out (Index's shape) takes X at Index's coordinates, Index's value along `axis`:
 * meta = [rank, axis, Index dims, X strides, X's axis length]. */
__kernel void take_along_axis(__global const ELEM* x, __global const IDX* index, __global ELEM* out,
                              __constant int* meta, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int rank = meta[0], axis = meta[1], rem = i, offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
        int c = rem % meta[2 + d];
        rem /= meta[2 + d];
        if (d == axis) c = dim_index(index[i], meta[2 + 2 * rank]);
        offset += c * meta[2 + rank + d];
    }
    out[i] = x[offset];
}
#endif

#ifdef CUMSUM
/* Running sums along lines of `len` elements `inner` apart, one line per work-item (T / REAL from
 * the common header); EXCLUSIVE starts at 0, REVERSE runs from the end. */
__kernel void cumsum(__global const T* x, __global T* out, int len, int inner, int lines) {
    int r = get_global_id(0);
    if (r >= lines) return;
    int base = (r / inner) * len * inner + r % inner;
    REAL acc = 0;
    for (int s = 0; s < len; ++s) {
#ifdef REVERSE
        int at = base + (len - 1 - s) * inner;
#else
        int at = base + s * inner;
#endif
        REAL v = LOAD(x, at);
#ifdef EXCLUSIVE
        STORE(out, at, acc);
        acc += v;
#else
        acc += v;
        STORE(out, at, acc);
#endif
    }
}
#endif
