/* Batched transposes of 16-bit elements: dst[z][c][r] = src[z][r][c] for each z of a rows x cols
 * source, r running to rows_out >= rows (a multiple of 8) with zeros past rows. They give the
 * tensor-core convolution channels-last copies of its input (NCHW to NHWC) and filter (OIHW to
 * OHWI), channels padded to a multiple of 8, which it reads 16 bytes at a time; with SUB_OW, only
 * the pixels a strided 1x1 convolution reads. Both write each column's rows 16 bytes at a time. */
#define TR 64
#define TC 32
#ifdef SUB_OW
/* A strided 1x1 convolution's input: the columns are the pixels (y, x) of an OH x SUB_OW grid,
 * read at (y * SUB_SH, x * SUB_SW) of source rows SUB_ROW long and SUB_W wide. */
#define SRC_ROW SUB_ROW
#define SRC_COL(c) ((c) / SUB_OW * SUB_SH * SUB_W + (c) % SUB_OW * SUB_SW)
#else
#define SRC_ROW cols
#define SRC_COL(c) (c)
#endif
#define PITCH (TR + 2) /* an odd number of words: a tile's columns 8 apart fall in distinct banks */

inline uint4 pack8(const ushort* v) {
    return (uint4)(v[0] | (uint)v[1] << 16, v[2] | (uint)v[3] << 16, v[4] | (uint)v[5] << 16, v[6] | (uint)v[7] << 16);
}

/* A TR x TC tile through local memory: each work-item reads 8 consecutive columns of a row (one
 * 16-byte load where cols is a multiple of 8) and writes 8 rows of a column. */
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void transpose16(__global const ushort* src, __global ushort* dst, int rows, int cols, int rows_out) {
    __local ushort tile[TC * PITCH];
    const long z = get_group_id(2);
    const int c0 = get_group_id(0) * TC, r0 = get_group_id(1) * TR, t = get_local_id(0);
    {
        const int r = t / 4, c = t % 4 * 8;
        __global const ushort* from = src + (z * rows + r0 + r) * SRC_ROW;
        ushort v[8];
#ifndef SUB_OW
        if (cols % 8 == 0 && r0 + r < rows && c0 + c < cols) {
            const uint4 q = *(__global const uint4*)(from + c0 + c);
            const uint w[4] = {q.x, q.y, q.z, q.w};
            for (int e = 0; e < 8; ++e) v[e] = (ushort)(w[e / 2] >> (16 * (e % 2)));
        } else
#endif
        {
            for (int e = 0; e < 8; ++e) v[e] = r0 + r < rows && c0 + c + e < cols ? from[SRC_COL(c0 + c + e)] : (ushort)0;
        }
        for (int e = 0; e < 8; ++e) tile[(c + e) * PITCH + r] = v[e];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int c = t / 8, r = t % 8 * 8;
    if (c0 + c < cols && r0 + r < rows_out) {
        ushort v[8];
        for (int e = 0; e < 8; ++e) v[e] = tile[c * PITCH + r + e];
        *(__global uint4*)(dst + (z * cols + c0 + c) * rows_out + r0 + r) = pack8(v);
    }
}

/* Few rows (a stem's 3 input channels): a work-item per column gathers its rows and writes them
 * 16 bytes at a time. */
__kernel void transpose16_narrow(__global const ushort* src, __global ushort* dst, int rows, int cols, int rows_out) {
    const int c = get_global_id(0);
    const long z = get_global_id(1);
    if (c >= cols) return;
    for (int r0 = 0; r0 < rows_out; r0 += 8) {
        ushort v[8];
        for (int e = 0; e < 8; ++e) v[e] = r0 + e < rows ? src[(z * rows + r0 + e) * SRC_ROW + SRC_COL(c)] : (ushort)0;
        *(__global uint4*)(dst + (z * cols + c) * rows_out + r0) = pack8(v);
    }
}
