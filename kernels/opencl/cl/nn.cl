/* Pooling (NCHW or NHWC), batch_norm and softmax. */

#ifdef POOL_MAX
#define POOL_INIT (-INFINITY)
#define POOL_ADD(acc, v) acc = fmax(acc, v)
#else
#define POOL_INIT 0.0f
#define POOL_ADD(acc, v) acc += v
#endif

/* LANES (1 or 4) consecutive outputs per work-item: 4 channels of an NHWC pixel move as one vector. */
#ifndef LANES
#define LANES 1
#endif
#if LANES == 4
#define VREAL float4
#define VLOAD(p, i) convert_float4(LOAD4(p, i))
#ifdef NATIVE_HALF
#define VSTORE(p, i, v) STORE4(p, i, convert_half4(v))
#else
#define VSTORE(p, i, v) STORE4(p, i, v)
#endif
#else
#define VREAL float
#define VLOAD(p, i) ((float)LOAD(p, i))
#define VSTORE(p, i, v) STORE(p, i, v)
#endif

/* ADAPTIVE: Paddle's bins floor(i*H/OH) .. ceil((i+1)*H/OH) (global pooling is the 1x1 case);
 * else windows of kh x kw at stride (sh, sw) after padding (pt, pl). Avg divides by the window
 * clipped to the input when EXCLUSIVE (or adaptive), else kh*kw. n: the work-items. */
__kernel void pool2d(__global const T* x, __global T* out, int H, int W, int OH, int OW, int kh, int kw,
                     int sh, int sw, int pt, int pl, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    const int e = i * LANES; /* the first output */
#ifdef CHANNELS_LAST /* NHWC, CHANNELS_LAST channels: output e is channel e % C of pixel e / C */
    int pixel = e / CHANNELS_LAST, ow = pixel % OW, oh = (pixel / OW) % OH;
    __global const T* p = x + pixel / (OW * OH) * H * W * CHANNELS_LAST + e % CHANNELS_LAST;
#define PIXEL(y, z) (((y) * W + (z)) * CHANNELS_LAST)
#else
    int ow = e % OW, oh = (e / OW) % OH;
    __global const T* p = x + e / (OW * OH) * H * W;
#define PIXEL(y, z) ((y) * W + (z))
#endif
#ifdef ADAPTIVE
    int hs = oh * H / OH, he = ((oh + 1) * H + OH - 1) / OH;
    int ws = ow * W / OW, we = ((ow + 1) * W + OW - 1) / OW;
    float count = (float)((he - hs) * (we - ws));
#else
    int hs = oh * sh - pt, ws = ow * sw - pl;
    int he = min(hs + kh, H), we = min(ws + kw, W);
    hs = max(hs, 0);
    ws = max(ws, 0);
#ifdef EXCLUSIVE
    float count = (float)((he - hs) * (we - ws));
#else
    float count = (float)(kh * kw);
#endif
#endif
    VREAL acc = (VREAL)POOL_INIT;
    for (int y = hs; y < he; ++y)
        for (int z = ws; z < we; ++z) POOL_ADD(acc, VLOAD(p, PIXEL(y, z)));
#ifdef POOL_MAX
    VSTORE(out, e, acc);
#else
    VSTORE(out, e, acc / count);
#endif
}

#ifdef P
/* Y = X * a + (bias - mean * a), a = scale / sqrt(var + eps) per channel (P: the statistics' type). */
__kernel void batch_norm(__global const T* x, __global T* y, __global const P* scale, __global const P* bias,
                         __global const P* mean, __global const P* var, float eps, int C, int inner, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int c = (i / inner) % C;
    float a = LOADP(scale, c) / sqrt(LOADP(var, c) + eps);
    float b = LOADP(bias, c) - LOADP(mean, c) * a;
    STORE(y, i, (float)LOAD(x, i) * a + b);
}

/* SavedVariance: 1 / sqrt(var + eps). */
__kernel void inv_std(__global const P* var, __global P* out, float eps, int n) {
    int i = get_global_id(0);
    if (i < n) STOREP(out, i, 1.0f / sqrt(LOADP(var, i) + eps));
}
#endif

/* Softmax of rows of `len` elements `inner` apart: one row per work-item. */
__kernel void softmax(__global const T* x, __global T* out, int len, int inner, int rows) {
    int r = get_global_id(0);
    if (r >= rows) return;
    int base = (r / inner) * len * inner + r % inner;
    float m = -INFINITY, s = 0.0f;
    for (int j = 0; j < len; ++j) m = fmax(m, (float)LOAD(x, base + j * inner));
    for (int j = 0; j < len; ++j) s += exp((float)LOAD(x, base + j * inner) - m);
    float inv = 1.0f / s;
    for (int j = 0; j < len; ++j) STORE(out, base + j * inner, exp((float)LOAD(x, base + j * inner) - m) * inv);
}

/* Local response normalisation over n channels (`inner` apart): mid = k + alpha * sum x^2 over
 * channels c - (n-1)/2 .. c + n/2, out = x * mid^-beta. */
__kernel void lrn(__global const T* x, __global T* out, __global T* mid, int C, int inner, int size, float k,
                  float alpha, float beta, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int c = (i / inner) % C, base = i - c * inner, lo = max(c - (size - 1) / 2, 0), hi = min(c + size / 2, C - 1);
    float s = 0.0f;
    for (int j = lo; j <= hi; ++j) {
        float v = LOAD(x, base + j * inner);
        s += v * v;
    }
    float m = k + alpha * s;
    STORE(out, i, (float)LOAD(x, i) * pow(m, -beta));
#ifdef HAS_MID
    STORE(mid, i, m);
#endif
}
