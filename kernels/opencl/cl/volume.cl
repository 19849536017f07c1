/* 3-D windows over channels-first [N, C, D, H, W] maps: conv3d, conv3d_transpose and pool3d, one
 * output per work-item.
 * Geometry by defines: D H W (input), OD OH OW (output), KD KH KW, SD SH SW (strides), DD DH DW
 * (dilations), PD PH PW (the padding before). Tap (a, b, e) of output (od, oh, ow) reads input
 * (od * SD - PD + a * DD, ...); a tap in the padding reads nothing. */

#define OUTPUT_COORDS(i) \
    const int ow = (i) % OW, oh = ((i) / OW) % OH, od = ((i) / (OW * OH)) % OD, plane = (i) / (OW * OH * OD)

/* The body once per tap (a, b, e) of output (od, oh, ow) that reads the input, at input (z, y, v). */
#define FOR_EACH_TAP(...) \
    for (int a = 0; a < KD; ++a) { \
        int z = od * SD - PD + a * DD; \
        if (z < 0 || z >= D) continue; \
        for (int b = 0; b < KH; ++b) { \
            int y = oh * SH - PH + b * DH; \
            if (y < 0 || y >= H) continue; \
            for (int e = 0; e < KW; ++e) { \
                int v = ow * SW - PW + e * DW; \
                if (v >= 0 && v < W) { __VA_ARGS__ } \
            } \
        } \
    }

#ifdef CONV3D
/* conv3d: C input channels, O outputs, CG input channels per group and OG outputs; Filter is
 * [O, CG, KD, KH, KW]. plane is (image, output channel). */
__kernel void conv3d(__global const T* x, __global const T* w, __global T* out, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    OUTPUT_COORDS(i);
    const int o = plane % O, first = (plane / O) * C + o / OG * CG;
    float acc = 0.0f;
    for (int c = 0; c < CG; ++c) {
        __global const T* p = x + (first + c) * D * H * W;
        __global const T* q = w + (o * CG + c) * KD * KH * KW;
        FOR_EACH_TAP(acc += (float)LOAD(p, (z * H + y) * W + v) * (float)LOAD(q, (a * KH + b) * KW + e);)
    }
    STORE(out, i, acc);
}
#endif

#ifdef CONV3D_TRANSPOSE
/* conv3d_transpose: Filter is [C, OG, KD, KH, KW]; output o sums the CG input channels of its
 * group at the inputs whose tap lands on it: input z with z * SD - PD + a * DD = od. HAS_BIAS adds
 * bias[o]. plane is (image, output channel). */
__kernel void conv3d_transpose(__global const T* x, __global const T* w, __global const T* bias, __global T* out,
                               int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    OUTPUT_COORDS(i);
    const int o = plane % O, group = o / OG, first = (plane / O) * C + group * CG;
    float acc = 0.0f;
    for (int c = 0; c < CG; ++c) {
        __global const T* p = x + (first + c) * D * H * W;
        __global const T* q = w + ((group * CG + c) * OG + o % OG) * KD * KH * KW;
        for (int a = 0; a < KD; ++a) {
            int z = od + PD - a * DD;
            if (z < 0 || z % SD || z / SD >= D) continue;
            for (int b = 0; b < KH; ++b) {
                int y = oh + PH - b * DH;
                if (y < 0 || y % SH || y / SH >= H) continue;
                for (int e = 0; e < KW; ++e) {
                    int v = ow + PW - e * DW;
                    if (v >= 0 && v % SW == 0 && v / SW < W)
                        acc += (float)LOAD(p, (z / SD * H + y / SH) * W + v / SW) * (float)LOAD(q, (a * KH + b) * KW + e);
                }
            }
        }
    }
    ADD_BIAS(acc, o)
    STORE(out, i, acc);
}
#endif

#ifdef POOL3D
#ifdef POOL_MAX
#define POOL_ADD(acc, value) acc = fmax(acc, value)
#elif defined(POOL_LP)
#define POOL_ADD(acc, value) acc += pow(fabs(value), (float)POOL_LP)
#else
#define POOL_ADD(acc, value) acc += value
#endif

/* pool3d: POOL_MAX the maximum of the taps inside the input; POOL_LP (the norm's order p) the p-th
 * root of the sum of |x|^p; else the average: the sum over the taps inside divided by their count
 * when EXCLUSIVE, else by KD * KH * KW. plane is (image, channel). */
__kernel void pool3d(__global const T* x, __global T* out, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    OUTPUT_COORDS(i);
    __global const T* p = x + plane * D * H * W;
#ifdef POOL_MAX
    float acc = -INFINITY;
#else
    float acc = 0.0f;
#endif
    int inside = 0;
    FOR_EACH_TAP(POOL_ADD(acc, (float)LOAD(p, (z * H + y) * W + v)); ++inside;)
#ifdef POOL_LP
    acc = pow(acc, 1.0f / (float)POOL_LP);
#elif !defined(POOL_MAX)
#ifdef EXCLUSIVE
    acc /= (float)inside;
#else
    acc /= (float)(KD * KH * KW);
#endif
#endif
    STORE(out, i, acc);
}
#endif
