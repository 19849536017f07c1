/* Data movement of any element type ELEM (bits copied as they are): concat, split, slice,
 * transpose. meta = [rank, src offset, dst offset, dims, src strides, dst strides]. */
__kernel void strided_copy(__global const ELEM* src, __global ELEM* dst, __constant int* meta, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int rank = meta[0], rem = i, so = meta[1], dO = meta[2];
    for (int d = rank - 1; d >= 0; --d) {
        int idx = rem % meta[3 + d];
        rem /= meta[3 + d];
        so += idx * meta[3 + rank + d];
        dO += idx * meta[3 + 2 * rank + d];
    }
    dst[dO] = src[so];
}

/* Every element of dst set to the bits of `value`. */
__kernel void fill(__global ELEM* dst, ELEM value, int n) {
    int i = get_global_id(0);
    if (i < n) dst[i] = value;
}

/* split along an axis into up to four pieces in one launch: X viewed as [outer, A, inner] (n
 * elements), piece p holding the axis rows [ends[p - 1], ends[p]) (ends of absent pieces are A);
 * bit p of `live` says whether piece p has a buffer to write. */
__kernel void split4(__global const ELEM* x, __global ELEM* o0, __global ELEM* o1, __global ELEM* o2,
                     __global ELEM* o3, int a_len, int inner, int e0, int e1, int e2, int live, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int r = i % inner, a = (i / inner) % a_len, outer = i / (inner * a_len);
    int p = a < e0 ? 0 : a < e1 ? 1 : a < e2 ? 2 : 3;
    if (!((live >> p) & 1)) return;
    int start = p == 0 ? 0 : p == 1 ? e0 : p == 2 ? e1 : e2;
    int end = p == 0 ? e0 : p == 1 ? e1 : p == 2 ? e2 : a_len;
    __global ELEM* o = p == 0 ? o0 : p == 1 ? o1 : p == 2 ? o2 : o3;
    o[((long)outer * (end - start) + (a - start)) * inner + r] = x[i];
}
