/* A batched transpose of 16-bit elements through local memory: dst[z][c][r] = src[z][r][c] for
 * each z of a rows x cols source, r running to rows_out >= rows with zeros past rows. It gives the
 * tensor-core convolution channels-last copies of its input (NCHW to NHWC) and filter (OIHW to
 * OHWI), channels padded to a multiple of 8, which it reads 16 bytes at a time. */
__kernel __attribute__((reqd_work_group_size(32, 8, 1)))
void transpose16(__global const ushort* src, __global ushort* dst, int rows, int cols, int rows_out) {
    __local ushort tile[32][33];
    const long z = get_group_id(2);
    const int c0 = get_group_id(0) * 32, r0 = get_group_id(1) * 32;
    const int tx = get_local_id(0), ty = get_local_id(1);
    for (int i = ty; i < 32; i += 8)
        tile[i][tx] = r0 + i < rows && c0 + tx < cols ? src[(z * rows + r0 + i) * cols + c0 + tx] : (ushort)0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = ty; i < 32; i += 8)
        if (c0 + i < cols && r0 + tx < rows_out) dst[(z * cols + c0 + i) * rows_out + r0 + tx] = tile[tx][i];
}
