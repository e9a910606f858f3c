/* Quantized matmul for the CPU runtime: y (M, N) = x (M, K) @ W.T for M <= MAX_M (256): decode, verify, batched
 * branches and prefill chunks alike; the activation rows go through the weights MC_MAX at a time (16 on AVX-512, 4 on
 * AVX2). Plus attention for a few query rows (decode, verify) and RMS norm, each row computed alone.
 *
 * Built at first use by runtime/cpu_kernels/__init__.py (gcc -O3 -march=native -fopenmp); no torch headers,
 * called through ctypes with tensor data pointers. OpenMP resolves to the libgomp torch already loaded, so
 * these parallel regions run on torch's own thread pool.
 *
 * Activations: each block of 32 values of a row gets its own step, like llama.cpp's Q8_0:
 *   d = max|x| / 127 over the block, q = round(x * (127 / max|x|)) in -127..127 (0 for an all-zero block),
 *   x ~= d * q (error <= d / 2 per element).
 * Weight formats (K % 32 == 0), rows in groups of 16 (N padded to a multiple of 16 with zero rows), per group
 * and block of 32 inputs:
 *   CK_Q8I  int8 codes c with an fp32 scale per row: 512 bytes {u8 (c + 128)[8][16][4]}, row r's codes
 *           4k..4k+3 at [k][r]; w = scale[n] * c (scales in a separate (N,) array)
 *   CK_Q5I  exact Q5_0, 352 bytes: {fp16 s[16]; u32 qh[16]; u8 qs[4][16][4]}, row r's w = s[r] * (u - 16) with
 *           u_i = nib_i | ((qh[r] >> i) & 1) << 4, nib_i = low nibble of row r's qs byte i (i < 16) or high
 *           nibble of byte i - 16, and row r's qs byte j stored at qs[j / 4][r][j % 4].
 *   CK_Q4I  exact Q4_K nibbles, the same groups: 384 bytes {fp32 s[16]; fp32 lo[16]; u8 qs[4][16][4]},
 *           row r's w = lo[r] + s[r] * nib_i.
 * Per block, the integer dot of the codes with q (exact in int32) is scaled by d times the weight's block scale
 * and accumulated in fp32 in a fixed order (Q8I: by d only, the row scale multiplies the sum; Q4I adds
 * lo * d * sum(q) per block). Every (m, n) result is computed by the same instructions whatever M, the row
 * chunking or the thread split is, so a verify pass of k rows gives bit for bit what k single-row calls give.
 *
 * AVX-512 VNNI: one zmm lane per weight row; each dpbusd multiplies four codes of 16 rows by the same four
 * activations (broadcast), so a block costs 8 dpbusd and one fp multiply-add per activation row for 16
 * outputs, with no horizontal sums: at M = 9 the weights' decoding is shared by 9 rows and the rows' work is
 * little more than the dpbusd themselves.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__x86_64__) && (defined(__AVX2__))
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

enum { CK_Q8I = 0, CK_Q5I = 1, CK_Q4I = 2 };
#define GR 16     /* weight rows per group */
#define GROUP_BYTES(fmt) ((fmt) == CK_Q8I ? 512L : (fmt) == CK_Q5I ? 352L : 384L)  /* per group and block */
#define QK 32
#define MAX_M 256
#define PREFETCH 2048  /* bytes ahead of the weight block being read (AVX-512 path) */

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#define CK_ISA 2
#define MC_MAX 16 /* activation rows per pass over a weight row (one accumulator each) */
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CK_ISA 1
#define MC_MAX 4
#else
#define CK_ISA 0
#define MC_MAX 1
#endif

int ck_isa(void) { return CK_ISA; }
int ck_version(void) { return 5; }

/* ---- activations ------------------------------------------------------------------------------------- */

typedef struct {
    int M, K, nb;
    int8_t *q;    /* (M, K) codes */
    float *d;     /* (M, nb) block steps */
    float *xs;    /* (M, nb) d * sum(q) over the block (Q4I's lo part) */
    int *qsum;    /* (M, nb) sum(q) over the block (the code offsets of Q8I and Q5I) */
} Act;

static __thread void *ws_buf = NULL;
static __thread size_t ws_size = 0;

static int act_alloc(Act *a, int M, int K) {
    size_t nb = (size_t)K / QK;
    size_t need = ((size_t)M * K + 63) / 64 * 64 + (size_t)M * nb * 12 + 64;
    if (need > ws_size) {
        free(ws_buf);
        ws_buf = NULL;
        if (posix_memalign(&ws_buf, 64, need)) { ws_size = 0; return -1; }
        ws_size = need;
    }
    char *p = (char *)ws_buf;
    a->M = M; a->K = K; a->nb = (int)nb;
    a->q = (int8_t *)p; p += ((size_t)M * K + 63) / 64 * 64;
    a->d = (float *)p; p += (size_t)M * nb * 4;
    a->xs = (float *)p; p += (size_t)M * nb * 4;
    a->qsum = (int *)p;
    return 0;
}

static inline int clamp127(int v) { return v > 127 ? 127 : (v < -127 ? -127 : v); }

/* One block of 32: writes q, returns the step d and sum(q) in *sum. */
static inline float quant_block(const float *x, int8_t *q, int *sum) {
#if CK_ISA == 2
    __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    float id = amax > 0.f ? 127.f / amax : 0.f;
    const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
    __m512i r0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, _mm512_set1_ps(id)));  /* MXCSR: round to nearest even */
    __m512i r1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, _mm512_set1_ps(id)));
    r0 = _mm512_max_epi32(_mm512_min_epi32(r0, lim), nlim);
    r1 = _mm512_max_epi32(_mm512_min_epi32(r1, lim), nlim);
    __m256i b = _mm256_set_m128i(_mm512_cvtepi32_epi8(r1), _mm512_cvtepi32_epi8(r0));
    _mm256_storeu_si256((__m256i *)q, b);
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(r0, r1));
    return amax / 127.f;
#else
    float amax = 0.f;
    for (int i = 0; i < QK; i++) { float v = fabsf(x[i]); amax = v > amax ? v : amax; }
    float id = amax > 0.f ? 127.f / amax : 0.f;
    int s = 0;
    for (int i = 0; i < QK; i++) {
        int v = clamp127((int)nearbyintf(x[i] * id));
        q[i] = (int8_t)v; s += v;
    }
    *sum = s;
    return amax / 127.f;
#endif
}

static void quant_rows(const float *x, long ldx, Act *a) {
    const int nb = a->nb;
    for (int m = 0; m < a->M; m++) {
        const float *xr = x + (long)m * ldx;
        for (int b = 0; b < nb; b++) {
            int s;
            long o = (long)m * a->K + b * QK;
            float d = quant_block(xr + b * QK, a->q + o, &s);
            a->d[(long)m * nb + b] = d;
            a->xs[(long)m * nb + b] = d * (float)s;
            a->qsum[(long)m * nb + b] = s;
        }
    }
}

/* ---- SIMD building blocks ---------------------------------------------------------------------------- */

#if CK_ISA >= 1
#define INLINE static inline __attribute__((always_inline))
#endif

#if CK_ISA == 2
/* ---- AVX-512 VNNI ------------------------------------------------------------------------------------------ */

/* The nibble codes of one block of 16 rows as 8 zmm: zmm k (k < 4) holds codes 4k..4k+3 of every row (low
 * nibbles), zmm k + 4 codes 16 + 4k.. (high nibbles); unsigned. */
INLINE void codes16(const uint8_t *qs, __m512i c[8]) {
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int k = 0; k < 4; k++) {
        __m512i v = _mm512_loadu_si512((const void *)(qs + 64 * k));
        c[k] = _mm512_and_si512(v, m4);
        c[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
}

INLINE void high_bits16(const uint8_t *qhp, __m512i c[8]) {  /* c[k] |= 0x10 where code's bit 4 is set */
    const __m512i lut = _mm512_setr_epi32(0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010,
                                          0x00101000, 0x00101010, 0x10000000, 0x10000010, 0x10001000, 0x10001010,
                                          0x10100000, 0x10100010, 0x10101000, 0x10101010);
    const __m512i qh = _mm512_loadu_si512((const void *)qhp);
    for (int k = 0; k < 8; k++) {
        const int shift = k < 4 ? 4 * k : 16 + 4 * (k - 4);  /* codes 4k.. (low nibbles) or 16 + 4(k-4).. */
        c[k] = _mm512_or_si512(c[k], _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, shift), lut));
    }
}

/* acc + sum over the block of codes . q for one activation row (16 rows' codes unsigned, q broadcast 4 at a time):
 * code vector k < 4 pairs with activations 4k..4k+3, k + 4 with 16 + 4k.. (codes16); Q8I's vector k with 4k... */
typedef int32_t __attribute__((may_alias, aligned(1))) i32u;  /* 4 activation bytes, read in place */

INLINE __m512i dot16(const __m512i c[8], const int8_t *q, __m512i acc) {
    const i32u *x = (const i32u *)q;  /* each broadcast folds into its dpbusd as a memory operand */
    for (int k = 0; k < 8; k++) acc = _mm512_dpbusd_epi32(acc, c[k], _mm512_set1_epi32(x[k]));
    return acc;
}

/* One group of 16 weight rows (nr valid) against activation rows m0..m0+MC-1: y[j][r] for r < nr. */
INLINE void group_rows(int fmt, const uint8_t *wg, const float *wscale, const Act *a, int m0, const int MC,
                       float *y, long ldy, int nr) {
    const long K = a->K;
    const int nb = a->nb;
    const long bytes = GROUP_BYTES(fmt);
    const int offset = fmt == CK_Q8I ? 128 : 16;  /* stored unsigned codes = signed codes + offset (not Q4I) */
    __m512 acc[MC_MAX];
    _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++) acc[j] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + b * bytes;
        /* weights stream from DRAM once a step: the hardware prefetcher alone left the loads waiting */
        for (long l = 0; l < bytes; l += 64) _mm_prefetch((const char *)blk + PREFETCH + l, _MM_HINT_T0);
        __m512i c[8];
        __m512 sw = _mm512_set1_ps(1.f), lo = _mm512_setzero_ps();
        if (fmt == CK_Q8I) {
            for (int k = 0; k < 8; k++) c[k] = _mm512_loadu_si512((const void *)(blk + 64 * k));
        } else if (fmt == CK_Q5I) {
            sw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            codes16(blk + 96, c);
            high_bits16(blk + 32, c);
        } else {
            sw = _mm512_loadu_ps((const float *)blk);
            lo = _mm512_loadu_ps((const float *)(blk + 64));
            codes16(blk + 128, c);
        }
        _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++) {
            const long mb = (long)(m0 + j) * nb + b;
            /* the dot of u = c + offset overshoots by offset * sum(q): start from its negative */
            __m512i init = fmt == CK_Q4I ? _mm512_setzero_si512() : _mm512_set1_epi32(-offset * a->qsum[mb]);
            __m512i v = dot16(c, a->q + (long)(m0 + j) * K + (long)b * QK, init);
            __m512 f = _mm512_cvtepi32_ps(v), dm = _mm512_set1_ps(a->d[mb]);
            if (fmt == CK_Q8I) {
                acc[j] = _mm512_fmadd_ps(f, dm, acc[j]);
            } else {
                acc[j] = _mm512_fmadd_ps(f, _mm512_mul_ps(sw, dm), acc[j]);
                if (fmt == CK_Q4I) acc[j] = _mm512_fmadd_ps(lo, _mm512_set1_ps(a->xs[mb]), acc[j]);
            }
        }
    }
    const __mmask16 mk = (__mmask16)((1u << nr) - 1);
    const __m512 rs = fmt == CK_Q8I ? _mm512_maskz_loadu_ps(mk, wscale) : _mm512_set1_ps(1.f);
    _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++)
        _mm512_mask_storeu_ps(y + (long)j * ldy, mk, fmt == CK_Q8I ? _mm512_mul_ps(acc[j], rs) : acc[j]);
}

#elif CK_ISA == 1
/* ---- AVX2 --------------------------------------------------------------------------------------------------- *
 * 16 ymm registers shape this path: one code vector (8 rows x 4 codes) at a time meets MC <= 4 activation rows,
 * each row's products summed in int16 (p), then widened once (madd with ones); the accumulators stay in
 * registers. Integer sums are exact in any order and the fp32 steps are the AVX-512 path's, in its order. */

INLINE __m256i bcast4(const int8_t *x) {  /* 4 activation bytes to every lane, straight from memory */
    return _mm256_castps_si256(_mm256_broadcast_ss((const float *)x));
}

/* Code vector k (k < 8) of one half (8 rows) of a Q4I/Q5I block: codes 4k..4k+3 of each row, unsigned. */
INLINE __m256i nib_codes(const uint8_t *qs, int half, int k) {
    const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 64 * (k % 4) + 32 * half));
    return _mm256_and_si256(k < 4 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(15));
}

INLINE __m256i high_bit(__m256i qh, int k) {  /* Q5_0's bit 4 of codes 4k..4k+3, as 0x10 bytes */
    const int shift = k < 4 ? 4 * k : 16 + 4 * (k - 4);
    __m256i t = _mm256_and_si256(_mm256_srli_epi32(qh, shift), _mm256_set1_epi32(15));
    /* bit i of t -> bit 4 of byte i: spread by multiplication, then mask */
    t = _mm256_and_si256(_mm256_mullo_epi32(t, _mm256_set1_epi32(0x00204081)), _mm256_set1_epi32(0x01010101));
    return _mm256_slli_epi32(t, 4);
}

INLINE void group_rows(const int fmt, const uint8_t *wg, const float *wscale, const Act *a, int m0, const int MC,
                       float *y, long ldy, int nr) {
    const long K = a->K;
    const int nb = a->nb;
    const long bytes = GROUP_BYTES(fmt);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MC_MAX][2];  /* [row][half]: each half is 8 weight rows; both share every activation broadcast */
    _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + b * bytes;
        const int8_t *xb = a->q + (long)m0 * K + (long)b * QK;  /* row j's block at xb + j * K */
        __m256i v[MC_MAX][2];
        if (fmt == CK_Q8I) {  /* signed codes: maddubs' unsigned operand is |c|, q takes c's sign; one pair sum
                               * reaches 2 * 128 * 127, so each product is widened at once */
            _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++) v[j][0] = v[j][1] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                __m256i c[2], ac[2];
                for (int h = 0; h < 2; h++) {
                    c[h] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 64 * k + 32 * h)),
                                            _mm256_set1_epi8((char)0x80));
                    ac[h] = _mm256_sign_epi8(c[h], c[h]);
                }
                _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++) {
                    const __m256i x = bcast4(xb + j * K + 4 * k);
                    for (int h = 0; h < 2; h++)
                        v[j][h] = _mm256_add_epi32(v[j][h], _mm256_madd_epi16(
                            _mm256_maddubs_epi16(ac[h], _mm256_sign_epi8(x, c[h])), ones));
                }
            }
        } else {  /* codes <= 15 (Q4I) sum 8 products exactly in int16, codes <= 31 (Q5I) 4 */
            const int run = fmt == CK_Q4I ? 8 : 4;
            const uint8_t *qs = blk + (fmt == CK_Q5I ? 96 : 128);
            _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++)
                v[j][0] = v[j][1] = fmt == CK_Q5I ? _mm256_set1_epi32(-16 * a->qsum[(long)(m0 + j) * nb + b])
                                                  : _mm256_setzero_si256();
            _Pragma("GCC unroll 2") for (int k0 = 0; k0 < 8; k0 += run) {
                __m256i p[MC_MAX][2];
                _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++) p[j][0] = p[j][1] = _mm256_setzero_si256();
                _Pragma("GCC unroll 8") for (int k = k0; k < k0 + run; k++) {
                    __m256i c[2];
                    for (int h = 0; h < 2; h++) {
                        c[h] = nib_codes(qs, h, k);
                        if (fmt == CK_Q5I)
                            c[h] = _mm256_or_si256(c[h], high_bit(_mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * h)), k));
                    }
                    _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++) {
                        const __m256i x = bcast4(xb + j * K + 4 * k);
                        for (int h = 0; h < 2; h++) p[j][h] = _mm256_add_epi16(p[j][h], _mm256_maddubs_epi16(c[h], x));
                    }
                }
                _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++)
                    for (int h = 0; h < 2; h++) v[j][h] = _mm256_add_epi32(v[j][h], _mm256_madd_epi16(p[j][h], ones));
            }
        }
        for (int h = 0; h < 2; h++) {
            const __m256 sw = fmt == CK_Q8I ? _mm256_set1_ps(1.f)
                            : fmt == CK_Q5I ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)))
                                            : _mm256_loadu_ps((const float *)blk + 8 * h);
            _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++) {
                const long mb = (long)(m0 + j) * nb + b;
                acc[j][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v[j][h]), _mm256_mul_ps(sw, _mm256_set1_ps(a->d[mb])),
                                            acc[j][h]);
                if (fmt == CK_Q4I)
                    acc[j][h] = _mm256_fmadd_ps(_mm256_loadu_ps((const float *)(blk + 64) + 8 * h),
                                                _mm256_set1_ps(a->xs[mb]), acc[j][h]);
            }
        }
    }
    for (int h = 0; h < 2 && 8 * h < nr; h++) {
        const int n = nr - 8 * h < 8 ? nr - 8 * h : 8;
        _Pragma("GCC unroll 4") for (int j = 0; j < MC; j++) {
            float t[8];
            _mm256_storeu_ps(t, fmt == CK_Q8I ? _mm256_mul_ps(acc[j][h], _mm256_loadu_ps(wscale + 8 * h)) : acc[j][h]);
            memcpy(y + (long)j * ldy + 8 * h, t, (size_t)n * 4);
        }
    }
}
#endif

#if CK_ISA >= 1
#if CK_ISA == 2
#define DISPATCH_MC(CALL) \
    switch (mc) { case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; case 4: CALL(4); break; \
                  case 5: CALL(5); break; case 6: CALL(6); break; case 7: CALL(7); break; case 8: CALL(8); break; \
                  case 9: CALL(9); break; case 10: CALL(10); break; case 11: CALL(11); break; case 12: CALL(12); break; \
                  case 13: CALL(13); break; case 14: CALL(14); break; case 15: CALL(15); break; default: CALL(16); break; }
#else
#define DISPATCH_MC(CALL) \
    switch (mc) { case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; default: CALL(4); break; }
#endif

/* Rows n0..n1 of one segment (n0 and n1 multiples of GR, or n1 the segment's end); fmt is a constant in each
 * expansion (rows_range below), so every format x MC gets its own code. */
INLINE void rows_of(const int fmt, const void *W, const float *wscale, long n0, long n1, const Act *a, float *y,
                    long ldy) {
    for (long n = n0; n < n1; n += GR) {
        const uint8_t *wg = (const uint8_t *)W + (n / GR) * a->nb * GROUP_BYTES(fmt);
        const int nr = n1 - n < GR ? (int)(n1 - n) : GR;
        int m0 = 0;
        while (m0 < a->M) {
            int rem = a->M - m0, chunks = (rem + MC_MAX - 1) / MC_MAX;
            int mc = (rem + chunks - 1) / chunks;  /* even chunks: 17 -> 9 + 8, not 16 + 1 */
            float *yo = y + (long)m0 * ldy + n;
#define CG(MC) group_rows(fmt, wg, wscale ? wscale + n : NULL, a, m0, MC, yo, ldy, nr)
            DISPATCH_MC(CG)
#undef CG
            m0 += mc;
        }
    }
}

static void rows_range(int fmt, const void *W, const float *wscale, long n0, long n1, const Act *a, float *y, long ldy) {
    switch (fmt) {
    case CK_Q8I: rows_of(CK_Q8I, W, wscale, n0, n1, a, y, ldy); break;
    case CK_Q5I: rows_of(CK_Q5I, W, wscale, n0, n1, a, y, ldy); break;
    default: rows_of(CK_Q4I, W, wscale, n0, n1, a, y, ldy); break;
    }
}

#else  /* portable scalar path: correct everywhere, used only by tests (the loader prefers torch here) */

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { float f = ldexpf((float)man, -24); return sign ? -f : f; }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f; memcpy(&f, &bits, 4); return f;
}

static void rows_range(int fmt, const void *W, const float *wscale, long n0, long n1, const Act *a, float *y, long ldy) {
    long K = a->K, nb = a->nb;
    for (long n = n0; n < n1; n++) {
        const long g = n / GR, r = n % GR;
        for (int m = 0; m < a->M; m++) {
            const int8_t *q = a->q + (long)m * K;
            float acc = 0.f;
            for (long b = 0; b < nb; b++) {
                int c[QK];
                float ws = 1.f, lo = 0.f;
                if (fmt == CK_Q8I) {
                    const uint8_t *blk = (const uint8_t *)W + (g * nb + b) * GROUP_BYTES(fmt);
                    for (int i = 0; i < QK; i++) c[i] = blk[(i / 4) * 64 + r * 4 + i % 4] - 128;
                } else {
                    const uint8_t *blk = (const uint8_t *)W + (g * nb + b) * GROUP_BYTES(fmt);
                    const uint8_t *qs = blk + (fmt == CK_Q5I ? 96 : 128);
                    uint32_t qh = 0;
                    if (fmt == CK_Q5I) {
                        uint16_t dh; memcpy(&dh, blk + 2 * r, 2); memcpy(&qh, blk + 32 + 4 * r, 4);
                        ws = f16_to_f32(dh);
                    } else {
                        memcpy(&ws, blk + 4 * r, 4); memcpy(&lo, blk + 64 + 4 * r, 4);
                    }
                    for (int i = 0; i < QK; i++) {
                        int j = i % 16, byte = qs[(j / 4) * 64 + r * 4 + j % 4];
                        int u = (byte >> (4 * (i / 16))) & 15;
                        c[i] = fmt == CK_Q5I ? (u | (int)((qh >> i) & 1) << 4) - 16 : u;
                    }
                }
                int dot = 0;
                for (int i = 0; i < QK; i++) dot += c[i] * q[b * QK + i];
                const long mb = (long)m * nb + b;
                acc += (float)dot * (ws * a->d[mb]);
                if (fmt == CK_Q4I) acc += lo * a->xs[mb];
            }
            y[(long)m * ldy + n] = fmt == CK_Q8I ? acc * wscale[n] : acc;
        }
    }
}
#endif

/* ---- entry point ------------------------------------------------------------------------------------- */

/* y (M, ldy) gets columns seg_n0[s] .. seg_n0[s] + seg_n[s] from segment s (format seg_fmt[s], weights seg_w[s],
 * per-row scales seg_scale[s] for CK_Q8I); bias (sum of seg_n entries) is added when not NULL.
 * x (M, K) fp32 with row stride ldx. Returns 0, or -1 (bad arguments / no memory). */
int ck_linear(const float *x, long ldx, int M, int K, int nseg, const int *seg_fmt, const void *const *seg_w,
              const float *const *seg_scale, const long *seg_n0, const long *seg_n,
              float *y, long ldy,
              const float *bias, int nthreads) {
    if (M < 1 || M > MAX_M || K < QK || K % QK || nseg < 1) return -1;
    Act a;
    if (act_alloc(&a, M, K)) return -1;
    quant_rows(x, ldx, &a);
    long total = 0;
    for (int s = 0; s < nseg; s++) total += seg_n[s];
    long work = total * (long)K * (M < 4 ? M : 4);
    int nt = nthreads > 0 ? nthreads : 1;
    if (work < 200000) nt = 1;
#pragma omp parallel num_threads(nt)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num(); T = omp_get_num_threads();
#endif
        long r0 = total * t / T, r1 = total * (t + 1) / T;
        long base = 0;
        for (int s = 0; s < nseg; s++) {
            long lo = r0 > base ? r0 - base : 0, hi = r1 - base < seg_n[s] ? r1 - base : seg_n[s];
            /* split at group boundaries (every thread rounds alike, so the ranges still tile the segment) */
            lo = lo < seg_n[s] ? (lo + GR - 1) / GR * GR : lo;
            hi = hi < seg_n[s] ? (hi + GR - 1) / GR * GR : hi;
            if (lo > seg_n[s]) lo = seg_n[s];
            if (hi > seg_n[s]) hi = seg_n[s];
            if (lo < hi)
                rows_range(seg_fmt[s], seg_w[s], seg_scale[s], lo, hi, &a, y + seg_n0[s], ldy);
            base += seg_n[s];
        }
    }
    if (bias) {
        for (int m = 0; m < M; m++)
            for (long n = 0; n < total; n++) y[(long)m * ldy + n] += bias[n];
    }
    return 0;
}

/* ---- attention for a few query rows (decode, verify) ----------------------------------------------------
 *
 * out (T, H * D) = softmax(q k^T * scale) v per head, query row t at position start + t seeing keys 0..start + t
 * of its kv head (grouped-query: head h reads kv head h / (H / n_kv)). Every (row, head) is computed by the
 * same code from its own q row and key range only, so a verify pass's rows equal single decodes bit for bit.
 * Plain C over 16-lane arrays (gcc vectorizes the lanes; the order of every sum is fixed by the code). */

#define AL 16

/* e^x for x <= 0 (below -87 gives 0), ~1 ulp: 2^n * p(r), r = x - n ln 2, |r| <= ln2 / 2. */
static inline void exp_lanes(float *x) {
    for (int l = 0; l < AL; l++) {
        float v = x[l] < -87.f ? -87.f : x[l];
        float t = v * 1.44269504f;
        int n = (int)(t - 0.5f);  /* t <= 0: rounds to nearest */
        float r = v - (float)n * 0.693145752f - (float)n * 1.42860677e-6f;
        float p = 1.f + r * (1.f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f + r * 0.00138888892f)))));
        int32_t bits = (n + 127) << 23;
        float sc;
        memcpy(&sc, &bits, 4);
        x[l] = x[l] < -87.f ? 0.f : p * sc;
    }
}

#if CK_ISA == 2
/* e^x for 16 lanes, x <= 0 (below -87 gives 0): the same steps as exp_lanes. */
INLINE __m512 exp16(__m512 x) {
    const __m512 v = _mm512_max_ps(x, _mm512_set1_ps(-87.f));
    const __m512 t = _mm512_mul_ps(v, _mm512_set1_ps(1.44269504f));
    const __m512i n = _mm512_cvttps_epi32(_mm512_sub_ps(t, _mm512_set1_ps(0.5f)));
    const __m512 nf = _mm512_cvtepi32_ps(n);
    __m512 r = _mm512_sub_ps(v, _mm512_mul_ps(nf, _mm512_set1_ps(0.693145752f)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(nf, _mm512_set1_ps(1.42860677e-6f)));
    __m512 p = _mm512_set1_ps(0.00138888892f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.00833333377f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.0416666679f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.166666672f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.f));
    const __m512 sc = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.f), _CMP_GE_OQ), _mm512_mul_ps(p, sc));
}

#define ATT_KEYS 4  /* keys per pass over d: independent fma chains */
#define ATT_DMAX 8  /* zmm per value row: D <= 128 */

/* attend_group below, with intrinsics (D % 16 == 0, D <= 128): the same per-query arithmetic order. */
static void attend_group512(const float *q, long ldq, int hd0, int G, const float *k, const float *v, int D, int T,
                            long start, float scale, float *qt, float *sc, float *out, int H) {
    const int NQ = T * G, NB = (NQ + AL - 1) / AL, DV = D / 16;
    const long n_max = start + T, W = (long)NB * AL;
    for (int d = 0; d < D; d++)
        for (int i = 0; i < NB * AL; i++)
            qt[(long)d * W + i] = i < NQ ? q[(long)(i / G) * ldq + (long)(hd0 + i % G) * D + d] : 0.f;
    for (int bq = 0; bq < NB; bq++) {
        int lim_a[AL];
        for (int l = 0; l < AL; l++) {
            const int i = bq * AL + l;
            lim_a[l] = i < NQ ? (int)(start + i / G) : -1;
        }
        const __m512i lim = _mm512_loadu_si512((const void *)lim_a);
        __m512 mx = _mm512_set1_ps(-INFINITY);
        const __m512 ninf = _mm512_set1_ps(-INFINITY), vs = _mm512_set1_ps(scale);
        long j = 0;
        for (; j < n_max; j += ATT_KEYS) {
            __m512 acc[ATT_KEYS];
            const int nk = n_max - j < ATT_KEYS ? (int)(n_max - j) : ATT_KEYS;
            for (int u = 0; u < ATT_KEYS; u++) acc[u] = _mm512_setzero_ps();
            for (int d = 0; d < D; d++) {
                const __m512 qd = _mm512_loadu_ps(qt + (long)d * W + bq * AL);
                for (int u = 0; u < nk; u++) acc[u] = _mm512_fmadd_ps(qd, _mm512_set1_ps(k[(j + u) * D + d]), acc[u]);
            }
            for (int u = 0; u < nk; u++) {
                const __mmask16 ok = _mm512_cmp_epi32_mask(_mm512_set1_epi32((int)(j + u)), lim, _MM_CMPINT_LE);
                const __m512 row = _mm512_mask_blend_ps(ok, ninf, _mm512_mul_ps(acc[u], vs));
                _mm512_storeu_ps(sc + (j + u) * W + bq * AL, row);
                mx = _mm512_max_ps(mx, row);
            }
        }
        __m512 sum = _mm512_setzero_ps();
        for (j = 0; j < n_max; j++) {
            float *row = sc + j * W + bq * AL;
            const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(row), mx));
            _mm512_storeu_ps(row, e);
            sum = _mm512_add_ps(sum, e);
        }
        float sums[AL];
        _mm512_storeu_ps(sums, sum);
        for (int l = 0; l < AL; l++) {
            const int i = bq * AL + l;
            if (i >= NQ) break;
            __m512 o[ATT_DMAX];
            for (int c = 0; c < DV; c++) o[c] = _mm512_setzero_ps();
            for (long jj = 0; jj <= lim_a[l]; jj++) {
                const __m512 pj = _mm512_set1_ps(sc[jj * W + i]);
                const float *vr = v + jj * D;
                for (int c = 0; c < DV; c++) o[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 16 * c), o[c]);
            }
            const __m512 inv = _mm512_set1_ps(1.f / sums[l]);
            float *dst = out + (long)(i / G) * H * D + (long)(hd0 + i % G) * D;
            for (int c = 0; c < DV; c++) _mm512_storeu_ps(dst + 16 * c, _mm512_mul_ps(o[c], inv));
        }
    }
}
#endif

#if CK_ISA == 1
/* e^x for 8 lanes, x <= 0 (below -87 gives 0): exp16's steps. */
INLINE __m256 exp8(__m256 x) {
    const __m256 v = _mm256_max_ps(x, _mm256_set1_ps(-87.f));
    const __m256 t = _mm256_mul_ps(v, _mm256_set1_ps(1.44269504f));
    const __m256i n = _mm256_cvttps_epi32(_mm256_sub_ps(t, _mm256_set1_ps(0.5f)));
    const __m256 nf = _mm256_cvtepi32_ps(n);
    __m256 r = _mm256_sub_ps(v, _mm256_mul_ps(nf, _mm256_set1_ps(0.693145752f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(nf, _mm256_set1_ps(1.42860677e-6f)));
    __m256 p = _mm256_set1_ps(0.00138888892f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.00833333377f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.0416666679f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.166666672f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.f));
    const __m256 sc = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
    return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.f), _CMP_GE_OQ), _mm256_mul_ps(p, sc));
}

#define ATT_KEYS8 8  /* keys per pass over d: independent fma chains (fma latency x throughput) */
#define ATT_TILE 32  /* keys whose V rows stay in L1 while every query block and value chunk passes over them */

/* attend_group below with intrinsics (D % 8 == 0), 8 queries per ymm: the same per-query arithmetic in the same
 * order (a key past a query's range weighs +0 there, which changes no sum). Keys are the outer loop of both
 * passes, so K and V are read once per call however many query blocks there are; ob holds the (block, D, 8)
 * output sums between key tiles. */
static void attend_group256(const float *q, long ldq, int hd0, int G, const float *k, const float *v, int D, int T,
                            long start, float scale, float *qt, float *sc, float *ob, float *out, int H) {
    const int NQ = T * G, NB = (NQ + AL - 1) / AL, NS = (NQ + 7) / 8;
    const long n_max = start + T, W = (long)NB * AL;
    for (int d = 0; d < D; d++)
        for (int i = 0; i < NB * AL; i++)
            qt[(long)d * W + i] = i < NQ ? q[(long)(i / G) * ldq + (long)(hd0 + i % G) * D + d] : 0.f;
    int lim_a[NS * 8];
    for (int i = 0; i < NS * 8; i++) lim_a[i] = i < NQ ? (int)(start + i / G) : -1;
    const __m256 ninf = _mm256_set1_ps(-INFINITY), vs = _mm256_set1_ps(scale);
    __m256 mx[NS], sum[NS];
    for (int bq = 0; bq < NS; bq++) mx[bq] = ninf, sum[bq] = _mm256_setzero_ps();
    for (long j = 0; j < n_max; j += ATT_KEYS8) {
        const int nk = n_max - j < ATT_KEYS8 ? (int)(n_max - j) : ATT_KEYS8;
        const float *kj = k + j * D;
        for (int bq = 0; bq < NS; bq++) {
            __m256 acc[ATT_KEYS8];
            for (int u = 0; u < ATT_KEYS8; u++) acc[u] = _mm256_setzero_ps();
            const float *qb = qt + bq * 8;
            if (nk == ATT_KEYS8) {  /* a constant count keeps the accumulators in registers */
                for (int d = 0; d < D; d++) {
                    const __m256 qd = _mm256_loadu_ps(qb + (long)d * W);
                    _Pragma("GCC unroll 8") for (int u = 0; u < ATT_KEYS8; u++)
                        acc[u] = _mm256_fmadd_ps(qd, _mm256_broadcast_ss(kj + u * D + d), acc[u]);
                }
            } else {
                for (int d = 0; d < D; d++) {
                    const __m256 qd = _mm256_loadu_ps(qb + (long)d * W);
                    for (int u = 0; u < nk; u++) acc[u] = _mm256_fmadd_ps(qd, _mm256_broadcast_ss(kj + u * D + d), acc[u]);
                }
            }
            const __m256i lim = _mm256_loadu_si256((const __m256i *)(lim_a + bq * 8));
            for (int u = 0; u < nk; u++) {
                const __m256 past = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(j + u)), lim));
                const __m256 row = _mm256_blendv_ps(_mm256_mul_ps(acc[u], vs), ninf, past);
                _mm256_storeu_ps(sc + (j + u) * W + bq * 8, row);
                mx[bq] = _mm256_max_ps(mx[bq], row);
            }
        }
    }
    for (long j = 0; j < n_max; j++)
        for (int bq = 0; bq < NS; bq++) {
            float *row = sc + j * W + bq * 8;
            const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row), mx[bq]));
            _mm256_storeu_ps(row, e);
            sum[bq] = _mm256_add_ps(sum[bq], e);
        }
    memset(ob, 0, sizeof(float) * (size_t)NS * D * 8);
    for (long t0 = 0; t0 < n_max; t0 += ATT_TILE) {
        const long t1 = n_max - t0 < ATT_TILE ? n_max : t0 + ATT_TILE;
        for (int bq = 0; bq < NS; bq++)
            for (int d0 = 0; d0 < D; d0 += 8) {
                float *o8 = ob + ((long)bq * D + d0) * 8;
                __m256 o[8];
                _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) o[c] = _mm256_loadu_ps(o8 + 8 * c);
                for (long jj = t0; jj < t1; jj++) {
                    const __m256 pj = _mm256_loadu_ps(sc + jj * W + bq * 8);
                    const float *vr = v + jj * D + d0;
                    _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++)
                        o[c] = _mm256_fmadd_ps(pj, _mm256_broadcast_ss(vr + c), o[c]);
                }
                _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) _mm256_storeu_ps(o8 + 8 * c, o[c]);
            }
    }
    for (int bq = 0; bq < NS; bq++) {
        const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.f), sum[bq]);
        const int nl = NQ - bq * 8 < 8 ? NQ - bq * 8 : 8;
        for (int d = 0; d < D; d++) {
            float t[8];
            _mm256_storeu_ps(t, _mm256_mul_ps(_mm256_loadu_ps(ob + ((long)bq * D + d) * 8), inv));
            for (int l = 0; l < nl; l++) {
                const int i = bq * 8 + l;
                out[(long)(i / G) * H * D + (long)(hd0 + i % G) * D + d] = t[l];
            }
        }
    }
}
#endif

/* One kv head's queries (NQ = T rows x G heads, query i = row i / G, head i % G) against its first n_max keys.
 * Lanes hold queries, 16 at a time: query i's score for key j is its own fma chain over d = 0..D-1, its softmax
 * runs over keys 0..start + i / G in order (later keys are -inf: exp gives +0, which changes no sum), so every
 * query's result is the same whichever other queries share its call. */
static void attend_group(const float *q, long ldq, int hd0, int G, const float *k, const float *v, int D, int T,
                         long start, float scale, float *qt, float *sc, float *out, int H) {
    const int NQ = T * G, NB = (NQ + AL - 1) / AL;
    const long n_max = start + T;
    for (int d = 0; d < D; d++)  /* qt[d][i]: queries transposed, zero-padded to NB * AL lanes */
        for (int i = 0; i < NB * AL; i++)
            qt[(long)d * NB * AL + i] = i < NQ ? q[(long)(i / G) * ldq + (long)(hd0 + i % G) * D + d] : 0.f;
    for (int bq = 0; bq < NB; bq++) {
        float mx[AL], sum[AL];
        int lim[AL];
        for (int l = 0; l < AL; l++) {
            const int i = bq * AL + l;
            lim[l] = i < NQ ? (int)(start + i / G) : -1;
            mx[l] = -INFINITY;
            sum[l] = 0.f;
        }
        for (long j = 0; j < n_max; j++) {
            const float *kr = k + j * D;
            float acc[AL] = {0};
            for (int d = 0; d < D; d++) {
                const float kd = kr[d], *qd = qt + (long)d * NB * AL + bq * AL;
                for (int l = 0; l < AL; l++) acc[l] += qd[l] * kd;
            }
            float *row = sc + j * NB * AL + bq * AL;
            for (int l = 0; l < AL; l++) {
                row[l] = j <= lim[l] ? acc[l] * scale : -INFINITY;
                mx[l] = row[l] > mx[l] ? row[l] : mx[l];
            }
        }
        for (long j = 0; j < n_max; j++) {
            float *row = sc + j * NB * AL + bq * AL;
            float e[AL];
            for (int l = 0; l < AL; l++) e[l] = row[l] - mx[l];
            exp_lanes(e);
            for (int l = 0; l < AL; l++) { row[l] = e[l]; sum[l] += e[l]; }
        }
        for (int l = 0; l < AL; l++) {
            const int i = bq * AL + l;
            if (i >= NQ) break;
            float *o = out + (long)(i / G) * H * D + (long)(hd0 + i % G) * D;
            for (int d = 0; d < D; d++) o[d] = 0.f;
            for (long j = 0; j <= lim[l]; j++) {
                const float p = sc[j * NB * AL + i], *vr = v + j * D;
                for (int d = 0; d < D; d++) o[d] += p * vr[d];
            }
            const float inv = 1.f / sum[l];
            for (int d = 0; d < D; d++) o[d] *= inv;
        }
    }
}

/* q: T rows of H heads (row stride ldq, head stride D); k, v: n_kv heads (head stride ldh, row stride D) holding at
 * least start + T positions; out: (T, H * D) contiguous. Returns 0, or -1 (bad arguments / no memory). */
int ck_attention(const float *q, long ldq, const float *k, const float *v, long ldh, float *out, int T, int H,
                 int n_kv, int D, long start, float scale, int nthreads) {
    if (T < 1 || H < 1 || n_kv < 1 || H % n_kv || D < 1 || start < 0) return -1;
    const int G = H / n_kv, NB = (T * G + AL - 1) / AL;
    const long n_max = start + T;
    /* transposed queries, scores and (AVX2) the output sums, per kv head */
    const long per = (long)D * NB * AL + n_max * NB * AL + (long)D * NB * AL;
    int nt = nthreads > 0 ? nthreads : 1;
    if (nt > n_kv) nt = n_kv;
    if ((long)T * H * n_max * D < 100000) nt = 1;
    float *scratch = malloc(sizeof(float) * (size_t)(per * nt));
    if (!scratch) return -1;
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *qt = scratch + per * tid, *sc = qt + (long)D * NB * AL;
#pragma omp for schedule(static)
        for (int g = 0; g < n_kv; g++) {
#if CK_ISA == 2
            if (D % 16 == 0 && D <= 16 * ATT_DMAX) {
                attend_group512(q, ldq, g * G, G, k + (long)g * ldh, v + (long)g * ldh, D, T, start, scale, qt, sc, out, H);
                continue;
            }
#elif CK_ISA == 1
            if (D % 8 == 0) {
                attend_group256(q, ldq, g * G, G, k + (long)g * ldh, v + (long)g * ldh, D, T, start, scale, qt, sc,
                                sc + n_max * NB * AL, out, H);
                continue;
            }
#endif
            attend_group(q, ldq, g * G, G, k + (long)g * ldh, v + (long)g * ldh, D, T, start, scale, qt, sc, out, H);
        }
    }
    free(scratch);
    return 0;
}

/* ---- RMS norm of rows -------------------------------------------------------------------------------------
 *
 * y[m] = x[m] * (1 / sqrt(mean(x[m]^2) + eps)) * w, each row alone (the same bits whatever M is). torch's rms_norm
 * costs ~40 us a call on one short row (dispatch and threading), 57 calls a decode step of the 1.5B. */
int ck_rms_norm(const float *x, long ldx, int M, int K, const float *w, float eps, float *y, long ldy) {
    if (M < 1 || K < 1) return -1;
    for (int m = 0; m < M; m++) {
        const float *xr = x + (long)m * ldx;
        float *yr = y + (long)m * ldy;
        float part[8] = {0};
        int i = 0;
        for (; i + 8 <= K; i += 8)
            for (int l = 0; l < 8; l++) part[l] += xr[i + l] * xr[i + l];
        for (; i < K; i++) part[i % 8] += xr[i] * xr[i];
        const float ss = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
        const float r = 1.f / sqrtf(ss / (float)K + eps);
        for (i = 0; i < K; i++) yr[i] = (xr[i] * r) * w[i];
    }
    return 0;
}
