/* The element types every halfway OpenCL kernel is written in.
 *
 *   T      the buffer element type (float, or half for float16 programs)
 *   REAL   the arithmetic type (float; half only with -DNATIVE_HALF)
 *   LOAD(p, i) / STORE(p, i, v)     one element as REAL
 *   LOAD4(p, i) / STORE4(p, i, v)   four elements from element i as REAL4
 *
 * -DINT_T=long -DINT_T4=long4 (integer and bool tensors) makes T and REAL that type.
 * -DSTORAGE_HALF without -DNATIVE_HALF keeps half buffers but computes in float through
 * vload_half / vstore_half_rte (core OpenCL), rounding to nearest even as numpy does.
 */
#ifdef INT_T
#define T INT_T
#define REAL INT_T
#define REAL4 INT_T4
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, v) ((p)[i] = (v))
#define LOAD4(p, i) vload4(0, (p) + (i))
#define STORE4(p, i, v) vstore4((v), 0, (p) + (i))
#elif defined(NATIVE_HALF)
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define T half
#define REAL half
#define REAL4 half4
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, v) ((p)[i] = (half)(v))
#define LOAD4(p, i) vload4(0, (p) + (i))
#define STORE4(p, i, v) vstore4((v), 0, (p) + (i))
#elif defined(STORAGE_HALF)
#define T half
#define REAL float
#define REAL4 float4
#define LOAD(p, i) vload_half((i), (p))
#define STORE(p, i, v) vstore_half_rte((v), (i), (p))
#define LOAD4(p, i) vload_half4(0, (p) + (i))
#define STORE4(p, i, v) vstore_half4_rte((v), 0, (p) + (i))
#else
#define T float
#define REAL float
#define REAL4 float4
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, v) ((p)[i] = (v))
#define LOAD4(p, i) vload4(0, (p) + (i))
#define STORE4(p, i, v) vstore4((v), 0, (p) + (i))
#endif

#define R(v) ((REAL)(v))

/* Activation parameters: kernels taking float act0..act2 declare these from them. */
#define ACT_PARAMS const REAL a0 = (REAL)act0, a1 = (REAL)act1, a2 = (REAL)act2

/* The fused epilogue of GEMMs and convolutions: out[idx] = ACT(acc + bias[c] + res[idx]). */
#ifdef HAS_BIAS
#define ADD_BIAS(v, c) v += (float)LOAD(bias, c);
#else
#define ADD_BIAS(v, c)
#endif
#ifdef HAS_RES
#define ADD_RES(v, idx) v += (float)LOAD(res, idx);
#else
#define ADD_RES(v, idx)
#endif
#define EPILOGUE(acc, c, idx) { float v_ = (acc); ADD_BIAS(v_, c) ADD_RES(v_, idx) REAL r_ = (REAL)v_; STORE(out, idx, ACT(r_)); }
