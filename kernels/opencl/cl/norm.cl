/* Row normalisations, one work-group of WG (a power of two) work-items per row of `len`
 * elements: layer_norm (mean and variance, float32 statistics) and, with RMS, rms_norm (the root
 * mean square, no centring); with SKIP, skip_layer_norm: the row is x + skip, summed in float32
 * on every pass over it and, with HAS_SUM, stored to sum_out. Scale and Bias have the row's
 * length, in type P (norm scales may stay float32 in a float16 program). */

#ifdef SKIP
#define ROW(j) ((float)LOAD(xr, j) + (float)LOAD(sr, j))
#else
#define ROW(j) ((float)LOAD(xr, j))
#endif

/* The sum of every work-item's `v` over the work-group, returned to all of them. */
inline float group_sum(__local float* part, float v) {
    int lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    part[lid] = v;
    for (int half_ = WG / 2; half_ > 0; half_ /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < half_) part[lid] += part[lid + half_];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return part[0];
}

__kernel void row_norm(__global const T* x, __global const T* skip, __global const P* scale,
                       __global const P* bias, __global T* y, __global T* sum_out, __global float* mean_out,
                       __global float* var_out, int len, float eps) {
    __local float part[WG];
    int row = get_group_id(0), lid = get_local_id(0);
    __global const T* xr = x + (long)row * len;
#ifdef SKIP
    __global const T* sr = skip + (long)row * len;
#endif
    float mean = 0.0f;
#ifndef RMS
    float s = 0.0f;
    for (int j = lid; j < len; j += WG) s += ROW(j);
    mean = group_sum(part, s) / len;
#endif
    float q = 0.0f;
    for (int j = lid; j < len; j += WG) {
        float d = ROW(j) - mean;
        q += d * d;
    }
    float var = group_sum(part, q) / len;
    float inv = 1.0f / sqrt(var + eps);
    for (int j = lid; j < len; j += WG) {
        float r = ROW(j);
#ifdef HAS_SUM
        STORE(sum_out, (long)row * len + j, r);
#endif
        float v = (r - mean) * inv;
#ifdef HAS_SCALE
        v *= LOADP(scale, j);
#endif
#ifdef HAS_BIAS
        v += LOADP(bias, j);
#endif
        STORE(y, (long)row * len + j, v);
    }
#ifdef HAS_STATS
    if (lid == 0) {
        if (mean_out) mean_out[row] = mean;
        if (var_out) var_out[row] = var;
    }
#endif
}
