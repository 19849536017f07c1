/* A score of fused attention (attention.cl, attention_mma.cl) after scale, softcap, the mask,
 * causal masking, the sliding window and key lengths, in base 2 (times log2 e: the kernels' softmax runs on exp2).
 * MASK_ARG and LENGTHS_ARG declare the kernels' mask and key-length arguments of their types
 * (MASK_BOOL, MASK_T or none; LENGTHS or PAST with IDX, or none). */
#define LOG2E 1.4426950408889634f

#if defined(MASK_BOOL)
#define MASK_ARG __global const uchar* mask
#elif defined(MASK_T)
#define MASK_ARG __global const MASK_T* mask
#else
#define MASK_ARG __global const void* mask
#endif
/* An output value as stored: with ZERO_NAN, NaN (a row whose keys all drop) is 0. */
#ifdef ZERO_NAN
#define OUT_VALUE(v) (isnan(v) ? 0.0f : (v))
#else
#define OUT_VALUE(v) (v)
#endif
#if defined(LENGTHS) || defined(PAST)
#define LENGTHS_ARG __global const IDX* lengths
#else
#define LENGTHS_ARG __global const void* lengths
#endif

/* The score of the query at position `row` (mrow: its mask offset) for key `key`, in base 2: -inf
 * where it drops (WINDOW: keys WINDOW or more positions before the query drop). */
inline float score(float x, int row, int key, int keys, MASK_ARG, long mrow, int ms3) {
    x *= SCALE;
#ifdef SOFTCAP
    x = SOFTCAP * tanh(x / SOFTCAP);
#endif
#if defined(MASK_BOOL) || defined(MASK_T)
    if (key < MW) {
#ifdef MASK_BOOL
        if (!mask[mrow + (long)key * ms3]) x = -INFINITY;
#else
        x += (float)LOADM(mask, mrow + (long)key * ms3);
#endif
    } else {
        x = -INFINITY;
    }
#endif
#ifdef CAUSAL
    if (key > row + OFFSET) x = -INFINITY;
#endif
#ifdef WINDOW
    if (row - key >= WINDOW) x = -INFINITY;
#endif
    return key < keys ? x * LOG2E : -INFINITY;
}
