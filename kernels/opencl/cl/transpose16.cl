/* A batched transpose of 16-bit elements through local memory: dst[z][c][r] = src[z][r][c] for
 * each z of a rows x cols source. It gives the tensor-core convolution channels-last copies of its
 * input (NCHW to NHWC) and filter (OIHW to OHWI), whose channels it reads 16 bytes at a time. */
__kernel __attribute__((reqd_work_group_size(32, 8, 1)))
void transpose16(__global const ushort* src, __global ushort* dst, int rows, int cols) {
    __local ushort tile[32][33];
    const long plane = (long)get_group_id(2) * rows * cols;
    const int c0 = get_group_id(0) * 32, r0 = get_group_id(1) * 32;
    const int tx = get_local_id(0), ty = get_local_id(1);
    for (int i = ty; i < 32; i += 8)
        if (r0 + i < rows && c0 + tx < cols) tile[i][tx] = src[plane + (r0 + i) * cols + c0 + tx];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = ty; i < 32; i += 8)
        if (c0 + i < cols && r0 + tx < rows) dst[plane + (c0 + i) * rows + r0 + tx] = tile[tx][i];
}
