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
