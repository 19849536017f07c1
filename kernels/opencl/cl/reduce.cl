/* Reductions over any set of dims, one output element per work-item, accumulated in float:
 * INIT, ADD(acc, v) and FINISH(acc, count) name the reduction. meta = [kept rank, kept dims,
 * their strides in X, reduced rank, reduced dims, their strides in X]. */
__kernel void reduce(__global const T* x, __global T* out, __constant int* meta, int count, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int kept = meta[0], rem = i, base = 0;
    for (int d = kept - 1; d >= 0; --d) {
        base += (rem % meta[1 + d]) * meta[1 + kept + d];
        rem /= meta[1 + d];
    }
    __constant int* red = meta + 1 + 2 * kept;
    int rank = red[0];
    float acc = INIT;
    for (int r = 0; r < count; ++r) {
        int at = base, left = r;
        for (int d = rank - 1; d >= 0; --d) {
            at += (left % red[1 + d]) * red[1 + rank + d];
            left /= red[1 + d];
        }
        ADD(acc, (float)LOAD(x, at));
    }
    STORE(out, i, FINISH(acc, count));
}
