/* Small-M quantized matmul for the CPU runtime: y (M, N) = x (M, K) @ W.T for M <= 16 (decode, verify).
 *
 * Built at first use by runtime/cpu_kernels/__init__.py (gcc -O3 -march=native -fopenmp); no torch headers,
 * called through ctypes with tensor data pointers. OpenMP resolves to the libgomp torch already loaded, so
 * these parallel regions run on torch's own thread pool.
 *
 * Activations: each row of x becomes two int8 planes like the torch path's (runtime/weights.py Int8Linear):
 *   step = max|x| / 127, hi = round(x / step), lo = round((x - hi * step) * (254 / step)),
 *   x ~= step / 254 * X with X = 254 * hi + lo (error <= max|x| / 64516).
 * Weight formats (one output row after another, K % 32 == 0):
 *   CK_Q8R  int8 (N, K) codes c, fp32 scale per row:                  w = scale[n] * c
 *   CK_Q5B  22-byte blocks of 32 {fp16 d; u8 qh[4]; u8 qs[16]}:         w = d * (u - 16), u in 0..31
 *           u_j = (qs[j % 16] >> 4 * (j / 16)) & 15 | ((qh >> j) & 1) << 4   (qh little-endian 32-bit)
 *   CK_Q4B  24-byte blocks of 32 {fp32 s; fp32 lo; u8 qs[16]}:          w = lo + s * u, u in 0..15 (same nibbles)
 * CK_Q8R sums both planes in int32 over the whole row (exact); the block formats take per block the integer dots
 * of the 32 codes with both planes and accumulate them in fp32 scaled by the block's weight scale, in a fixed
 * order. Every (m, n) result is computed by the same instructions whatever M, the row chunking or the
 * thread split is, so a verify pass of k rows gives bit for bit what k single-row calls give.
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

enum { CK_Q8R = 0, CK_Q5B = 1, CK_Q4B = 2 };
#define QK 32
#define MAX_M 64
#define MC_MAX 8

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#define CK_ISA 2
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CK_ISA 1
#else
#define CK_ISA 0
#endif

int ck_isa(void) { return CK_ISA; }
int ck_version(void) { return 3; }

/* ---- activations ------------------------------------------------------------------------------------- */

typedef struct {
    int M, K, nb;
    int8_t *hi, *lo;    /* (M, K) the two planes */
    uint8_t *ahi, *alo; /* (M, K) unsigned forms for the Q8R dot: hi + 128 (VNNI) or |hi| (AVX2) */
    uint8_t *alo2;      /* (M, K) VNNI: lo2 + 128 with lo2 = round((x - hi * step) * (256 / step)) */
    float *step;        /* (M) */
    float *xsum;        /* (M, nb) sum of X = 254 hi + lo over the block */
    float *xsum2t;      /* (nb, M) VNNI: sum of X2 = 256 hi + lo2 over the block */
} Act;

static __thread void *ws_buf = NULL;
static __thread size_t ws_size = 0;

static int act_alloc(Act *a, int M, int K) {
    size_t nb = (size_t)K / QK;
    size_t need = (size_t)M * K * 5 + (size_t)M * nb * 8 + (size_t)M * 4 + 256;
    if (need > ws_size) {
        free(ws_buf);
        ws_buf = NULL;
        if (posix_memalign(&ws_buf, 64, need)) { ws_size = 0; return -1; }
        ws_size = need;
    }
    char *p = (char *)ws_buf;
    a->M = M; a->K = K; a->nb = (int)nb;
    a->hi = (int8_t *)p; p += (size_t)M * K;
    a->lo = (int8_t *)p; p += (size_t)M * K;
    a->ahi = (uint8_t *)p; p += (size_t)M * K;
    a->alo = (uint8_t *)p; p += (size_t)M * K;
    a->alo2 = (uint8_t *)p; p += (size_t)M * K;
    a->xsum = (float *)p; p += (size_t)M * nb * 4;
    a->xsum2t = (float *)p; p += (size_t)M * nb * 4;
    a->step = (float *)p;
    return 0;
}

static inline int clamp127(int v) { return v > 127 ? 127 : (v < -127 ? -127 : v); }

static void quant_rows(const float *x, long ldx, Act *a) {
    for (int m = 0; m < a->M; m++) {
        const float *xr = x + (long)m * ldx;
        float amax = 0.f;
        for (int i = 0; i < a->K; i++) { float v = fabsf(xr[i]); amax = v > amax ? v : amax; }
        float step = amax / 127.f;
        if (!(step > 1e-30f)) step = 1e-30f;
        float r = 254.f / step;
        a->step[m] = step;
        int8_t *hi = a->hi + (long)m * a->K, *lo = a->lo + (long)m * a->K;
        uint8_t *ahi = a->ahi + (long)m * a->K, *alo = a->alo + (long)m * a->K;
        for (int i = 0; i < a->K; i++) {
            float h = nearbyintf(xr[i] / step);
            int hv = clamp127((int)h);
            float res = xr[i] - h * step;
            int lv = clamp127((int)nearbyintf(res * r));
            hi[i] = (int8_t)hv; lo[i] = (int8_t)lv;
#if CK_ISA == 2
            ahi[i] = (uint8_t)(hv + 128); alo[i] = (uint8_t)(lv + 128);
            a->alo2[(long)m * a->K + i] = (uint8_t)(clamp127((int)nearbyintf(res * (256.f / step))) + 128);
#else
            ahi[i] = (uint8_t)(hv < 0 ? -hv : hv); alo[i] = (uint8_t)(lv < 0 ? -lv : lv);
#endif
        }
        for (int b = 0; b < a->nb; b++) {
            int s = 0, s2 = 0;
            for (int i = b * QK; i < (b + 1) * QK; i++) {
                s += 254 * hi[i] + lo[i];
                s2 += 256 * hi[i] + ((int)a->alo2[(long)m * a->K + i] - 128);
            }
            a->xsum[m * a->nb + b] = (float)s;
            a->xsum2t[(long)b * a->M + m] = (float)s2;
        }
    }
}

/* ---- SIMD building blocks ---------------------------------------------------------------------------- */

#if CK_ISA >= 1
#define INLINE static inline __attribute__((always_inline))

INLINE __m256i dot_u8s8(__m256i u, __m256i s) {  /* 8 int32 lanes, lane i = sum of products 4i..4i+3 */
#if CK_ISA == 2
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

INLINE __m256i acc_u8s8(__m256i acc, __m256i u, __m256i s) {
#if CK_ISA == 2
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

INLINE __m256i nibbles(const uint8_t *qs) {  /* 16 bytes -> 32 codes: low nibbles then high nibbles */
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

INLINE __m256i bit4_from_mask(uint32_t qh) {  /* bit j of qh -> 0x10 in byte j */
#if CK_ISA == 2
    return _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10));
#else
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
#endif
}

INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

INLINE float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

/* Output row n for activation rows m0..m0+MC-1 (MC a compile-time constant after inlining).
 * Q8R: exact int32 sums of both planes; with VNNI the activations are offset by +128 and the row sum of the
 * weights (rowsum) takes the offset back out. */
INLINE void row_q8r(const int8_t *w, float wscale, int rowsum, const Act *a, int m0, const int MC, float *y, long ldy) {
    __m256i ah[MC_MAX], al[MC_MAX];
    for (int j = 0; j < MC; j++) { ah[j] = _mm256_setzero_si256(); al[j] = _mm256_setzero_si256(); }
    for (int b = 0; b < a->nb; b++) {
        __m256i wv = _mm256_loadu_si256((const __m256i *)(w + b * QK));
        for (int j = 0; j < MC; j++) {
            long off = (long)(m0 + j) * a->K + b * QK;
            __m256i xh = _mm256_loadu_si256((const __m256i *)(a->ahi + off));
            __m256i xl = _mm256_loadu_si256((const __m256i *)(a->alo + off));
#if CK_ISA == 2
            ah[j] = acc_u8s8(ah[j], xh, wv);
            al[j] = acc_u8s8(al[j], xl, wv);
#else
            __m256i sh = _mm256_loadu_si256((const __m256i *)(a->hi + off));
            __m256i sl = _mm256_loadu_si256((const __m256i *)(a->lo + off));
            ah[j] = acc_u8s8(ah[j], xh, _mm256_sign_epi8(wv, sh));
            al[j] = acc_u8s8(al[j], xl, _mm256_sign_epi8(wv, sl));
#endif
        }
    }
    for (int j = 0; j < MC; j++) {
        int sh = hsum_i32(ah[j]), sl = hsum_i32(al[j]);
#if CK_ISA == 2
        sh -= 128 * rowsum; sl -= 128 * rowsum;
#else
        (void)rowsum;
#endif
        float v = (float)sh + (float)sl * (1.f / 254.f);
        y[(long)j * ldy] = v * a->step[m0 + j] * wscale;
    }
}

/* Block formats: per block, dots of the codes with both planes, scaled by the weight's block scale. */
#define BLOCK_LOOP(DECODE, SCALE, OFFSET)                                                                     \
    __m256 fh[MC_MAX], fl[MC_MAX];                                                                            \
    float off[MC_MAX];                                                                                        \
    for (int j = 0; j < MC; j++) { fh[j] = _mm256_setzero_ps(); fl[j] = _mm256_setzero_ps(); off[j] = 0.f; } \
    for (int b = 0; b < a->nb; b++) {                                                                         \
        DECODE                                                                                                \
        __m256 sv = _mm256_set1_ps(SCALE);                                                                    \
        for (int j = 0; j < MC; j++) {                                                                        \
            long xo = (long)(m0 + j) * a->K + b * QK;                                                         \
            __m256i ph = dot_u8s8(u, _mm256_loadu_si256((const __m256i *)(a->hi + xo)));                      \
            __m256i pl = dot_u8s8(u, _mm256_loadu_si256((const __m256i *)(a->lo + xo)));                      \
            fh[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ph), sv, fh[j]);                                       \
            fl[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pl), sv, fl[j]);                                       \
            off[j] = off[j] + (OFFSET) * a->xsum[(m0 + j) * a->nb + b];                                       \
        }                                                                                                     \
    }

#if CK_ISA != 2
INLINE void row_q5b(const uint8_t *w, const Act *a, int m0, const int MC, float *y, long ldy) {
    BLOCK_LOOP(const uint8_t *blk = w + (long)b * 22;
               uint16_t dh; uint32_t qh;
               memcpy(&dh, blk, 2); memcpy(&qh, blk + 2, 4);
               float d = f16_to_f32(dh);
               __m256i u = _mm256_or_si256(nibbles(blk + 6), bit4_from_mask(qh));,
               d, d)
    for (int j = 0; j < MC; j++) {
        float v = hsum(fh[j]) * 254.f + hsum(fl[j]) - 16.f * off[j];
        y[(long)j * ldy] = v * (a->step[m0 + j] * (1.f / 254.f));
    }
}

INLINE void row_q4b(const uint8_t *w, const Act *a, int m0, const int MC, float *y, long ldy) {
    BLOCK_LOOP(const uint8_t *blk = w + (long)b * 24;
               float s; float lo;
               memcpy(&s, blk, 4); memcpy(&lo, blk + 4, 4);
               __m256i u = nibbles(blk + 8);,
               s, lo)
    for (int j = 0; j < MC; j++) {
        float v = hsum(fh[j]) * 254.f + hsum(fl[j]) + off[j];
        y[(long)j * ldy] = v * (a->step[m0 + j] * (1.f / 254.f));
    }
}
#else
/* AVX-512 VNNI: two blocks of 32 per 512-bit register (an odd last block runs with zero codes in the upper half;
 * its activation loads may read past the row, inside the workspace, and are multiplied by zeros).
 * Activations are unsigned (plane + 128); the +128 comes back out through 128 * sum(codes). Per row and block
 * pair: X2 = 256 hi + lo2 summed in int32 per block, one fp32 multiply-add by the blocks' scales. */
#define MCB_MAX 16 /* block formats: activation rows per pass over a weight row (one 512-bit accumulator each) */

INLINE __m512i pair256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

INLINE __m256i q5_codes(const uint8_t *blk) { /* signed c = u - 16 */
    uint32_t qh;
    memcpy(&qh, blk + 2, 4);
    return _mm256_sub_epi8(_mm256_or_si256(nibbles(blk + 6), bit4_from_mask(qh)), _mm256_set1_epi8(16));
}

INLINE float q5_scale(const uint8_t *blk) { uint16_t dh; memcpy(&dh, blk, 2); return f16_to_f32(dh); }

/* acc[j] += cvt(X2 . c per block) * scale, for a block pair with codes c (signed, |c| <= 16) and scales sv. */
#define PAIR_ROWS(MC, XOFF)                                                                                   \
    {                                                                                                          \
        const __m512i nc = _mm512_sub_epi32(_mm512_setzero_si512(),                                            \
                                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, c));             \
        _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++) {                                                \
            const uint8_t *xh = ahi + (long)j * K + (XOFF), *xl = alo2 + (long)j * K + (XOFF);                 \
            __m512i p = _mm512_dpbusd_epi32(nc, _mm512_loadu_si512((const void *)xh), c);                      \
            p = _mm512_add_epi32(_mm512_slli_epi32(p, 8), nc);                                                 \
            p = _mm512_dpbusd_epi32(p, _mm512_loadu_si512((const void *)xl), c);                               \
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sv, acc[j]);                                       \
        }                                                                                                      \
    }

INLINE void row_q5b(const uint8_t *w, const Act *a, int m0, const int MC, float *y, long ldy) {
    __m512 acc[MCB_MAX];
    const long K = a->K;
    const int nb = a->nb;
    const uint8_t *ahi = a->ahi + (long)m0 * K, *alo2 = a->alo2 + (long)m0 * K;
    const __m512i k128 = _mm512_set1_epi8((char)0x80);
    _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++) acc[j] = _mm512_setzero_ps();
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        const uint8_t *b0 = w + (long)b * 22, *b1 = b0 + 22;
        const __m512i c = pair256(q5_codes(b0), q5_codes(b1));
        const __m512 sv = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(q5_scale(b0)), _mm512_set1_ps(q5_scale(b1)));
        PAIR_ROWS(MC, b * QK)
    }
    if (b < nb) {
        const uint8_t *b0 = w + (long)b * 22;
        const __m512i c = pair256(q5_codes(b0), _mm256_setzero_si256());
        const __m512 sv = _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(q5_scale(b0)));
        PAIR_ROWS(MC, b * QK)
    }
    _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++)
        y[(long)j * ldy] = _mm512_reduce_add_ps(acc[j]) * (a->step[m0 + j] * (1.f / 256.f));
}

/* Q4B: w = lo + s * u; the lo part is sum over blocks of lo_b * (sum of X2 over the block), added in a second,
 * fixed-order pass. */
INLINE void row_q4b(const uint8_t *w, const Act *a, int m0, const int MC, float *y, long ldy) {
    __m512 acc[MCB_MAX];
    const long K = a->K;
    const int nb = a->nb;
    const uint8_t *ahi = a->ahi + (long)m0 * K, *alo2 = a->alo2 + (long)m0 * K;
    const __m512i k128 = _mm512_set1_epi8((char)0x80);
    _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++) acc[j] = _mm512_setzero_ps();
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        const uint8_t *b0 = w + (long)b * 24, *b1 = b0 + 24;
        float s0, s1;
        memcpy(&s0, b0, 4); memcpy(&s1, b1, 4);
        const __m512i c = pair256(nibbles(b0 + 8), nibbles(b1 + 8));
        const __m512 sv = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(s0), _mm512_set1_ps(s1));
        PAIR_ROWS(MC, b * QK)
    }
    if (b < nb) {
        const uint8_t *b0 = w + (long)b * 24;
        float s0;
        memcpy(&s0, b0, 4);
        const __m512i c = pair256(nibbles(b0 + 8), _mm256_setzero_si256());
        const __m512 sv = _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(s0));
        PAIR_ROWS(MC, b * QK)
    }
    /* offsets of all MC rows at once, one lane per row, in four interleaved partial sums (the same for any MC) */
    const __mmask16 mk = (__mmask16)((1u << MC) - 1);
    __m512 o0 = _mm512_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
    const float *xs = a->xsum2t + m0;
    int bb = 0;
    for (; bb + 4 <= nb; bb += 4) {
        float l0, l1, l2, l3;
        memcpy(&l0, w + (long)bb * 24 + 4, 4); memcpy(&l1, w + (long)bb * 24 + 28, 4);
        memcpy(&l2, w + (long)bb * 24 + 52, 4); memcpy(&l3, w + (long)bb * 24 + 76, 4);
        o0 = _mm512_fmadd_ps(_mm512_set1_ps(l0), _mm512_maskz_loadu_ps(mk, xs + (long)bb * a->M), o0);
        o1 = _mm512_fmadd_ps(_mm512_set1_ps(l1), _mm512_maskz_loadu_ps(mk, xs + (long)(bb + 1) * a->M), o1);
        o2 = _mm512_fmadd_ps(_mm512_set1_ps(l2), _mm512_maskz_loadu_ps(mk, xs + (long)(bb + 2) * a->M), o2);
        o3 = _mm512_fmadd_ps(_mm512_set1_ps(l3), _mm512_maskz_loadu_ps(mk, xs + (long)(bb + 3) * a->M), o3);
    }
    for (; bb < nb; bb++) {
        float l0;
        memcpy(&l0, w + (long)bb * 24 + 4, 4);
        o0 = _mm512_fmadd_ps(_mm512_set1_ps(l0), _mm512_maskz_loadu_ps(mk, xs + (long)bb * a->M), o0);
    }
    float off[16];
    _mm512_storeu_ps(off, _mm512_add_ps(_mm512_add_ps(o0, o1), _mm512_add_ps(o2, o3)));
    _Pragma("GCC unroll 16") for (int j = 0; j < MC; j++)
        y[(long)j * ldy] = (_mm512_reduce_add_ps(acc[j]) + off[j]) * (a->step[m0 + j] * (1.f / 256.f));
}

/* Q8R: exact int32 sums of both planes over the whole row, two blocks per instruction. */
INLINE void row_q8r_512(const int8_t *w, float wscale, int rowsum, const Act *a, int m0, const int MC, float *y, long ldy) {
    __m512i ah[MC_MAX], al[MC_MAX];
    const long K = a->K;
    const int nb = a->nb;
    const uint8_t *ahi = a->ahi + (long)m0 * K, *alo = a->alo + (long)m0 * K;
    _Pragma("GCC unroll 8") for (int j = 0; j < MC; j++) { ah[j] = _mm512_setzero_si512(); al[j] = _mm512_setzero_si512(); }
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        const __m512i wv = _mm512_loadu_si512((const void *)(w + b * QK));
        _Pragma("GCC unroll 8") for (int j = 0; j < MC; j++) {
            ah[j] = _mm512_dpbusd_epi32(ah[j], _mm512_loadu_si512((const void *)(ahi + j * K + b * QK)), wv);
            al[j] = _mm512_dpbusd_epi32(al[j], _mm512_loadu_si512((const void *)(alo + j * K + b * QK)), wv);
        }
    }
    if (b < nb) {
        const __m512i wv = pair256(_mm256_loadu_si256((const __m256i *)(w + b * QK)), _mm256_setzero_si256());
        _Pragma("GCC unroll 8") for (int j = 0; j < MC; j++) {
            ah[j] = _mm512_dpbusd_epi32(ah[j], _mm512_loadu_si512((const void *)(ahi + j * K + b * QK)), wv);
            al[j] = _mm512_dpbusd_epi32(al[j], _mm512_loadu_si512((const void *)(alo + j * K + b * QK)), wv);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < MC; j++) {
        int sh = _mm512_reduce_add_epi32(ah[j]) - 128 * rowsum, sl = _mm512_reduce_add_epi32(al[j]) - 128 * rowsum;
        float v = (float)sh + (float)sl * (1.f / 254.f);
        y[(long)j * ldy] = v * a->step[m0 + j] * wscale;
    }
}
#endif

#define DISPATCH_MC(CALL) \
    switch (mc) { case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; case 4: CALL(4); break; \
                  case 5: CALL(5); break; case 6: CALL(6); break; case 7: CALL(7); break; default: CALL(8); break; }
#define DISPATCH_MC16(CALL) \
    switch (mc) { case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; case 4: CALL(4); break; \
                  case 5: CALL(5); break; case 6: CALL(6); break; case 7: CALL(7); break; case 8: CALL(8); break; \
                  case 9: CALL(9); break; case 10: CALL(10); break; case 11: CALL(11); break; case 12: CALL(12); break; \
                  case 13: CALL(13); break; case 14: CALL(14); break; case 15: CALL(15); break; default: CALL(16); break; }
#if CK_ISA == 2
#define ROW_Q8R row_q8r_512
#define BLK_MC_MAX MCB_MAX
#define DISPATCH_BLK DISPATCH_MC16
#else
#define ROW_Q8R row_q8r
#define BLK_MC_MAX MC_MAX
#define DISPATCH_BLK DISPATCH_MC
#endif

static void rows_range(int fmt, const void *W, const float *wscale, const int *rowsum, long n0, long n1,
                       const Act *a, float *y, long ldy) {
    long K = a->K, nb = a->nb;
    int mcmax = fmt == CK_Q8R ? MC_MAX : BLK_MC_MAX;
    for (long n = n0; n < n1; n++) {
        int m0 = 0;
        while (m0 < a->M) {
            int rem = a->M - m0, chunks = (rem + mcmax - 1) / mcmax;
            int mc = (rem + chunks - 1) / chunks;  /* even chunks: 9 -> 5 + 4, not 8 + 1 */
            float *yo = y + (long)m0 * ldy + n;
            if (fmt == CK_Q8R) {
                const int8_t *w = (const int8_t *)W + n * K;
                int rs = rowsum ? rowsum[n] : 0;
#define C8(MC) ROW_Q8R(w, wscale[n], rs, a, m0, MC, yo, ldy)
                DISPATCH_MC(C8)
            } else if (fmt == CK_Q5B) {
                const uint8_t *w = (const uint8_t *)W + n * nb * 22;
#define C5(MC) row_q5b(w, a, m0, MC, yo, ldy)
                DISPATCH_BLK(C5)
            } else {
                const uint8_t *w = (const uint8_t *)W + n * nb * 24;
#define C4(MC) row_q4b(w, a, m0, MC, yo, ldy)
                DISPATCH_BLK(C4)
            }
            m0 += mc;
        }
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

static void rows_range(int fmt, const void *W, const float *wscale, const int *rowsum, long n0, long n1,
                       const Act *a, float *y, long ldy) {
    long K = a->K, nb = a->nb;
    (void)rowsum;
    for (long n = n0; n < n1; n++) {
        for (int m = 0; m < a->M; m++) {
            const int8_t *hi = a->hi + (long)m * K, *lo = a->lo + (long)m * K;
            float v;
            if (fmt == CK_Q8R) {
                const int8_t *w = (const int8_t *)W + n * K;
                long sh = 0, sl = 0;
                for (long i = 0; i < K; i++) { sh += w[i] * hi[i]; sl += w[i] * lo[i]; }
                v = ((float)sh + (float)sl * (1.f / 254.f)) * a->step[m] * wscale[n];
            } else {
                float fh = 0.f, fl = 0.f, off = 0.f;
                for (long b = 0; b < nb; b++) {
                    int u[QK]; float scale, offset_w;
                    if (fmt == CK_Q5B) {
                        const uint8_t *blk = (const uint8_t *)W + (n * nb + b) * 22;
                        uint16_t dh; uint32_t qh; memcpy(&dh, blk, 2); memcpy(&qh, blk + 2, 4);
                        scale = offset_w = f16_to_f32(dh);
                        for (int i = 0; i < QK; i++) u[i] = ((blk[6 + i % 16] >> (4 * (i / 16))) & 15) | (((qh >> i) & 1) << 4);
                    } else {
                        const uint8_t *blk = (const uint8_t *)W + (n * nb + b) * 24;
                        memcpy(&scale, blk, 4); memcpy(&offset_w, blk + 4, 4);
                        for (int i = 0; i < QK; i++) u[i] = (blk[8 + i % 16] >> (4 * (i / 16))) & 15;
                    }
                    int ph = 0, pl = 0;
                    for (int i = 0; i < QK; i++) { ph += u[i] * hi[b * QK + i]; pl += u[i] * lo[b * QK + i]; }
                    fh = fh + (float)ph * scale;
                    fl = fl + (float)pl * scale;
                    off = off + offset_w * a->xsum[m * nb + b];
                }
                v = fh * 254.f + fl + (fmt == CK_Q5B ? -16.f * off : off);
                v = v * (a->step[m] * (1.f / 254.f));
            }
            y[(long)m * ldy + n] = v;
        }
    }
}
#endif

/* ---- entry point ------------------------------------------------------------------------------------- */

/* y (M, ldy) gets columns seg_n0[s] .. seg_n0[s] + seg_n[s] from segment s (format seg_fmt[s], weights seg_w[s],
 * per-row scales seg_scale[s] and int32 row sums of the codes seg_rowsum[s] for CK_Q8R); bias (sum of seg_n entries) is added when not NULL.
 * x (M, K) fp32 with row stride ldx. Returns 0, or -1 (bad arguments / no memory). */
int ck_linear(const float *x, long ldx, int M, int K, int nseg, const int *seg_fmt, const void *const *seg_w,
              const float *const *seg_scale, const int *const *seg_rowsum, const long *seg_n0, const long *seg_n,
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
            if (lo < hi)
                rows_range(seg_fmt[s], seg_w[s], seg_scale[s], seg_rowsum[s], lo, hi, &a, y + seg_n0[s], ldy);
            base += seg_n[s];
        }
    }
    if (bias) {
        for (int m = 0; m < M; m++)
            for (long n = 0; n < total; n++) y[(long)m * ldy + n] += bias[n];
    }
    return 0;
}
