/* A step's keys (or values) appended to their cache (cached_attention): X [B, HKV, SQ, W] as logical
 * dims, element (b, h, s, w) at b * X_B + h * X_H + s * X_S + w (head-major or sequence-major
 * strides), written to the cache [B, HKV, SKV, W] at position past[b] + s; positions at SKV and
 * beyond are dropped. One work-item per element of X (n of them; a work-group may run past).
 * Defines: W, HKV, SQ, SKV, X_B, X_H, X_S, IDX. */

__kernel void kv_append(__global const T* x, __global T* cache, __global const IDX* past, int n) {
    int e = get_global_id(0);
    if (e >= n) return;
    int w = e % W, s = (e / W) % SQ, bh = e / (W * SQ), h = bh % HKV, b = bh / HKV;
    long position = (long)past[b] + s;
    if (position >= SKV) return;
    STORE(cache, ((long)bh * SKV + position) * W + w, LOAD(x, (long)b * X_B + (long)h * X_H + (long)s * X_S + w));
}
