/* The depthwise convolution (NCHW) with the fused epilogue. */
/* One output per work-item; output channel o reads input channel o / MULT. Geometry by defines:
 * C H W O OH OW KH KW SH SW DH DW PT PL MULT. */
__kernel void depthwise(__global const T* x, __global const T* w, __global const T* bias, __global const T* res,
                        __global T* out, int n, float act0, float act1, float act2) {
    ACT_PARAMS;
    int i = get_global_id(0);
    if (i >= n) return;
    int ow = i % OW, oh = (i / OW) % OH, o = (i / (OW * OH)) % O, img = i / (OW * OH * O);
    __global const T* p = x + (img * C + o / MULT) * H * W;
    float acc = 0.0f;
    for (int a = 0; a < KH; ++a) {
        int y = oh * SH - PT + a * DH;
        if (y < 0 || y >= H) continue;
        for (int b = 0; b < KW; ++b) {
            int z = ow * SW - PL + b * DW;
            if (z >= 0 && z < W) acc += (float)LOAD(p, y * W + z) * (float)LOAD(w, (o * KH + a) * KW + b);
        }
    }
    EPILOGUE(acc, o, i)
}
