/* Nearest and bilinear interpolation of NCHW tensors, one work-item per output element. The host
 * precomputes each resized axis' source indices, TAPS per output index (iy over the rows, ix over
 * the columns), and for bilinear their weights (wy, wx); the kernel gathers and blends, rows first
 * as the numpy kernel does, in float32. */
__kernel void interp(__global const T* x, __global T* out, __global const int* iy, __global const int* ix,
                     __global const float* wy, __global const float* wx, int h_in, int w_in, int h_out, int w_out,
                     int total) {
    int o = get_global_id(0);
    if (o >= total) return;
    int ox = o % w_out, r = o / w_out;
    int oy = r % h_out;
    __global const T* plane = x + (long)(r / h_out) * h_in * w_in;
#ifdef NEAREST
    STORE(out, o, LOAD(plane, iy[oy] * w_in + ix[ox]));
#else
    __global const T* row0 = plane + iy[2 * oy] * w_in;
    __global const T* row1 = plane + iy[2 * oy + 1] * w_in;
    int x0 = ix[2 * ox], x1 = ix[2 * ox + 1];
    float a = wy[2 * oy], b = wy[2 * oy + 1];
    float left = a * (float)LOAD(row0, x0) + b * (float)LOAD(row1, x0);
    float right = a * (float)LOAD(row0, x1) + b * (float)LOAD(row1, x1);
    STORE(out, o, wx[2 * ox] * left + wx[2 * ox + 1] * right);
#endif
}
